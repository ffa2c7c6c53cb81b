package connlimit

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/internal/testpki"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server serves h on a loopback Listener limited to max connections.
func server(t *testing.T, max int, h http.Handler) (*Listener, string) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := New(inner, max)
	srv := &http.Server{Handler: h, ConnState: ln.ConnState, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return ln, inner.Addr().String()
}

var hello = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") })

// client is a raw keep-alive HTTP/1.1 connection.
type client struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{Conn: c, r: bufio.NewReader(c)}
}

// get sends a GET and returns the answer's body, or the error.
func (c *client) get(path string) (string, error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", path); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// closedByPeer reports whether the server closed c (a read ends in EOF or
// a reset), as opposed to the read timing out with c still open.
func (c *client) closedByPeer(t *testing.T) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.r.ReadByte()
	if err == nil {
		t.Fatal("unexpected byte from the server")
	}
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// refused reports whether a new connection to addr is closed by the
// server at once. On loopback the reset may beat the handshake's end, and
// then the dial itself fails.
func refused(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.ECONNRESET)
	}
	defer c.Close()
	return (&client{Conn: c, r: bufio.NewReader(c)}).closedByPeer(t)
}

// waitFor polls until cond holds; the listener's bookkeeping follows the
// server's goroutines, which the test cannot join.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// With every slot in the middle of a request, a new connection is refused
// at once (closed, not left waiting), and counted; the requests in flight
// finish; a freed slot takes the next connection.
func TestRefusesWhenNoneIdle(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	ln, addr := server(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			<-release
		}
		io.WriteString(w, "done")
	}))
	busy := []*client{dial(t, addr), dial(t, addr)}
	answers := make(chan string, 2)
	for _, c := range busy {
		go func() {
			b, err := c.get("/block")
			if err != nil {
				b = err.Error()
			}
			answers <- b
		}()
	}
	waitFor(t, "two requests in flight", func() bool { s := ln.Stats(); return s.Open == 2 && s.Idle == 0 })

	start := time.Now()
	if !refused(t, addr) {
		t.Fatal("connection over the limit left open")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusal took %v", d)
	}
	if s := ln.Stats(); s.Refused != 1 || s.Reclaimed != 0 || s.Open != 2 {
		t.Errorf("stats %+v; want 1 refused, 2 open", s)
	}

	once.Do(func() { close(release) })
	for range busy {
		if a := <-answers; a != "done" {
			t.Errorf("request in flight answered %q", a)
		}
	}
	busy[0].Close()
	waitFor(t, "a slot freed", func() bool { return ln.Stats().Open == 1 })
	if b, err := dial(t, addr).get("/"); err != nil || b != "done" {
		t.Errorf("after a slot freed: %q %v", b, err)
	}
}

// At the limit, a new connection displaces the one idle the longest: that
// one is closed, the other idle one and the newcomer are served.
func TestReclaimsLongestIdle(t *testing.T) {
	ln, addr := server(t, 2, hello)
	first, second := dial(t, addr), dial(t, addr)
	if _, err := first.get("/"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first idle", func() bool { return ln.Stats().Idle == 1 })
	if _, err := second.get("/"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both idle", func() bool { return ln.Stats().Idle == 2 })

	if b, err := dial(t, addr).get("/"); err != nil || b != "hello" {
		t.Fatalf("newcomer at the limit: %q %v", b, err)
	}
	if !first.closedByPeer(t) {
		t.Error("the longest-idle connection was not closed")
	}
	if b, err := second.get("/"); err != nil || b != "hello" {
		t.Errorf("the other idle connection: %q %v", b, err)
	}
	waitFor(t, "the displaced connection's close", func() bool { return ln.Stats().Open == 2 })
	if s := ln.Stats(); s.Reclaimed != 1 || s.Refused != 0 || s.Open != 2 {
		t.Errorf("stats %+v; want 1 reclaimed, 2 open", s)
	}
}

// A connection that turned active again (a new request) is no longer
// reclaimable: with it busy and no other idle, the newcomer is refused.
func TestActiveIsNotReclaimed(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	ln, addr := server(t, 1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			<-release
		}
		io.WriteString(w, "ok")
	}))
	c := dial(t, addr)
	if _, err := c.get("/"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "idle", func() bool { return ln.Stats().Idle == 1 })
	answer := make(chan error, 1)
	go func() { _, err := c.get("/block"); answer <- err }()
	waitFor(t, "active again", func() bool { return ln.Stats().Idle == 0 })
	if !refused(t, addr) {
		t.Error("newcomer not refused")
	}
	once.Do(func() { close(release) })
	if err := <-answer; err != nil {
		t.Errorf("the busy connection's request: %v", err)
	}
	if s := ln.Stats(); s.Refused != 1 || s.Reclaimed != 0 {
		t.Errorf("stats %+v", s)
	}
}

