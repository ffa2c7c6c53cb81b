package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/internal/connlimit"
)

// -max-conns is validated with a message naming it, and documented with
// its default.
func TestServeMaxConnsFlag(t *testing.T) {
	for _, v := range []string{"0", "-5", "many"} {
		code, _, stderr := runCmd("serve", "-backends", "http://127.0.0.1:1", "-max-conns", v)
		if code != exitUsage || !strings.Contains(stderr, "max-conns") {
			t.Errorf("-max-conns %s: exit %d, stderr %q; want 2 naming the flag", v, code, stderr)
		}
	}
	_, stdout, _ := runCmd("serve", "-h")
	if !regexp.MustCompile(`-max-conns int\n[^\n]*longest-idle[^\n]*refused[^\n]*\(default 10000\)`).MatchString(stdout) {
		t.Errorf("serve -h lacks -max-conns with its default:\n%s", stdout)
	}
}

// lockedBuffer is a log destination the test reads while serve writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServe runs serve in-process with args after -backends backend and
// loopback listeners, and returns the client and admin addresses; the
// cleanup stops it and waits for it to return.
func startServe(t *testing.T, backend string, args ...string) (addr, admin string) {
	t.Helper()
	var f serveFlags
	fs := newFlags("serve", "", io.Discard)
	f.register(fs)
	base := []string{"-backends", backend, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-attempts-per-request", "1"}
	if err := fs.Parse(append(base, args...)); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cfg, _, err := f.config(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Logger = logger
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, g, f, logger) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		g.Close()
	})
	re := regexp.MustCompile(`msg="(gateway|admin) listening" addr=(\S+)`)
	for deadline := time.Now().Add(10 * time.Second); addr == "" || admin == ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no listening lines in:\n%s", logs.String())
		}
		for _, m := range re.FindAllStringSubmatch(logs.String(), -1) {
			if m[1] == "gateway" {
				addr = m[2]
			} else {
				admin = m[2]
			}
		}
	}
	return addr, admin
}

// scrape returns the admin listener's /metrics as series -> value.
func scrape(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %s %s", resp.Status, b)
	}
	series := map[string]float64{}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		l := lines.Text()
		if strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		series[l[:i]] = v
	}
	return series
}

// rawGet sends a GET on c and reads the answer's status line and body.
func rawGet(c net.Conn, r *bufio.Reader, path string) (string, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: gw\r\n\r\n", path); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.Status + " " + string(b), err
}

// The gateway keeps -max-conns client connections: with both busy, a third
// is refused at once; with both idle, a third displaces the longest-idle
// one. Both are counted on the admin listener's /metrics, next to the Go
// runtime's and the process's series and the gateway's own.
func TestServeMaxConns(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	arrived := make(chan struct{}, 2)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			arrived <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	defer backend.Close()
	addr, admin := startServe(t, backend.URL, "-max-conns", "2", "-max-requests", "4")

	type conn struct {
		net.Conn
		r *bufio.Reader
	}
	dial := func() (*conn, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { c.Close() })
		return &conn{c, bufio.NewReader(c)}, nil
	}
	var busy []*conn
	answers := make(chan string, 2)
	for range 2 {
		c, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
		go func() {
			a, err := rawGet(c, c.r, "/block")
			if err != nil {
				a = err.Error()
			}
			answers <- a
		}()
		<-arrived
	}

	// Over the limit with none idle: closed at once (the reset may even
	// beat the end of the handshake).
	if c, err := dial(); err == nil {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.r.ReadByte(); err == nil || isTimeout(err) {
			t.Errorf("third connection: read %v; want it closed by the gateway", err)
		}
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	once.Do(func() { close(release) })
	for range 2 {
		if a := <-answers; a != "200 OK ok" {
			t.Errorf("request in flight: %q", a)
		}
	}
	m := scrape(t, admin)
	if m["tailgate_client_connections_refused_total"] != 1 || m["tailgate_client_connections_max"] != 2 {
		t.Errorf("refused %v max %v; want 1 and 2", m["tailgate_client_connections_refused_total"], m["tailgate_client_connections_max"])
	}

	// Both idle now: a newcomer is served, the longest idle closed.
	waitIdle := time.Now().Add(5 * time.Second)
	for scrape(t, admin)[`tailgate_client_connections{state="idle"}`] != 2 {
		if time.Now().After(waitIdle) {
			t.Fatal("the two connections never went idle")
		}
		time.Sleep(time.Millisecond)
	}
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	if a, err := rawGet(c, c.r, "/"); err != nil || a != "200 OK ok" {
		t.Errorf("newcomer at the limit: %q %v", a, err)
	}
	m = scrape(t, admin)
	if m["tailgate_client_connections_reclaimed_total"] != 1 || m["tailgate_client_connections_refused_total"] != 1 {
		t.Errorf("reclaimed %v refused %v; want 1 and 1", m["tailgate_client_connections_reclaimed_total"], m["tailgate_client_connections_refused_total"])
	}
	for _, want := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", `tailgate_requests_total{code="200",route="default"}`, `tailgate_in_flight{kind="requests"}`} {
		if _, ok := m[want]; !ok {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if runtime.GOOS == "linux" {
		if m["process_resident_memory_bytes"] <= 0 || m["process_open_fds"] <= 0 {
			t.Errorf("process series: rss %v fds %v", m["process_resident_memory_bytes"], m["process_open_fds"])
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// pipeListener hands out one end of a new in-memory pipe on each Accept,
// so that a connlimit.Listener can run inside a synctest bubble.
type pipeListener struct{ peers []net.Conn }

func (p *pipeListener) Accept() (net.Conn, error) {
	a, b := net.Pipe()
	p.peers = append(p.peers, b)
	return a, nil
}
func (p *pipeListener) Close() error {
	for _, c := range p.peers {
		c.Close()
	}
	return nil
}
func (p *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// One trim for a wave of closed connections, once it is over: not for a
// fall smaller than minDrop, not while connections are still going fast,
// and not twice.
func TestTrimAfterWaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := &pipeListener{}
		ln := connlimit.New(inner, 100)
		defer ln.Close()
		var conns []net.Conn
		for range 20 {
			c, _ := ln.Accept()
			conns = append(conns, c)
		}
		logs := &lockedBuffer{}
		logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		const poll = 5 * time.Second
		go func() { trimAfterWaves(ctx, ln, logger, poll, 10); close(done) }()
		defer func() { cancel(); <-done }()

		trims := func() int { return strings.Count(logs.String(), "returned memory") }
		closeN := func(n int) {
			for range n {
				conns[0].Close()
				conns = conns[1:]
			}
		}
		step := func(want int, what string) {
			t.Helper()
			time.Sleep(poll)
			synctest.Wait()
			if n := trims(); n != want {
				t.Fatalf("%s: %d trims, want %d", what, n, want)
			}
		}
		step(0, "no change")
		closeN(6)
		step(0, "6 of 20 closed, under the drop of 10")
		closeN(6)
		step(0, "12 closed, but still falling")
		step(1, "12 closed and no longer falling")
		if !strings.Contains(logs.String(), "peak=20 open=8") {
			t.Errorf("trim log: %s", logs.String())
		}
		step(1, "the same wave")
		// A new peak and a new wave.
		for range 15 {
			c, _ := ln.Accept()
			conns = append(conns, c)
		}
		closeN(20)
		step(1, "a wave that ended within one poll, seen falling")
		step(2, "the second wave, over")
		closeN(len(conns))
		step(2, "3 more closed: under the drop")
	})
}
