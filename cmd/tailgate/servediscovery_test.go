package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/tailgate-dev/tailgate/internal/dnstest"
)

// dnsRefresh is the tests' -dns-refresh: short, so that a change comes
// soon (the tests wait for it, and log how long it took).
const dnsRefresh = 200 * time.Millisecond

// fleet is loopback replicas that count their reads; a read of /hold
// waits until hold is closed.
type fleet struct {
	srv   []*httptest.Server
	reads []atomic.Int64
	hold  chan struct{}
	once  sync.Once
}

// newFleet starts n replicas, each on a listener of listen(i) (nil: any
// free port on 127.0.0.1).
func newFleet(t *testing.T, n int, listen func(i int) net.Listener) *fleet {
	t.Helper()
	f := &fleet{reads: make([]atomic.Int64, n), hold: make(chan struct{})}
	for i := range n {
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.reads[i].Add(1)
			if r.URL.Path == "/hold" {
				select {
				case <-f.hold:
				case <-r.Context().Done():
					return
				}
			}
			fmt.Fprintf(w, "replica %d", i)
		}))
		if listen != nil {
			s.Listener.Close()
			s.Listener = listen(i)
		}
		s.Start()
		f.srv = append(f.srv, s)
		t.Cleanup(s.Close)
	}
	t.Cleanup(f.release) // first: a server's Close waits for its handlers
	return f
}

func (f *fleet) release() { f.once.Do(func() { close(f.hold) }) }

func (f *fleet) port(i int) uint16 {
	_, p, _ := net.SplitHostPort(f.srv[i].Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return uint16(n)
}

// reader sends reads to the gateway without pause until stopped, and
// counts those that failed (an error, or a status other than 200).
type reader struct {
	stop   chan struct{}
	done   sync.WaitGroup
	reads  atomic.Int64
	mu     sync.Mutex
	failed []string
}

func startReader(t *testing.T, addr string, workers int) *reader {
	r := &reader{stop: make(chan struct{})}
	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	for w := range workers {
		r.done.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-r.stop:
					return
				default:
				}
				resp, err := client.Get(fmt.Sprintf("http://%s/item?id=%d-%d", addr, w, i))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				r.reads.Add(1)
				if err != nil {
					r.mu.Lock()
					r.failed = append(r.failed, err.Error())
					r.mu.Unlock()
				}
				time.Sleep(time.Millisecond) // a bounded number of reads
			}
		})
	}
	t.Cleanup(func() { r.end(); tr.CloseIdleConnections() })
	return r
}

// end stops the reads and returns the failures.
func (r *reader) end() []string {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.done.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.failed)
}

