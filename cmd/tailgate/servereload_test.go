package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
)

// replicas are loopback backends that count the reads each one gets by
// path, and hold reads of /slow until released.
type replicas struct {
	srv     []*httptest.Server
	mu      sync.Mutex
	seen    map[string]int // "i /path" -> reads
	slow    chan struct{}  // closed to release /slow
	once    sync.Once
	arrived chan int // replica index of each /slow read, as it arrives
}

// release lets the reads of /slow answer.
func (rs *replicas) release() { rs.once.Do(func() { close(rs.slow) }) }

func newReplicas(t *testing.T, n int) *replicas {
	t.Helper()
	rs := &replicas{seen: map[string]int{}, slow: make(chan struct{}), arrived: make(chan int, 16)}
	for i := range n {
		rs.srv = append(rs.srv, httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rs.mu.Lock()
			rs.seen[fmt.Sprintf("%d %s", i, r.URL.Path)]++
			rs.mu.Unlock()
			if r.URL.Path == "/slow" {
				rs.arrived <- i
				select {
				case <-rs.slow:
				case <-r.Context().Done(): // a hedge's loser
					return
				}
			}
			fmt.Fprintf(w, "replica %d", i)
		})))
		t.Cleanup(rs.srv[i].Close)
	}
	t.Cleanup(rs.release) // first: a server's Close waits for its handlers
	return rs
}

func (rs *replicas) url(i int) string { return rs.srv[i].URL }

func (rs *replicas) count(i int, path string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.seen[fmt.Sprintf("%d %s", i, path)]
}

// served is serve running in this process, as runServe runs it, but with
// the SIGHUP channel the test's to send on and a log the test reads.
type served struct {
	addr, admin string
	path        string // the config file
	logs        *lockedBuffer
	mark        int // waitLog looks from here on
	g           *gateway.Gateway
	r           *reloader
	hup         chan os.Signal
	stop        func() // ends serve (as SIGTERM does) and waits for it
}

// startServed writes content to a config file and serves with it and
// args; without content, with args alone.
func startServed(t *testing.T, content string, args ...string) *served {
	t.Helper()
	s := &served{logs: &lockedBuffer{}, hup: make(chan os.Signal, 1)}
	if content != "" {
		s.path = writeTestFile(t, "tailgate.yaml", content)
		args = append([]string{"-config", s.path}, args...)
	}
	f, code, err := loadServeFlags(args, io.Discard, io.Discard)
	if code >= 0 || err != nil {
		t.Fatalf("flags %v: %d %v", args, code, err)
	}
	cfg, _, err := f.config(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(s.logs, nil))
	cfg.Logger = logger
	// As runServe builds it: DNS entries of -backends resolved by a
	// watcher, which every reload goes through.
	w := newWatcher(f, logger)
	if s.g, _, err = newGateway(context.Background(), w, cfg); err != nil {
		t.Fatal(err)
	}
	s.r = &reloader{args: args, g: s.g, log: logger, disc: w}
	s.r.running.Store(f)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveReloading(ctx, s.g, s.r, s.hup) }()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
			s.g.Close()
		})
	}
	t.Cleanup(s.stop)
	re := regexp.MustCompile(`msg="(gateway|admin) listening" addr=(\S+)`)
	for deadline := time.Now().Add(10 * time.Second); s.addr == "" || s.admin == ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no listening lines in:\n%s", s.logs.String())
		}
		for _, m := range re.FindAllStringSubmatch(s.logs.String(), -1) {
			if m[1] == "gateway" {
				s.addr = m[2]
			} else {
				s.admin = m[2]
			}
		}
	}
	return s
}

// rewrite replaces the config file's content.
func (s *served) rewrite(t *testing.T, content string) {
	t.Helper()
	if err := os.WriteFile(s.path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitLog waits for a log line matching re, after the mark, for at most
// 10s.
func (s *served) waitLog(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if m := rx.FindString(s.logs.String()[s.mark:]); m != "" {
			return m
		}
	}
	t.Fatalf("no log line matching %s in:\n%s", re, s.logs.String())
	return ""
}

// do sends one request, on a connection that the client would keep, and
// returns its status, its body and whether the server closes the
// connection after it.
func do(t *testing.T, method, url string) (int, string, bool) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Close
}

