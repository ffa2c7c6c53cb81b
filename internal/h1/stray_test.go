package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/internal/memnet"
)

// scripted is a pipeBackend that records what the Transport reports as
// unsolicited.
type scripted struct {
	pipeBackend
	mu     sync.Mutex
	events []Unsolicited
}

func newScripted(serve func(net.Conn, *bufio.Reader)) *scripted {
	return &scripted{pipeBackend: pipeBackend{serve: serve}}
}

func (s *scripted) report(u Unsolicited) {
	s.mu.Lock()
	s.events = append(s.events, u)
	s.mu.Unlock()
}

func (s *scripted) reported() []Unsolicited {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Unsolicited(nil), s.events...)
}

func (s *scripted) transport(t *testing.T) *Transport {
	t.Helper()
	tr, err := New(Config{DialContext: s.dial, OnUnsolicited: s.report})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// answerThen answers each request with its path as the body, and then,
// after gap, writes stray: a response nobody asked for. With no gap, the
// stray goes in the answer's own write: it comes with the answer.
func answerThen(gap time.Duration, stray string) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			p := req.URL.Path
			answer := "HTTP/1.1 200 OK\r\nContent-Length: " + itoa(len(p)) + "\r\n\r\n" + p
			if gap == 0 {
				answer += stray
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
			if stray != "" && gap > 0 {
				time.Sleep(gap)
				io.WriteString(c, stray)
			}
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

const strayResp = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n/SMUGGLE"

// bodyOf sends a GET for path and returns its body, or its error.
func bodyOf(tr http.RoundTripper, path string) (string, error) {
	resp, err := get(context.Background(), tr, "http://backend"+path)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return string(b), err
}

// A response that arrives on an idle connection after the answer was
// read (a second write) is never taken for the next request's answer: the
// look as the connection is taken sees it, closes it, reports it, and the
// request goes on a new connection. For suspectFor after, the backend's
// connections are not reused (each request gets a new one); then they
// are again.
func TestStrayWhileIdleNotDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted(answerThen(time.Millisecond, strayResp))
		tr := s.transport(t)
		if b, err := bodyOf(tr, "/1"); b != "/1" {
			t.Fatalf("first request: %q, %v", b, err)
		}
		time.Sleep(2 * time.Millisecond) // the stray arrives while idle
		if b, err := bodyOf(tr, "/2"); b != "/2" {
			t.Fatalf("second request: %q, %v; want its own answer", b, err)
		}
		if ev := s.reported(); len(ev) != 1 || ev[0] != (Unsolicited{Host: "backend"}) {
			t.Errorf("reported %+v; want one stray after an answer", ev)
		}
		if n := s.dialled.Load(); n != 2 {
			t.Errorf("%d dials; want 2", n)
		}
		// Suspect: every request on a new connection, so that a stray
		// still on its way (the next request comes at once) cannot be
		// read as its answer.
		for i := range 3 {
			if b, _ := bodyOf(tr, "/s"); b != "/s" {
				t.Fatalf("request %d while suspect: %q", i, b)
			}
		}
		if n := s.dialled.Load(); n != 5 {
			t.Errorf("%d dials after 3 more requests while suspect; want 5", n)
		}
		// A minute on, it is reused again: the connection of /late is
		// taken by /again, whose look sees the stray.
		time.Sleep(suspectFor)
		s.serve = answerThen(0, "")
		bodyOf(tr, "/late")
		bodyOf(tr, "/again")
		if n := s.dialled.Load(); n != 6 {
			t.Errorf("%d dials after suspectFor; want 6 (one connection for two requests)", n)
		}
		tr.CloseIdleConnections()
		s.wg.Wait()
	})
}

// Bytes that came with the answer, past its end, close the connection as
// it is released (they are buffered) and are reported.
func TestBytesAfterAnswerNotReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted(answerThen(0, strayResp))
		tr := s.transport(t)
		for _, p := range []string{"/1", "/2"} {
			if b, err := bodyOf(tr, p); b != p {
				t.Fatalf("%s: %q, %v", p, b, err)
			}
			synctest.Wait() // the backend's goroutine is back reading: whatever it wrote is on its way
		}
		if n := s.dialled.Load(); n != 2 {
			t.Errorf("%d dials; want 2", n)
		}
		if ev := s.reported(); len(ev) != 2 || ev[0].OnOpen {
			t.Errorf("reported %+v; want two strays after answers", ev)
		}
		tr.CloseIdleConnections()
		s.wg.Wait()
	})
}