// eventually waits for cond and returns how long it took. It waits for
// the event, not for a time: how soon a change takes is the watcher's
// (pinned to the instant in virtual time by internal/discovery's tests)
// and bench/discovery.sh's to measure, and a busy machine may take
// seconds over what an idle one does. The cap only ends a test that
// would otherwise hang.
func eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	const hang = time.Minute
	start := time.Now()
	for !cond() {
		if time.Since(start) > hang {
			t.Fatalf("%s: not after %v", what, hang)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

func (s *served) has(backend string) bool {
	set := s.g.Replicas()
	for i := range set.Len() {
		if set.Name(i) == backend {
			return true
		}
	}
	return false
}

func startDNSServer(t *testing.T) *dnstest.Server {
	t.Helper()
	d, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// The replicas follow SRV records through serve, reads running all along:
// an added replica comes into use, and a removed one leaves the set (the
// time each took is logged); the read in flight on the replica removed
// finishes (drained, shown as draining meanwhile), and it gets no new
// read; SERVFAIL and an empty answer keep
// the set, are logged once each, counted, and said in /readyz's body;
// and not one read fails.
func TestServeDiscoverySRV(t *testing.T) {
	d := startDNSServer(t)
	rs := newFleet(t, 3, nil)
	const name = "_http._tcp.replicas.test"
	srv := func(is ...int) {
		var recs []dnstest.SRV
		for _, i := range is {
			recs = append(recs, dnstest.SRV{Target: "r.test", Port: rs.port(i)})
		}
		d.SetSRV(name, 30, recs...)
	}
	url := func(i int) string { return rs.srv[i].URL }
	d.SetA("r.test", 30, "127.0.0.1")
	srv(0)
	s := startServed(t, loopback, "-backends", "dnssrv+http://"+name, "-dns-server", d.Addr,
		"-dns-refresh", dnsRefresh.String(), "-hedge-delay", "50ms")
	if !s.has(url(0)) || s.g.Replicas().Len() != 1 {
		t.Fatalf("replicas at start: %v", s.g.Replicas().Snapshot(time.Now()))
	}
	held := make(chan int, 1)
	go func() {
		code, body, _ := do(t, "GET", "http://"+s.addr+"/hold")
		if body != "replica 0" {
			code = -code
		}
		held <- code
	}()
	eventually(t, "the held read reaches replica 0", func() bool { return rs.reads[0].Load() == 1 })
	rd := startReader(t, s.addr, 4)

	// Add: replicas 1 and 2 are in use.
	before1, before2 := rs.reads[1].Load(), rs.reads[2].Load()
	srv(0, 1, 2)
	took := eventually(t, "replicas 1 and 2 in use", func() bool {
		return rs.reads[1].Load() > before1 && rs.reads[2].Load() > before2
	})
	t.Logf("added: in use after %v", took)

	// Remove replica 0, while the held read is in flight on it.
	srv(1, 2)
	took = eventually(t, "replica 0 out of the set", func() bool { return !s.has(url(0)) })
	t.Logf("removed: out of the set after %v", took)
	// The reads that picked it before the change end: on its way out it
	// shows as draining, and once only the held read is left on it, every
	// other read it was to get has arrived.
	eventually(t, "replica 0 drained to its held read", func() bool {
		d := s.g.Debug(time.Now()).Draining
		return len(d) == 1 && d[0].Name == url(0) && d[0].InFlight == 1
	})
	drained := rs.reads[0].Load()
	rs.release()
	if code := <-held; code != 200 {
		t.Errorf("the read in flight on the removed replica: %d, want 200 from replica 0", code)
	}
	s.waitLog(t, `msg="discovery: backends changed" added="" removed=`+url(0))

	// SERVFAIL, then an empty answer: the set stays, through refreshes.
	d.Fail(name, dns.RcodeServerFailure)
	s.waitLog(t, `level=WARN msg="discovery: name did not resolve; its last good replicas are kept" name=dnssrv\+http://`+name)
	time.Sleep(3 * dnsRefresh)
	code, body, _ := do(t, "GET", "http://"+s.admin+"/readyz")
	if code != 200 || !strings.Contains(body, "discovery stale: dnssrv+http://"+name) || !strings.Contains(body, "keeping 2 replicas") {
		t.Errorf("readyz while DNS fails: %d %q", code, body)
	}
	d.SetSRV(name, 30)
	s.waitLog(t, `level=WARN msg="discovery: name has no records; its last good replicas are kept"`)
	time.Sleep(3 * dnsRefresh)
	if set := s.g.Replicas(); set.Len() != 2 || !s.has(url(1)) || !s.has(url(2)) {
		t.Errorf("replicas after failed and empty answers: %v", set.Snapshot(time.Now()))
	}
	_, metrics, _ := do(t, "GET", "http://"+s.admin+"/metrics")
	if !strings.Contains(metrics, `tailgate_discovery_stale{name="dnssrv+http://`+name+`"} 1`) ||
		strings.Contains(metrics, `tailgate_discovery_errors_total{name="dnssrv+http://`+name+`"} 0`) {
		t.Errorf("metrics while stale:\n%s", grepLines(metrics, "tailgate_discovery_"))
	}
	if n := strings.Count(s.logs.String(), "did not resolve"); n != 1 {
		t.Errorf("the failure logged %d times, want once", n)
	}
	if n := strings.Count(s.logs.String(), "has no records"); n != 1 {
		t.Errorf("the empty answer logged %d times, want once", n)
	}

	if got := rs.reads[0].Load(); got != drained {
		t.Errorf("replica 0 got %d reads after its removal", got-drained)
	}

	// Recovery with a change: replica 0 back (cold), replica 1 out.
	srv(0, 2)
	took = eventually(t, "replica 0 back and 1 out", func() bool { return s.has(url(0)) && !s.has(url(1)) })
	t.Logf("recovered: in force after %v", took)
	s.waitLog(t, `msg="discovery: name resolves again"`)
	if failed := rd.end(); len(failed) > 0 {
		t.Errorf("%d of %d reads failed during the changes: %v", len(failed), rd.reads.Load(), failed[:min(5, len(failed))])
	}
	t.Logf("%d reads, none failed", rd.reads.Load())
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// loopbackPort listens on 127.0.0.1, 127.0.0.2, ... 127.0.0.n, all on one
// port: A records can then name n replicas of one dns+http://name:port.
func loopbackPort(t *testing.T, n int) ([]net.Listener, uint16) {
	t.Helper()
	for range 20 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns := []net.Listener{first}
		_, p, _ := net.SplitHostPort(first.Addr().String())
		for i := 2; i <= n; i++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:%s", i, p))
			if err != nil {
				break // taken on that address: another port
			}
			lns = append(lns, ln)
		}
		if len(lns) == n {
			port, _ := strconv.Atoi(p)
			return lns, uint16(port)
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	t.Fatal("no port free on 127.0.0.1 to 127.0.0.3")
	return nil, 0
}

// A records with a static backend beside them, and SIGHUP reloads: the
// watcher follows the name between reloads; a reload that swaps the name
// for another drops the old name's replicas, follows the new one and no
// longer the old; a reload that changes something else keeps the
// discovered replicas; a reload whose names give no replica is refused.
// Reads run all along, and none fails.
func TestServeDiscoveryHostsAndReload(t *testing.T) {
	d := startDNSServer(t)
	lns, port := loopbackPort(t, 3)
	rs := newFleet(t, 3, func(i int) net.Listener { return lns[i] })
	static := newFleet(t, 1, nil)
	url := func(i int) string { return fmt.Sprintf("http://127.0.0.%d:%d", i+1, port) }
	conf := func(name, delay string) string {
		return loopback + fmt.Sprintf("backends: [dns+http://%s:%d, %s]\nhedge-delay: %s\ndns-server: %s\ndns-refresh: %s\n",
			name, port, static.srv[0].URL, delay, d.Addr, dnsRefresh)
	}
	d.SetA("a.test", 30, "127.0.0.1", "127.0.0.2")
	s := startServed(t, conf("a.test", "20ms"))
	want := func(backends ...string) func() bool {
		return func() bool {
			set := s.g.Replicas()
			var got []string
			for i := range set.Len() {
				got = append(got, set.Name(i))
			}
			return slices.Equal(got, backends)
		}
	}
	if !want(url(0), url(1), static.srv[0].URL)() {
		t.Fatalf("at start: %v", s.g.Replicas().Snapshot(time.Now()))
	}
	rd := startReader(t, s.addr, 4)

	d.SetA("a.test", 30, "127.0.0.1", "127.0.0.2", "127.0.0.3")
	before := rs.reads[2].Load()
	took := eventually(t, "127.0.0.3 in use", func() bool { return rs.reads[2].Load() > before })
	t.Logf("A record added: in use after %v", took)

	// The reload swaps a.test for b.test.
	d.SetA("b.test", 30, "127.0.0.3")
	s.rewrite(t, conf("b.test", "20ms"))
	s.hup <- syscall.SIGHUP
	s.waitLog(t, `msg="configuration reloaded" trigger=SIGHUP file=\S+ changed=backends removed=`+url(0)+","+url(1))
	if !want(url(2), static.srv[0].URL)() {
		t.Fatalf("after the reload: %v", s.g.Replicas().Snapshot(time.Now()))
	}
	d.SetA("a.test", 30, "127.0.0.1")
	d.SetA("b.test", 30, "127.0.0.2", "127.0.0.3")
	took = eventually(t, "b.test's new record in force", want(url(1), url(2), static.srv[0].URL))
	t.Logf("after a reload, b.test's change in force after %v", took)
	time.Sleep(3 * dnsRefresh)
	if !want(url(1), url(2), static.srv[0].URL)() {
		t.Errorf("a.test, no longer configured, still followed: %v", s.g.Replicas().Snapshot(time.Now()))
	}

	// A reload of something else keeps what discovery found.
	s.mark = len(s.logs.String())
	s.rewrite(t, conf("b.test", "30ms"))
	s.hup <- syscall.SIGHUP
	s.waitLog(t, `msg="configuration reloaded" trigger=SIGHUP file=\S+ changed=hedge-delay\n`)
	if !want(url(1), url(2), static.srv[0].URL)() || s.g.Classes().Policy().Delay != 30*time.Millisecond {
		t.Errorf("after reloading the delay: %v, delay %v", s.g.Replicas().Snapshot(time.Now()), s.g.Classes().Policy().Delay)
	}

	// A reload whose only backend resolves to nothing is refused.
	s.rewrite(t, loopback+fmt.Sprintf("backends: [dns+http://none.test:%d]\ndns-server: %s\ndns-refresh: %s\nhedge-delay: 30ms\n", port, d.Addr, dnsRefresh))
	s.hup <- syscall.SIGHUP
	s.waitLog(t, `level=ERROR msg="reload failed; the running configuration is kept" trigger=SIGHUP err=.*no backends.*none.test`)
	if !want(url(1), url(2), static.srv[0].URL)() {
		t.Errorf("after a refused reload: %v", s.g.Replicas().Snapshot(time.Now()))
	}
	// And discovery goes on with the running names.
	d.SetA("b.test", 30, "127.0.0.3")
	eventually(t, "b.test followed after a refused reload", want(url(2), static.srv[0].URL))

	if failed := rd.end(); len(failed) > 0 {
		t.Errorf("%d of %d reads failed: %v", len(failed), rd.reads.Load(), failed[:min(5, len(failed))])
	}
	t.Logf("%d reads, none failed", rd.reads.Load())
}

// The flags are checked.
func TestServeDiscoveryFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-backends", "dns+ftp://a:1"}, "want dns+http://name:port"},
		{[]string{"-backends", "dnssrv+http://_h._tcp.a:1"}, "no port with dnssrv+"},
		{[]string{"-backends", "dns+http://a:1", "-dns-refresh", "0s"}, "-dns-refresh 0s must be positive"},
		{[]string{"-backends", "dns+http://a:1", "-dns-server", "127.0.0.1"}, "-dns-server \"127.0.0.1\": want host:port"},
	} {
		code, _, stderr := runCmd(append([]string{"serve", "-listen", "127.0.0.1:0", "-admin", ""}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d with %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	_, help, _ := runCmd("serve", "-h")
	for _, want := range []string{"dns+http://name:port", "dnssrv+http://_service._tcp.name", "-dns-refresh duration", "(default 10s)", "-dns-server string"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve -h lacks %q", want)
		}
	}
}

// A start with a name that does not resolve yet and a static backend
// serves with the static one, and takes the name's replicas once it does.
func TestServeDiscoveryNameLate(t *testing.T) {
	d := startDNSServer(t)
	rs := newFleet(t, 2, nil)
	d.SetA("r.test", 30, "127.0.0.1")
	d.Fail("_http._tcp.late.test", dns.RcodeServerFailure)
	s := startServed(t, loopback, "-backends", "dnssrv+http://_http._tcp.late.test,"+rs.srv[0].URL, "-dns-server", d.Addr,
		"-dns-refresh", dnsRefresh.String())
	if set := s.g.Replicas(); set.Len() != 1 || !s.has(rs.srv[0].URL) {
		t.Fatalf("at start: %v", set.Snapshot(time.Now()))
	}
	_, body, _ := do(t, "GET", "http://"+s.admin+"/readyz")
	if !strings.HasPrefix(body, "ready\ndiscovery stale: dnssrv+http://_http._tcp.late.test") || !strings.Contains(body, "keeping 0 replicas") {
		t.Errorf("readyz: %q", body)
	}
	d.SetSRV("_http._tcp.late.test", 30, dnstest.SRV{Target: "r.test", Port: rs.port(1)})
	eventually(t, "the late name's replica in the set", func() bool { return s.has(rs.srv[1].URL) })
	if code, body, _ := do(t, "GET", "http://"+s.admin+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("readyz once resolved: %d %q", code, body)
	}
	var dbg struct {
		Discovery []struct {
			Name     string
			Backends []string
			Stale    bool
			Errors   int
		}
	}
	_, body, _ = do(t, "GET", "http://"+s.admin+"/debug/replicas")
	if err := json.Unmarshal([]byte(body), &dbg); err != nil {
		t.Fatal(err)
	}
	if len(dbg.Discovery) != 1 || dbg.Discovery[0].Stale || dbg.Discovery[0].Errors < 1 || !slices.Equal(dbg.Discovery[0].Backends, []string{rs.srv[1].URL}) {
		t.Errorf("debug: %+v", dbg.Discovery)
	}
}

// A start whose names have no records yet does not exit: serve listens,
// answers clients 503, /healthz 200 and /readyz 503 naming each name and
// why, reports the names in /metrics, and resolves them every
// -dns-refresh; a SIGHUP meanwhile re-reads the file (a name fixed there is
// resolved at once; a file that would not start is refused); once a name
// has records, the gateway serves on the same listeners. SIGTERM while it
// waits exits 0.
func TestServeWaitsForRecords(t *testing.T) {
	d := startDNSServer(t)
	rs := newFleet(t, 1, nil)
	d.SetA("empty.test", 30)
	d.SetA("r.test", 30, "127.0.0.1")
	path := writeTestFile(t, "tailgate.yaml", loopback+fmt.Sprintf(
		"backends: [dns+http://empty.test:%d, dnssrv+http://_h._tcp.none.test]\ndns-server: %s\ndns-refresh: 1h\n", rs.port(0), d.Addr))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log, hup, done := newLogSink(), make(chan os.Signal, 1), make(chan int, 1)
	go func() { done <- serveWith(ctx, []string{"-config", path}, log, log, hup) }()
	m := log.waitFor(t, `level=WARN msg="no replica yet: serving 503, /readyz saying why, until the DNS names of -backends give one" addr=(\S+) admin=(\S+)`)
	addr, admin := m[1], m[2]

	if code, body, _ := do(t, "GET", "http://"+addr+"/item"); code != http.StatusServiceUnavailable || body != "no replica available yet\n" {
		t.Errorf("a read while waiting: %d %q", code, body)
	}
	if code, _, _ := do(t, "GET", "http://"+admin+"/healthz"); code != 200 {
		t.Errorf("healthz while waiting: %d", code)
	}
	code, body, _ := do(t, "GET", "http://"+admin+"/readyz")
	for _, want := range []string{"no replica yet", "discovery waiting: dns+http://empty.test:", "no records: empty.test",
		"discovery waiting: dnssrv+http://_h._tcp.none.test: discovery: no records"} {
		if code != http.StatusServiceUnavailable || !strings.Contains(body, want) {
			t.Errorf("readyz while waiting: %d %q; want 503 with %q", code, body, want)
		}
	}
	if _, metrics, _ := do(t, "GET", "http://"+admin+"/metrics"); !strings.Contains(metrics, `tailgate_discovery_stale{name="dnssrv+http://_h._tcp.none.test"} 1`) ||
		!strings.Contains(metrics, "go_goroutines") {
		t.Errorf("metrics while waiting:\n%s", grepLines(metrics, "tailgate_"))
	}

	// A file that would not start: refused, and the wait goes on.
	os.WriteFile(path, []byte(loopback+"backends: [dns+http://r.test:1]\nmax-conns: -1\n"), 0o600)
	hup <- syscall.SIGHUP
	log.waitFor(t, `level=ERROR msg="reload failed; the running configuration is kept" trigger=SIGHUP err=".*-max-conns -1`)
	// The name fixed in the file (-dns-refresh needs a restart: the hour
	// stays, so only the reload can bring the replica this soon).
	os.WriteFile(path, []byte(loopback+fmt.Sprintf("backends: [dns+http://r.test:%d]\ndns-server: %s\ndns-refresh: 1h\n", rs.port(0), d.Addr)), 0o600)
	hup <- syscall.SIGHUP
	log.waitFor(t, `msg="replicas found: serving" replicas=1`)
	log.waitFor(t, `msg="gateway listening" addr=`+regexp.QuoteMeta(addr))
	if code, body, _ := do(t, "GET", "http://"+addr+"/item"); code != 200 || body != "replica 0" {
		t.Errorf("a read once serving: %d %q", code, body)
	}
	if code, body, _ := do(t, "GET", "http://"+admin+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("readyz once serving: %d %q", code, body)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d:\n%s", code, log)
	}

	// Stopped while it waits: exit 0, the listeners closed.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	log = newLogSink()
	go func() {
		done <- serveWith(ctx, []string{"-config", writeTestFile(t, "empty.yaml", loopback+
			fmt.Sprintf("backends: [dns+http://empty.test:1]\ndns-server: %s\n", d.Addr))}, log, log, hup)
	}()
	addr = log.waitFor(t, `msg="no replica yet[^\n]* addr=(\S+)`)[1]
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("stopped while waiting: exit %d:\n%s", code, log)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still listens after serve ended", addr)
	}
}