// loopback is the start of a config file: loopback listeners on free ports.
const loopback = "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n"

// A configuration that fails, in the file or in its checks, is logged and
// refused, and the gateway runs on as it was; the next good one applies.
// The reloads come through serve's SIGHUP path.
func TestReloadInvalidKeepsRunning(t *testing.T) {
	rs := newReplicas(t, 3)
	two := fmt.Sprintf("backends: [%s, %s]\n", rs.url(0), rs.url(1))
	s := startServed(t, loopback+two+"hedge-delay: 20ms\n")
	for _, bad := range []struct{ content, want string }{
		{loopback + fmt.Sprintf("backends: [%s, %s, %s]\nhedge-fraction: 2\n", rs.url(0), rs.url(1), rs.url(2)), "hedge-fraction"},
		{loopback + two + "hedge-delay: 20ms\nmax-requets: 5\n", `unknown key \\"max-requets\\"`},
		{loopback + "backends: [" + rs.url(0) + ", " + rs.url(0) + "]\n", "duplicate backend"},
		{loopback + two + "hedge-delay: [20ms\n", "yaml: line"},
	} {
		s.rewrite(t, bad.content)
		s.hup <- syscall.SIGHUP
		line := s.waitLog(t, `level=ERROR msg="reload failed; the running configuration is kept" trigger=SIGHUP err=.*`+bad.want+`.*`)
		s.mark = len(s.logs.String())
		if n := s.g.Replicas().Len(); n != 2 || s.r.current().backends != rs.url(0)+","+rs.url(1) {
			t.Fatalf("after %s: %d replicas, backends %q", line, n, s.r.current().backends)
		}
		if code, body, _ := do(t, "GET", "http://"+s.addr+"/item"); code != 200 {
			t.Fatalf("read after a refused reload: %d %s", code, body)
		}
	}
	s.rewrite(t, loopback+fmt.Sprintf("backends: [%s, %s, %s]\n", rs.url(0), rs.url(1), rs.url(2)))
	s.hup <- syscall.SIGHUP
	s.waitLog(t, `msg="configuration reloaded" trigger=SIGHUP file=\S+ changed=backends,hedge-delay added=`+regexp.QuoteMeta(rs.url(2)))
	if n := s.g.Replicas().Len(); n != 3 {
		t.Errorf("after a good reload: %d replicas", n)
	}
}

// The command line wins over the file at every reload, as at start; a
// setting that needs a restart is reported and keeps its running value,
// while the rest of the reload applies.
func TestReloadCommandLineWinsAndRestartSettingsKept(t *testing.T) {
	rs := newReplicas(t, 1)
	one := "backends: [" + rs.url(0) + "]\n"
	s := startServed(t, loopback+one+"hedge-delay: 10ms\n", "-hedge-delay", "30ms")
	if d := s.g.Classes().Policy().Delay; d != 30*time.Millisecond {
		t.Fatalf("delay at start %v, want the command line's 30ms", d)
	}
	s.rewrite(t, "listen: 127.0.0.1:1\nadmin: 127.0.0.1:0\nlog-format: json\n"+one+"hedge-delay: 20ms\nmax-requests: 9\n")
	if err := s.r.reload("test"); err != nil {
		t.Fatal(err)
	}
	if d, in := s.g.Classes().Policy().Delay, s.g.Debug(time.Now()).InFlight; d != 30*time.Millisecond || in.MaxRequests != 9 {
		t.Errorf("after the reload: delay %v, max requests %d; want the command line's 30ms and the file's 9", d, in.MaxRequests)
	}
	s.waitLog(t, `level=WARN msg="this setting needs a restart to change; its running value is kept" trigger=test flag=listen running=127.0.0.1:0 new=127.0.0.1:1`)
	s.waitLog(t, `flag=log-format running=text new=json`)
	s.waitLog(t, `msg="configuration reloaded" trigger=test file=\S+ changed=max-requests\n`)
	if f := s.r.current(); f.listen != "127.0.0.1:0" || f.logFormat != "text" || f.maxRequests != 9 {
		t.Errorf("flags in force: listen %q, log format %q, max requests %d", f.listen, f.logFormat, f.maxRequests)
	}
	if code, _, _ := do(t, "GET", "http://"+s.addr+"/item"); code != 200 {
		t.Errorf("read on the running listener: %d", code)
	}
}