// greeter writes greeting after delay on each new connection, then
// answers as answerThen(0, "").
func greeter(delay time.Duration, greeting string) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		time.Sleep(delay)
		if _, err := io.WriteString(c, greeting); err != nil {
			return
		}
		answerThen(0, "")(c, br)
	}
}

// A backend that sends a response as a connection opens, before any
// request, never has it read as an answer: the first connection to an
// address waits settleTimeout for such bytes before its first request;
// they close it and fail the request with ErrUnsolicited, reported as
// OnOpen. For suspectFor after, every new connection waits so.
func TestGreetingNotDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted(greeter(time.Millisecond, strayResp))
		tr := s.transport(t)
		for range 2 {
			start := time.Now()
			b, err := bodyOf(tr, "/1")
			if !errors.Is(err, ErrUnsolicited) {
				t.Fatalf("a greeting backend: %q, %v; want ErrUnsolicited", b, err)
			}
			if took := time.Since(start); took != time.Millisecond {
				t.Errorf("failed after %v; want 1ms, as the greeting came", took)
			}
		}
		if ev := s.reported(); len(ev) != 2 || !ev[0].OnOpen || ev[0].Host != "backend" {
			t.Errorf("reported %+v; want two greetings", ev)
		}
		// It greets no more: the next connection still waits, then goes.
		s.serve = answerThen(0, "")
		start := time.Now()
		if b, err := bodyOf(tr, "/2"); b != "/2" {
			t.Fatalf("%q, %v", b, err)
		}
		if took := time.Since(start); took != settleTimeout {
			t.Errorf("a new connection to a backend that greeted went after %v; want settleTimeout", took)
		}
		tr.CloseIdleConnections()
		s.wg.Wait()
	})
}

// Only the first connection to an address waits settleTimeout; once one
// got no byte in that time, new connections go at once (a look that does
// not wait), and a greeting that is there already is still caught.
func TestSettleOnlyFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted(answerThen(0, ""))
		tr := s.transport(t)
		var held []*http.Response // each holds its connection: the next dials
		for i, want := range []time.Duration{settleTimeout, 0} {
			start := time.Now()
			resp, err := get(context.Background(), tr, "http://backend/x")
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, resp)
			if took := time.Since(start); took != want {
				t.Errorf("connection %d went after %v; want %v", i, took, want)
			}
		}
		for _, resp := range held {
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		tr.CloseIdleConnections()
		s.wg.Wait()
		// A greeting that has arrived as the dial returns.
		tr.dialContext = func(context.Context, string, string) (net.Conn, error) {
			client, server := memnet.Pipe()
			server.Write([]byte(strayResp))
			return client, nil
		}
		if _, err := bodyOf(tr, "/x"); !errors.Is(err, ErrUnsolicited) {
			t.Errorf("a greeting there as the dial returned: %v; want ErrUnsolicited", err)
		}
	})
}

// Prove settles a backend off the request path: a request after it waits
// for nothing and finds the proving connection idle; a backend that
// greets is caught by it, and a request after still waits.
func TestProve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted(answerThen(0, ""))
		tr := s.transport(t)
		tr.Prove("backend")
		tr.Prove("backend") // one dial under way: no second
		synctest.Wait()
		time.Sleep(settleTimeout)
		synctest.Wait()
		if n := len(tr.pool("backend").idle); n != 1 {
			t.Fatalf("%d idle connections after Prove; want 1", n)
		}
		start := time.Now()
		if b, err := bodyOf(tr, "/1"); b != "/1" {
			t.Fatalf("%q, %v", b, err)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("the first request after Prove went after %v; want at once", took)
		}
		tr.Prove("backend") // proven: nothing to do
		synctest.Wait()
		tr.CloseIdleConnections()
		s.wg.Wait()

		g := newScripted(greeter(time.Millisecond, strayResp))
		tr = g.transport(t)
		tr.Prove("backend")
		synctest.Wait()
		time.Sleep(settleTimeout)
		synctest.Wait()
		if ev := g.reported(); len(ev) != 1 || !ev[0].OnOpen {
			t.Errorf("Prove of a greeting backend reported %+v; want one greeting", ev)
		}
		g.serve = answerThen(0, "")
		start = time.Now()
		if b, err := bodyOf(tr, "/2"); b != "/2" {
			t.Fatalf("%q, %v", b, err)
		}
		if took := time.Since(start); took != settleTimeout {
			t.Errorf("a request after a greeting went after %v; want settleTimeout", took)
		}
		tr.CloseIdleConnections()
		g.wg.Wait()
	})
}

