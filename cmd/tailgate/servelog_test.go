package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
)

// logSink is a writer for serve's log that a test can wait on.
type logSink struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed, and replaced, at each write
}

func newLogSink() *logSink { return &logSink{changed: make(chan struct{})} }

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
	return s.b.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the log matches re and returns the match and its
// groups; it fails the test after 10s.
func (s *logSink) waitFor(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		m, ch := rx.FindStringSubmatch(s.b.String()), s.changed
		s.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("log never matched %s:\n%s", re, s.String())
		}
	}
}

// runServeLogged runs serve, through run and its real flag parsing, with
// args (its listeners on ephemeral loopback ports, the admin one off
// unless args set it) until the test ends, and returns its log (stdout and
// stderr) and the client address once it listens.
func runServeLogged(t *testing.T, args ...string) (*logSink, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := newLogSink()
	done := make(chan int, 1)
	args = append([]string{"serve", "-listen", "127.0.0.1:0", "-admin", ""}, args...)
	go func() { done <- run(ctx, args, log, log) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("serve exited %d:\n%s", code, log)
		}
	})
	m := log.waitFor(t, `msg"?[=:]"gateway listening"[ ,]"?addr"?[=:]"?([0-9.:]+)`)
	return log, m[1]
}

// Two backends that are one server under two names start, with a warning
// naming both.
func TestServeWarnsSameServer(t *testing.T) {
	log, _ := runServeLogged(t, "-backends", "http://localhost:1,http://127.0.0.1:1,http://127.0.0.1:2")
	line := log.waitFor(t, `level=WARN msg="two backends are one server[^\n]*`)[0]
	if !strings.Contains(line, "backend=http://localhost:1 sameAs=http://127.0.0.1:1 addr=127.0.0.1:1") {
		t.Errorf("warning %q", line)
	}
	if n := strings.Count(log.String(), "one server"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, log)
	}
}

// The backend URL mistakes an operator makes are refused with one prefix
// and words that say what to do.
func TestServeBackendErrors(t *testing.T) {
	for b, want := range map[string]string{
		"127.0.0.1:8081":         `tailgate serve: gateway: invalid configuration: backend "127.0.0.1:8081": URLs need http:// or https://, such as http://127.0.0.1:8081` + "\n",
		"http://127.0.0.1:99999": `tailgate serve: gateway: invalid configuration: backend "http://127.0.0.1:99999": port 99999 out of range: want 1 to 65535` + "\n",
	} {
		code, _, stderr := runCmd("serve", "-backends", b, "-listen", "127.0.0.1:0", "-admin", "")
		if code != exitUsage || stderr != want {
			t.Errorf("-backends %s: exit %d, stderr\n%s\nwant 2 and\n%s", b, code, stderr, want)
		}
	}
}

// JSON logs give durations in seconds, text logs in Go's form; nested
// groups too.
func TestLoggerDurations(t *testing.T) {
	var b bytes.Buffer
	logger, err := newLogger(&b, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("x", "timeout", 10*time.Second, "took", 1500*time.Microsecond, slog.Group("g", "d", time.Minute), "n", 7)
	if got, want := b.String(), `"timeout":10,"took":0.0015,"g":{"d":60},"n":7}`; !strings.HasSuffix(strings.TrimSpace(got), want) {
		t.Errorf("json: %s, want it to end %s", got, want)
	}
	b.Reset()
	if logger, err = newLogger(&b, "text", "info"); err != nil {
		t.Fatal(err)
	}
	logger.Info("x", "timeout", 10*time.Second, "took", 1500*time.Microsecond)
	if got := b.String(); !strings.HasSuffix(got, " timeout=10s took=1.5ms\n") {
		t.Errorf("text: %q", got)
	}
}

func TestServeAccessLogFlags(t *testing.T) {
	ok := "http://127.0.0.1:1"
	for _, args := range [][]string{
		{"-access-log", "maybe"},
		{"-access-log", "true"},
		{"-access-log-sample", "0.5"}, // without -access-log on
		{"-access-log", "off", "-access-log-sample", "0.5"},
		{"-access-log", "on", "-access-log-sample", "0"},
		{"-access-log", "on", "-access-log-sample", "1.5"},
		{"-access-log", "on", "-access-log-sample", "NaN"},
	} {
		code, _, stderr := runCmd(append([]string{"serve", "-backends", ok}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, "-access-log") {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 naming the flag", args, code, stderr)
		}
	}
	parse := func(args ...string) gateway.Config {
		t.Helper()
		var f serveFlags
		fs := newFlags("serve", "", io.Discard)
		f.register(fs)
		if err := fs.Parse(append([]string{"-backends", ok}, args...)); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := f.config(io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if cfg := parse(); cfg.AccessLog != nil {
		t.Error("access log on by default")
	}
	// On, it logs whatever -log-level keeps of the rest.
	cfg := parse("-access-log", "on", "-log-level", "error", "-access-log-sample", "0.01")
	if cfg.AccessLog == nil || !cfg.AccessLog.Enabled(context.Background(), slog.LevelInfo) || cfg.AccessLogSample != 0.01 ||
		cfg.Logger.Enabled(context.Background(), slog.LevelWarn) {
		t.Errorf("-access-log on -log-level error: access log %v, sample %v", cfg.AccessLog, cfg.AccessLogSample)
	}
	if cfg := parse("-access-log", "on"); cfg.AccessLogSample != 1 {
		t.Errorf("default sample %v", cfg.AccessLogSample)
	}
	code, stdout, _ := runCmd("serve", "-h")
	if code != exitOK || !regexp.MustCompile(`-access-log string\n[^\n]*"on" writes one line per request[^\n]*\(default "off"\)`).MatchString(stdout) ||
		!regexp.MustCompile(`-access-log-sample float\n[^\n]*\(0, 1\][^\n]*\(default 1\)`).MatchString(stdout) {
		t.Errorf("serve -h:\n%s", stdout)
	}
}

// End to end, in JSON: a read through serve with -access-log on gets its
// line, durations in seconds, the replica that answered and the client.
func TestServeAccessLog(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer backend.Close()
	log, addr := runServeLogged(t, "-backends", backend.URL, "-access-log", "on", "-log-format", "json")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + addr + "/hi?token=secret")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	line := log.waitFor(t, `\{[^\n]*"msg":"access"[^\n]*\}`)[0]
	var got map[string]any
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatal(err)
	}
	d, _ := got["duration"].(float64)
	client0, _ := got["client"].(string)
	if got["method"] != "GET" || got["path"] != "/hi" || got["status"] != 200.0 || got["bytes"] != 5.0 || got["replica"] != backend.URL ||
		got["attempts"] != 1.0 || got["hedged"] != false || got["hedgeWon"] != false || got["reason"] != nil ||
		!(d > 0 && d < 10) || !strings.HasPrefix(client0, "127.0.0.1:") || strings.Contains(line, "secret") {
		t.Errorf("access line %s", line)
	}
}
