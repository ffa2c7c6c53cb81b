package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/replica"
)

func TestServeRejectsBadFlags(t *testing.T) {
	ok := "http://127.0.0.1:1"
	bad := [][]string{
		{},
		{"-backends", ""},
		{"-backends", "not a url"},
		{"-backends", "ftp://127.0.0.1:1"},
		{"-backends", ok + "," + ok},
		{"-backends", ok, "-hedge-fraction", "1.5"},
		{"-backends", ok, "-hedge-fraction", "-0.1"},
		{"-backends", ok, "-hedge-burst", "0"},
		{"-backends", ok, "-hedge-delay", "soon"},
		{"-backends", ok, "-attempts-per-request", "6"},
		{"-backends", ok, "-max-requests", "0"},
		{"-backends", ok, "-max-attempts", "-1"},
		{"-backends", ok, "-timeout", "0s"},
		{"-backends", ok, "-max-response-bytes", "0"},
		{"-backends", ok, "-max-response-header-bytes", "1023"},
		{"-backends", ok, "-max-response-header-bytes", "1048577"},
		{"-backends", ok, "-gate-threshold", "0.05"}, // removed: the gate no longer judges the hedge share
		{"-backends", ok, "-gate-window", "0s"},
		{"-backends", ok, "-gate-min-win-rate", "0"},
		{"-backends", ok, "-gate-min-win-rate", "0.6"},
		{"-backends", ok, "-gate-min-win-rate", "NaN"},
		{"-backends", ok, "-gate-slowdown", "0.5"},
		{"-backends", ok, "-gate-slowdown", "Inf"},
		{"-backends", ok, "-gate=maybe"},
		{"-backends", ok, "-backend-protocol", "h3"},
		{"-backends", ok, "-listen", "nope"},
		{"-backends", ok, "-listen", "127.0.0.1:99999"}, // net.Listen's "invalid port", once exit 1
		{"-backends", ok, "-admin", "127.0.0.1:65536"},
		{"-backends", ok, "-admin", "127.0.0.1:9999", "-listen", "127.0.0.1:9999"},
		{"-backends", ok, "-log-format", "xml"},
		{"-backends", ok, "-log-level", "loud"},
		{"-backends", ok, "-max-header-bytes", "10"},
		{"-backends", ok, "-probation-factor", "1"},
		{"-backends", ok, "-probation-factor", "0.5"},
		{"-backends", ok, "-probation-factor", "NaN"},
		{"-backends", ok, "-probation-factor", "+Inf"},
		{"-backends", ok, "-probation-min-excess", "-1ms"},
		{"-backends", ok, "-probation-min-excess", "soon"},
		{"-backends", ok, "-probation-window", "0s"},
		{"-backends", ok, "-probation-window", "-1s"},
		{"-backends", ok, "-probation-max-share", "0"},
		{"-backends", ok, "-probation-max-share", "1.5"},
		{"-backends", ok, "-probation-max-share", "NaN"},
		{"-backends", ok, "-shadow-rate", "0"},
		{"-backends", ok, "-shadow-rate", "-1"},
		{"-backends", ok, "-shadow-rate", "Inf"},
		{"-backends", ok, "-probation=maybe"},
		{"-backends", ok, "-tied"}, // one backend
		{"-backends", ok + ",http://127.0.0.1:2", "-tied=maybe"},
		{"-backends", ok + ",http://127.0.0.1:2", "-tied-delay", "2ms"}, // without -tied
		{"-backends", ok + ",http://127.0.0.1:2", "-tied", "-tied-delay", "soon"},
		{"-backends", ok + ",http://127.0.0.1:2", "-tied", "-tied-delay", "10s"}, // not below -timeout
		{"-backends", ok + ",http://127.0.0.1:2", "-tied", "-hedge-delay", "5ms"},
		{"-backends", ok + ",http://127.0.0.1:2", "-tied", "-hedge-delay", "auto"},
		{"-backends", ok + ",http://127.0.0.1:2", "-tied", "-gate-slowdown", "3"},
		{"-backends", ok + ",http://127.0.0.1:2", "-tied", "-gate=false"},
		{"-backends", ok + ",http://127.0.0.1:2", "-tied", "-attempts-per-request", "3"},
		{"-backends", ok + ",http://127.0.0.1:2", "-tied", "-attempts-per-request", "1"},
		{"-backends", ok + ",http://127.0.0.1:2", "-tied", "-hedge-fraction", "2"},
		{"-backends", ok, "extra"},
		{"-frobnicate"},
	}
	for _, args := range bad {
		code, _, stderr := runCmd(append([]string{"serve"}, args...)...)
		if code != exitUsage || stderr == "" {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 with a message", args, code, stderr)
		}
	}
	code, stdout, _ := runCmd("serve", "-h")
	if code != exitOK || !strings.Contains(stdout, "-hedge-delay") || !strings.Contains(stdout, "-max-attempts") || !strings.Contains(stdout, "(default 128)") {
		t.Errorf("serve -h: %d %q", code, stdout)
	}
	// Every probation flag, with its default.
	for _, want := range []string{
		`-probation\n[^\n]*\(default true\)`,
		`-probation-factor float\n[^\n]*\(default 3\)`,
		`-probation-window duration\n[^\n]*\(default 5s\)`,
		`-probation-min-excess duration\n[^\n]*\(0: no floor, the ratio alone\) \(default 2ms\)`,
		`-probation-max-share float\n[^\n]*\(default 0\.1\)`,
		`-shadow-rate float\n[^\n]*\(default 1\)`,
		"Tailgate-Shadow: 1",
		`-tied\n[^\n]*tied.Server[^\n]*Peers`,
		`-tied-delay duration\n[^\n]*\(0 or negative: both at once\) \(default 1ms\)`,
		"docs/gateway.md",
		"Tailgate-Tie-Peer",
	} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("serve -h lacks %s:\n%s", want, stdout)
		}
	}
}