// A 204 that announces a body (Content-Length, Transfer-Encoding) is
// answered, and its connection not reused: the body's bytes would follow.
func TestNoContentWithBodyNotReused(t *testing.T) {
	for _, h := range []string{"Content-Length: 5", "Transfer-Encoding: chunked"} {
		t.Run(h, func(t *testing.T) {
			s := newRawServer(t, answer("HTTP/1.1 204 No Content\r\n"+h+"\r\n\r\n"))
			var reported atomic.Int32
			tr := newTransport(t, Config{OnUnsolicited: func(Unsolicited) { reported.Add(1) }})
			for range 2 {
				if code, _ := readAll(t, tr, s.URL+"/x"); code != 204 {
					t.Fatalf("%d; want 204", code)
				}
			}
			if n := s.accepted.Load(); n != 2 {
				t.Errorf("%d connections; want 2", n)
			}
			if n := reported.Load(); n != 2 {
				t.Errorf("%d reported; want 2", n)
			}
		})
	}
	// Content-Length: 0 is common, and harmless.
	s := newRawServer(t, answer("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"))
	tr := newTransport(t, Config{})
	readAll(t, tr, s.URL+"/x")
	readAll(t, tr, s.URL+"/x")
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("204 with Content-Length 0: %d connections; want 1", n)
	}
}

// A 1xx that announces a body fails the request: the body would be read
// as the answer (net/http forwards it).
func TestInformationalWithBodyRefused(t *testing.T) {
	s := newRawServer(t, answer("HTTP/1.1 103 Early Hints\r\nContent-Length: "+itoa(len(strayResp))+"\r\n\r\n"+strayResp+okResp))
	tr := newTransport(t, Config{})
	resp, err := get(context.Background(), tr, s.URL+"/x")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("a 103 with a body: %d %q; want an error", resp.StatusCode, b)
	}
	if !strings.Contains(err.Error(), "malformed") {
		t.Errorf("error %q; want it to say malformed", err)
	}
}

// Over loopback, bytes that reach the socket after the answer was read,
// while the connection is idle, are seen by the look (a recv that peeks
// and does not wait) as it is taken; a server's 408 as it closes an idle
// connection is not reported.
func TestLookOnSocket(t *testing.T) {
	for _, c := range []struct {
		name, stray string
		reported    int32
	}{{"stray response", strayResp, 1}, {"408 as the server closes", "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n", 0}} {
		t.Run(c.name, func(t *testing.T) {
			write, sent := make(chan struct{}), make(chan struct{})
			var first atomic.Bool
			s := newRawServer(t, func(conn net.Conn, br *bufio.Reader) {
				if first.Swap(true) {
					answer(okResp)(conn, br)
					return
				}
				http.ReadRequest(br)
				io.WriteString(conn, okResp)
				<-write
				io.WriteString(conn, c.stray)
				close(sent)
				untilClosed(conn, br)
			})
			var reported atomic.Int32
			tr := newTransport(t, Config{OnUnsolicited: func(Unsolicited) { reported.Add(1) }})
			readAll(t, tr, s.URL+"/x") // its connection idle, nothing buffered
			close(write)
			<-sent
			time.Sleep(10 * time.Millisecond) // for the bytes to reach the client's socket
			if code, b := readAll(t, tr, s.URL+"/x"); code != 200 || b != "ok" {
				t.Fatalf("%d %q; want 200 ok", code, b)
			}
			if n := s.accepted.Load(); n != 2 {
				t.Errorf("%d connections; want 2", n)
			}
			if n := reported.Load(); n != c.reported {
				t.Errorf("%d reported; want %d", n, c.reported)
			}
		})
	}
}

// A look allocates nothing: it runs on every reuse.
func TestLookAllocatesNothing(t *testing.T) {
	s := newRawServer(t, answer(okResp))
	tr := newTransport(t, Config{})
	readAll(t, tr, s.URL+"/x")
	c := tr.pool(strings.TrimPrefix(s.URL, "http://")).take()
	if c == nil || c.raw == nil {
		t.Fatal("no idle socket")
	}
	defer c.close()
	if n := testing.AllocsPerRun(100, func() {
		if c.look() != lookEmpty {
			t.Fatal("bytes on an idle connection")
		}
	}); n != 0 {
		t.Errorf("%v allocations per look; want 0", n)
	}
}
