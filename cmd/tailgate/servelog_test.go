package main

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
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
	m := log.waitFor(t, `msg="?gateway listening"? (?:"addr":"|addr=)([^" ]+)`)
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