// Slots are counted exactly under concurrent opens, closes, displacements
// and refusals: once every client has gone, none is held.
func TestSlotsBalanceUnderChurn(t *testing.T) {
	ln, addr := server(t, 8, hello)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for j := range 10 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					continue // refused before the handshake ended
				}
				cl := &client{Conn: c, r: bufio.NewReader(c)}
				if (i+j)%3 != 0 {
					cl.get("/") // may fail: refused or displaced
				}
				c.Close()
			}
		})
	}
	wg.Wait()
	waitFor(t, "every slot back", func() bool { s := ln.Stats(); return s.Open == 0 && s.Idle == 0 })
	s := ln.Stats()
	if s.Refused+s.Reclaimed == 0 {
		t.Errorf("stats %+v: 64 clients on 8 slots never hit the limit", s)
	}
	if p := ln.TakePeak(); p != 8 {
		t.Errorf("peak %d, want the limit, 8", p)
	}
}

// TakePeak reports the high-water mark since the last call, then restarts
// from the number open.
func TestTakePeak(t *testing.T) {
	ln, addr := server(t, 10, hello)
	var cs []*client
	for range 3 {
		cs = append(cs, dial(t, addr))
	}
	waitFor(t, "3 open", func() bool { return ln.Stats().Open == 3 })
	cs[0].Close()
	cs[1].Close()
	waitFor(t, "1 open", func() bool { return ln.Stats().Open == 1 })
	if p := ln.TakePeak(); p != 3 {
		t.Errorf("peak %d, want 3", p)
	}
	if p := ln.TakePeak(); p != 1 {
		t.Errorf("peak after taking %d, want the 1 open", p)
	}
}

// States reported for connections the listener did not hand out, or after
// a connection closed, change nothing.
func TestConnStateIgnoresStrangers(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	ln := New(inner, 1)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ln.ConnState(a, http.StateIdle)
	other := New(inner, 1)
	c := &conn{Conn: b, l: other}
	ln.ConnState(c, http.StateIdle)
	if s := ln.Stats(); s.Idle != 0 {
		t.Errorf("stranger counted idle: %+v", s)
	}
	mine := &conn{Conn: b, l: ln}
	ln.open = 1
	mine.Close()
	ln.ConnState(mine, http.StateIdle)
	if s := ln.Stats(); s.Idle != 0 || s.Open != 0 {
		t.Errorf("closed connection's state counted: %+v", s)
	}
	mine.Close() // twice: the slot is given up once
	if s := ln.Stats(); s.Open != 0 {
		t.Errorf("second close freed a slot again: %+v", s)
	}
}

func TestNewPanicsOnZero(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New(ln, 0) did not panic")
		}
	}()
	New(nil, 0)
}

// Behind a TLS listener (the server sees *tls.Conn), connections count as
// the ones they wrap, over HTTP/1.1 and HTTP/2 alike: idle between
// requests, and reclaimed for a newcomer at the limit.
func TestConnStateThroughTLS(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	for _, proto := range []string{"http/1.1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := New(inner, 1)
			srv := &http.Server{Handler: hello, ConnState: ln.ConnState, ReadHeaderTimeout: 5 * time.Second,
				TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, testpki.Leaf{}).TLS}}}
			done := make(chan struct{})
			go func() { srv.ServeTLS(ln, "", ""); close(done) }()
			t.Cleanup(func() { srv.Close(); <-done })
			newClient := func() *http.Client {
				tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{proto}}, ForceAttemptHTTP2: proto == "h2"}
				t.Cleanup(tr.CloseIdleConnections)
				return &http.Client{Transport: tr, Timeout: 5 * time.Second}
			}
			first := newClient()
			resp, err := first.Get("https://" + inner.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if want := map[string]int{"http/1.1": 1, "h2": 2}[proto]; resp.ProtoMajor != want {
				t.Fatalf("%s, want HTTP/%d", resp.Proto, want)
			}
			waitFor(t, "idle", func() bool { return ln.Stats().Idle == 1 })
			resp, err = newClient().Get("https://" + inner.Addr().String())
			if err != nil {
				t.Fatalf("newcomer at the limit: %v", err)
			}
			resp.Body.Close()
			if s := ln.Stats(); s.Reclaimed != 1 || s.Refused != 0 {
				t.Errorf("stats %+v; want the idle TLS connection reclaimed", s)
			}
		})
	}
}