// POST /-/reload on the admin listener: off unless enabled (403), only
// POST (405); 200 once reloaded, 400 with the reason for a configuration
// refused. It can be turned off by a reload.
func TestReloadEndpoint(t *testing.T) {
	rs := newReplicas(t, 2)
	one := loopback + "backends: [" + rs.url(0) + "]\n"
	s := startServed(t, one)
	reload := "http://" + s.admin + "/-/reload"
	if code, body, _ := do(t, "POST", reload); code != http.StatusForbidden || !strings.Contains(body, "-enable-reload-endpoint") {
		t.Errorf("off by default: %d %q", code, body)
	}
	s.stop()

	s = startServed(t, one, "-enable-reload-endpoint")
	reload = "http://" + s.admin + "/-/reload"
	if code, _, _ := do(t, "GET", reload); code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", code)
	}
	s.rewrite(t, one+"frobnicate: 1\n")
	if code, body, _ := do(t, "POST", reload); code != http.StatusBadRequest || !strings.Contains(body, `:4: unknown key "frobnicate"`) {
		t.Errorf("bad file: %d %q, want 400 naming the key and its line", code, body)
	}
	s.rewrite(t, loopback+"backends: ["+rs.url(0)+", "+rs.url(1)+"]\n")
	if code, body, _ := do(t, "POST", reload); code != http.StatusOK || body != "reloaded\n" || s.g.Replicas().Len() != 2 {
		t.Errorf("good file: %d %q, %d replicas", code, body, s.g.Replicas().Len())
	}
	s.waitLog(t, `msg="configuration reloaded" trigger="POST /-/reload"`)

	// Off again, from the file: the command line's -enable-reload-endpoint
	// wins, so start without it.
	s.stop()
	s = startServed(t, one+"enable-reload-endpoint: true\n")
	reload = "http://" + s.admin + "/-/reload"
	s.rewrite(t, one+"enable-reload-endpoint: false\n")
	if code, _, _ := do(t, "POST", reload); code != http.StatusOK {
		t.Errorf("turning it off: %d", code)
	}
	if code, _, _ := do(t, "POST", reload); code != http.StatusForbidden {
		t.Errorf("after it was turned off: %d, want 403", code)
	}
}

// As a drain starts, /readyz answers 503 at once, while reads are still
// served, each answer closing its connection, for -drain-delay; then the
// listener closes.
func TestServeReadyz503DuringDrain(t *testing.T) {
	rs := newReplicas(t, 1)
	s := startServed(t, loopback+"backends: ["+rs.url(0)+"]\ndrain-delay: 400ms\n")
	if code, _, _ := do(t, "GET", "http://"+s.admin+"/readyz"); code != 200 {
		t.Fatalf("readyz before the drain: %d", code)
	}
	start := time.Now()
	stopped := make(chan struct{})
	go func() { s.stop(); close(stopped) }()
	s.waitLog(t, `msg="draining: /readyz answers 503; the listener closes after the drain delay" delay=400ms`)
	code, body, _ := do(t, "GET", "http://"+s.admin+"/readyz")
	if code != http.StatusServiceUnavailable || body != "draining\n" {
		t.Errorf("readyz during the drain: %d %q", code, body)
	}
	if code, body, closed := do(t, "GET", "http://"+s.addr+"/item"); code != 200 || body != "replica 0" || !closed {
		t.Errorf("read during the drain delay: %d %q, connection closed %v; want 200, closed", code, body, closed)
	}
	<-stopped
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Errorf("serve ended %v after the drain began, before the 400ms delay", took)
	}
}