// A password in -backends is refused without being printed.
func TestServeHidesBackendPassword(t *testing.T) {
	code, stdout, stderr := runCmd("serve", "-backends", "http://127.0.0.1:1,http://user:s3cret@127.0.0.1:2", "-listen", "127.0.0.1:0", "-admin", "")
	if code != exitUsage || strings.Contains(stdout+stderr, "s3cret") || !strings.Contains(stderr, "xxxxx@127.0.0.1:2") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2 naming the backend as http://xxxxx@127.0.0.1:2", code, stdout, stderr)
	}
}

// The probation flags reach the gateway's configuration.
func TestServeProbationFlags(t *testing.T) {
	parse := func(args ...string) gateway.Config {
		t.Helper()
		var f serveFlags
		fs := newFlags("serve", "", io.Discard)
		f.register(fs)
		if err := fs.Parse(append([]string{"-backends", "http://127.0.0.1:1,http://127.0.0.1:2"}, args...)); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := f.config(io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := parse("-probation-factor", "4", "-probation-min-excess", "5ms", "-probation-window", "2s", "-probation-max-share", "0.5", "-shadow-rate", "3")
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	want := replica.Probation{Enabled: true, Factor: 4, MinExcess: 5 * time.Millisecond, ExitFactor: 4.0 * 2 / 3, Window: 2 * time.Second, MinSamples: replica.DefaultProbationMinSamples,
		MaxShare: 0.5, ShadowRate: 3}
	if got := g.Replicas().Config().Probation; got != want {
		t.Errorf("probation %+v, want %+v", got, want)
	}
	// On by default, with the replica package's defaults.
	g, err = gateway.New(parse())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	want = replica.Probation{Enabled: true, Factor: 3, MinExcess: 2 * time.Millisecond, ExitFactor: 2, Window: 5 * time.Second, MinSamples: 5, MaxShare: 0.1, ShadowRate: 1}
	if got := g.Replicas().Config().Probation; got != want {
		t.Errorf("default probation %+v, want %+v", got, want)
	}
	// 0 turns the floor off, which the configuration says with a negative.
	if got := parse("-probation-min-excess", "0").Replica.Probation.MinExcess; got >= 0 {
		t.Errorf("-probation-min-excess 0: MinExcess %v, want negative (no floor)", got)
	}
	if cfg := parse("-probation=false"); !cfg.DisableProbation {
		t.Error("-probation=false left probation on")
	}
}

// -max-response-header-bytes reaches the gateway's configuration, 64 KiB
// unless given, like the client side's -max-header-bytes.
func TestServeResponseHeaderFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{nil, 64 << 10},
		{[]string{"-max-response-header-bytes", "1024"}, 1024},
		{[]string{"-max-response-header-bytes", "1048576"}, 1 << 20},
	} {
		var f serveFlags
		fs := newFlags("serve", "", io.Discard)
		f.register(fs)
		if err := fs.Parse(append([]string{"-backends", "http://127.0.0.1:1"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := f.config(io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MaxResponseHeaderBytes != tc.want {
			t.Errorf("%v: MaxResponseHeaderBytes %d, want %d", tc.args, cfg.MaxResponseHeaderBytes, tc.want)
		}
	}
}

// The tied flags reach the gateway's configuration, with their budget
// defaults; the flags that do not apply are refused (above).
func TestServeTiedFlags(t *testing.T) {
	parse := func(args ...string) gateway.Config {
		t.Helper()
		var f serveFlags
		fs := newFlags("serve", "", io.Discard)
		f.register(fs)
		if err := fs.Parse(append([]string{"-backends", "http://127.0.0.1:1,http://127.0.0.1:2"}, args...)); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := f.config(io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for _, tc := range []struct {
		args            []string
		delay           time.Duration
		fraction, burst float64
	}{
		{[]string{"-tied"}, time.Millisecond, 1, 128},
		{[]string{"-tied", "-max-requests", "4"}, time.Millisecond, 1, 10},
		{[]string{"-tied", "-tied-delay", "3ms"}, 3 * time.Millisecond, 1, 128},
		{[]string{"-tied", "-tied-delay", "0s"}, -1, 1, 128},
		{[]string{"-tied", "-tied-delay", "-5ms"}, -1, 1, 128},
		{[]string{"-tied", "-hedge-fraction", "0.5"}, time.Millisecond, 0.5, 128},
		{[]string{"-tied", "-hedge-burst", "20"}, time.Millisecond, 1, 20},
		{[]string{"-tied", "-attempts-per-request", "2", "-max-attempts", "7"}, time.Millisecond, 1, 128},
	} {
		cfg := parse(tc.args...)
		if !cfg.Tied || cfg.TiedDelay != tc.delay || cfg.Policy.Budget.Fraction() != tc.fraction || cfg.Policy.Budget.Burst() != tc.burst {
			t.Errorf("%v: tied %v delay %v budget %v/%v; want delay %v budget %v/%v", tc.args, cfg.Tied, cfg.TiedDelay,
				cfg.Policy.Budget.Fraction(), cfg.Policy.Budget.Burst(), tc.delay, tc.fraction, tc.burst)
		}
		g, err := gateway.New(cfg)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		d := g.Debug(time.Now())
		g.Close()
		if d.Mode != gateway.ModeTied || d.Tied == nil || d.Hedge.DelayMs != max(float64(tc.delay)/1e6, 1e-6) {
			t.Errorf("%v: mode %q, tied %+v, delay %vms", tc.args, d.Mode, d.Tied, d.Hedge.DelayMs)
		}
	}
	if cfg := parse("-max-attempts", "7"); cfg.Tied || cfg.MaxInFlightAttempts != 7 {
		t.Errorf("without -tied: %+v", cfg)
	}
	// The attempt limit doubles by default with -tied, as given otherwise.
	for _, tc := range []struct {
		args []string
		want int64
	}{{[]string{"-tied"}, 256}, {[]string{"-tied", "-max-attempts", "7"}, 7}, {nil, 160}} {
		g, err := gateway.New(parse(tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Debug(time.Now()).InFlight.MaxAttempts; got != tc.want {
			t.Errorf("%v: max attempts %d, want %d", tc.args, got, tc.want)
		}
		g.Close()
	}
}

// rawStatus writes raw on a new connection to addr and returns the status
// of the answer.
func rawStatus(t *testing.T, addr, raw string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, raw)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// -trusted-hop reaches the gateway's configuration, off by default.
func TestServeTrustedHopFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"-trusted-hop"}, true}, {[]string{"-trusted-hop=false"}, false}} {
		var f serveFlags
		fs := newFlags("serve", "", io.Discard)
		f.register(fs)
		if err := fs.Parse(append([]string{"-backends", "http://127.0.0.1:1"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := f.config(io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.TrustedHop != tc.want {
			t.Errorf("%v: TrustedHop %v, want %v", tc.args, cfg.TrustedHop, tc.want)
		}
	}
}

func TestServeListenErrorExits1(t *testing.T) {
	ln := httptest.NewServer(http.NotFoundHandler()) // holds a port
	defer ln.Close()
	addr := strings.TrimPrefix(ln.URL, "http://")
	code, _, stderr := runCmd("serve", "-backends", "http://127.0.0.1:1", "-listen", addr, "-admin", "")
	if code != exitError || !strings.Contains(stderr, "listen tcp "+addr) {
		t.Errorf("exit %d stderr %q", code, stderr)
	}
	// Said once, and named once: not "listen X: listen tcp X: ..." twice.
	if n := strings.Count(stderr, addr); n != 1 {
		t.Errorf("the address appears %d times, want once:\n%s", n, stderr)
	}
	// The admin listener's failure too, after the client listener opened.
	code, _, stderr = runCmd("serve", "-backends", "http://127.0.0.1:1", "-listen", "127.0.0.1:0", "-admin", addr)
	if code != exitError || strings.Count(stderr, "listen tcp "+addr) != 1 || strings.Count(stderr, "serve failed") != 1 {
		t.Errorf("admin: exit %d stderr %q", code, stderr)
	}
}

// TestServeDrainsOnSIGTERM runs the real binary (this test executable
// re-executed as main), sends SIGTERM while a request is in flight, and
// expects that request answered and a clean exit.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	arrived := make(chan struct{}, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		time.Sleep(300 * time.Millisecond)
		io.WriteString(w, "finished")
	}))
	defer backend.Close()
	cmd := exec.Command(os.Args[0], "serve", "-backends", backend.URL, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0",
		"-attempts-per-request", "1", "-drain-timeout", "5s")
	cmd.Env = append(os.Environ(), "TAILGATE_TEST_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// slog's text format: msg="gateway listening" addr=127.0.0.1:port
	addrRe := regexp.MustCompile(`msg="gateway listening" addr=(\S+)`)
	found := make(chan string, 1)
	var logTail strings.Builder
	var logMu sync.Mutex
	go func() {
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			logMu.Lock()
			logTail.WriteString(lines.Text() + "\n")
			logMu.Unlock()
			if m := addrRe.FindStringSubmatch(lines.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	var addr string
	select {
	case addr = <-found:
	case <-time.After(10 * time.Second):
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("no listening line within 10s in:\n%s", logTail.String())
	}
	// The client listener is Gateway.Server's: OPTIONS * is the
	// gateway's to refuse, not net/http's to answer 200.
	if code := rawStatus(t, addr, "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"); code != http.StatusMethodNotAllowed {
		t.Errorf("OPTIONS *: %d, want 405", code)
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	answer := make(chan string, 1)
	go func() {
		resp, err := client.Get("http://" + addr + "/work")
		if err != nil {
			answer <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answer <- resp.Status + " " + string(b)
	}()
	<-arrived
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := <-answer; got != "200 OK finished" {
		t.Errorf("in-flight request: %q, want it finished despite the SIGTERM", got)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			logMu.Lock()
			t.Errorf("exit: %v\n%s", err, logTail.String())
			logMu.Unlock()
		}
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not exit after draining")
	}
	if _, err := client.Get("http://" + addr + "/after"); err == nil {
		t.Error("gateway still accepts requests after exiting")
	}
}