// Without -config, SIGHUP still reloads (the command line again: nothing
// changes) rather than ending the process.
func TestSIGHUPWithoutConfigFile(t *testing.T) {
	rs := newReplicas(t, 1)
	s := startServed(t, "", "-backends", rs.url(0), "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	s.hup <- syscall.SIGHUP
	s.waitLog(t, `msg="configuration reloaded: nothing changed" trigger=SIGHUP file=""`)
	if err := s.r.reload("test"); err != nil {
		t.Errorf("reload without a file: %v", err)
	}
}

// The log's settings need a restart, the access log's included: a reload
// that changes them says so and keeps them, and applies the rest. Kept at
// its default, -access-log-sample is not taken as given (which -access-log
// off would refuse), at this reload or the next.
func TestReloadKeepsLogSettings(t *testing.T) {
	rs := newReplicas(t, 1)
	one := loopback + "backends: [" + rs.url(0) + "]\n"
	s := startServed(t, one)
	s.rewrite(t, one+"access-log: on\naccess-log-sample: 0.5\nlog-level: debug\nmax-requests: 9\n")
	for k := range 2 {
		if err := s.r.reload("test"); err != nil {
			t.Fatalf("reload %d: %v", k, err)
		}
		if f, in := s.r.current(), s.g.Debug(time.Now()).InFlight; f.accessLog != "off" || f.accessSample != 1 || f.logLevel != "info" || in.MaxRequests != 9 {
			t.Errorf("reload %d: access log %q, sample %v, level %q, max requests %d; want off, 1, info and the file's 9",
				k, f.accessLog, f.accessSample, f.logLevel, in.MaxRequests)
		}
	}
	s.waitLog(t, `flag=access-log running=off new=on`)
	s.waitLog(t, `flag=access-log-sample running=1 new=0.5`)
	s.waitLog(t, `flag=log-level running=info new=debug`)
	if n := strings.Count(s.logs.String(), `msg="configuration reloaded`); n != 2 {
		t.Errorf("%d reloads logged, want 2:\n%s", n, s.logs.String())
	}
}

// A reload checks the file whole, as a start would: one that the next
// start would refuse (settings that need a restart included) is refused
// whole, with every error, by SIGHUP (logged) and POST /-/reload (400),
// and nothing of it applies; one that would start applies, and the answer
// names the changes that wait for a restart.
func TestReloadRefusesWhatAStartWould(t *testing.T) {
	rs := newReplicas(t, 1)
	one := loopback + "backends: [" + rs.url(0) + "]\n"
	s := startServed(t, one, "-enable-reload-endpoint")
	reload := "http://" + s.admin + "/-/reload"
	s.rewrite(t, one+"hedge-delay: 7ms\nmax-conns: -1\nlog-format: jsno\n")
	code, body, _ := do(t, "POST", reload)
	for _, want := range []string{":5: -max-conns -1 must be at least 1", `:6: -log-format "jsno": want text or json`} {
		if code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("POST: %d %q; want 400 with %q", code, body, want)
		}
	}
	if d := s.g.Classes().Policy().Delay; d == 7*time.Millisecond || s.r.current().delay != "auto" {
		t.Errorf("the refused file's hedge-delay applied: %v", d)
	}
	s.rewrite(t, "listen: 127.0.0.1:99999\nadmin: 127.0.0.1:0\nbackends: ["+rs.url(0)+"]\n")
	s.hup <- syscall.SIGHUP
	s.waitLog(t, `level=ERROR msg="reload failed; the running configuration is kept" trigger=SIGHUP err=".*:1: -listen \\"127.0.0.1:99999\\": want host:port`)

	s.rewrite(t, "listen: 127.0.0.1:1\nadmin: 127.0.0.1:0\nbackends: ["+rs.url(0)+"]\nmax-conns: 5000\nhedge-delay: 7ms\n")
	code, body, _ = do(t, "POST", reload)
	want := "reloaded\nthese changes need a restart (their running values are kept):\n" +
		"  -listen: running \"127.0.0.1:0\", configured \"127.0.0.1:1\"\n" +
		"  -max-conns: running \"10000\", configured \"5000\"\n"
	if code != http.StatusOK || body != want {
		t.Errorf("POST: %d %q; want 200 %q", code, body, want)
	}
	if d := s.g.Classes().Policy().Delay; d != 7*time.Millisecond {
		t.Errorf("hedge-delay %v after the reload, want 7ms", d)
	}
}
