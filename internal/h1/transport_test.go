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

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/memnet"
	"github.com/tailgate-dev/tailgate/internal/upgrade"
)

const okResp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// A connection whose response was read to its end goes back to the pool:
// sequential requests share one connection.
func TestPoolReuse(t *testing.T) {
	s := newRawServer(t, answer(okResp))
	tr := newTransport(t, Config{})
	for i := range 5 {
		if code, b := readAll(t, tr, s.URL+"/x"); code != 200 || b != "ok" {
			t.Fatalf("request %d: %d %q", i, code, b)
		}
	}
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("%d connections for 5 sequential requests; want 1", n)
	}
}

// A body closed before its end closes its connection: the next request
// dials a new one, and the server sees the first closed.
func TestBodyNotFullyReadIsNotReused(t *testing.T) {
	s := newRawServer(t, answer("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789"))
	tr := newTransport(t, Config{})
	resp, err := get(context.Background(), tr, s.URL+"/x")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.waitClosed(t, 1)
	if _, err := resp.Body.Read(buf); !errors.Is(err, errBodyClosed) {
		t.Errorf("read after close: %v; want %v", err, errBodyClosed)
	}
	if code, b := readAll(t, tr, s.URL+"/x"); code != 200 || b != "0123456789" {
		t.Fatalf("second request: %d %q", code, b)
	}
	if n := s.accepted.Load(); n != 2 {
		t.Errorf("%d connections; want 2", n)
	}
}

// A response that does not allow keep-alive (Connection: close, or a
// body framed by the connection's end) closes its connection.
func TestNoKeepAliveIsNotReused(t *testing.T) {
	for _, resp := range []string{
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
	} {
		s := newRawServer(t, answer(resp))
		tr := newTransport(t, Config{})
		for range 2 {
			if code, b := readAll(t, tr, s.URL+"/x"); code != 200 || b != "ok" {
				t.Fatalf("%q: %d %q", resp, code, b)
			}
		}
		if n := s.accepted.Load(); n != 2 {
			t.Errorf("%q: %d connections for 2 requests; want 2", resp, n)
		}
	}
	// To the connection's end: the server closes, the body ends there.
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		http.ReadRequest(br)
		io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\nuntil close")
	})
	tr := newTransport(t, Config{})
	if code, b := readAll(t, tr, s.URL+"/x"); code != 200 || b != "until close" {
		t.Fatalf("body to close: %d %q", code, b)
	}
}

// Cancelling the context while the response's header is awaited closes
// the connection and returns at once, with the context's error.
func TestCancelMidHeader(t *testing.T) {
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		http.ReadRequest(br)
		untilClosed(c, br) // never answers
	})
	tr := newTransport(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := get(ctx, tr, s.URL+"/x")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v; want context.Canceled", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("returned %v after the start; want at once after the cancel at 50ms", took)
	}
	s.waitClosed(t, 1)
}

// A deadline that passes while a body trickles closes the connection and
// ends the read with the deadline's error.
func TestCancelMidBody(t *testing.T) {
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		http.ReadRequest(br)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
		untilClosed(c, br)
	})
	tr := newTransport(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	resp, err := get(ctx, tr, s.URL+"/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	b, err := io.ReadAll(resp.Body)
	if !errors.Is(err, context.DeadlineExceeded) || string(b) != "0123456789" {
		t.Fatalf("read %q, %v; want the first 10 bytes and context.DeadlineExceeded", b, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("read ended %v after it began; want at the 100ms deadline", took)
	}
	s.waitClosed(t, 1)
}

// A context already done sends nothing.
func TestCanceledBeforeSend(t *testing.T) {
	s := newRawServer(t, answer(okResp))
	tr := newTransport(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := get(ctx, tr, s.URL+"/x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v; want context.Canceled", err)
	}
	if n := s.accepted.Load(); n != 0 {
		t.Errorf("%d connections; want none", n)
	}
}

// A header block over the limit fails the request with net/http's
// message and closes the connection; 1xx answers count against it.
func TestOversizeHeaders(t *testing.T) {
	for name, resp := range map[string]string{
		"one block": "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 2<<10) + "\r\nContent-Length: 2\r\n\r\nok",
		"1xx first": strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n", 40) + okResp,
	} {
		t.Run(name, func(t *testing.T) {
			s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
				http.ReadRequest(br)
				io.WriteString(c, resp)
				untilClosed(c, br)
			})
			tr := newTransport(t, Config{MaxResponseHeaderBytes: 1 << 10})
			_, err := get(context.Background(), tr, s.URL+"/x")
			if err == nil || !strings.Contains(err.Error(), "server response headers exceeded 1024 bytes") {
				t.Fatalf("error %v; want headers exceeded 1024 bytes", err)
			}
			s.waitClosed(t, 1)
		})
	}
}

// A 101 to a request that asked for no upgrade comes back with the rest
// of the stream as its body, for the hedge engine to refuse; its
// connection is never reused, and closed with the body.
func TestStraySwitchingProtocols(t *testing.T) {
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		http.ReadRequest(br)
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: evil\r\n\r\nraw bytes")
		untilClosed(c, br)
	})
	tr := newTransport(t, Config{})
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/x", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("%v, %v; want a 101", resp, err)
	}
	if err := upgrade.RefuseStray(req, resp); !errors.Is(err, hedge.ErrUnexpectedUpgrade) {
		t.Fatalf("RefuseStray: %v; want ErrUnexpectedUpgrade", err)
	}
	s.waitClosed(t, 1) // RefuseStray closed the body, so the connection
}

// 100 Continue and 103 Early Hints before the answer are skipped, and the
// connection is reused after it.
func TestInformationalThenResponse(t *testing.T) {
	s := newRawServer(t, answer("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"+okResp))
	tr := newTransport(t, Config{})
	for range 2 {
		if code, b := readAll(t, tr, s.URL+"/x"); code != 200 || b != "ok" {
			t.Fatalf("%d %q; want 200 ok", code, b)
		}
	}
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("%d connections; want 1", n)
	}
}

// A chunked body with a trailer is read whole, and its connection reused.
func TestChunked(t *testing.T) {
	s := newRawServer(t, answer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nX-T: done\r\n\r\n"))
	tr := newTransport(t, Config{})
	for range 2 {
		resp, err := get(context.Background(), tr, s.URL+"/x")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "hello world" || resp.Trailer.Get("X-T") != "done" {
			t.Fatalf("body %q, trailer %v, %v", b, resp.Trailer, err)
		}
	}
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("%d connections; want 1", n)
	}
}

// Malformed answers fail with net/http's parser's errors and close the
// connection: bytes that are not HTTP, a bad chunk size, a body cut short
// by a reset.
func TestMalformed(t *testing.T) {
	for _, c := range []struct {
		name, resp string
		reset      bool
		want       string
	}{
		{"garbage", "\x16\x03\x01\x00\xff not HTTP at all\r\n\r\n", false, "malformed HTTP"},
		{"bad chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", false, "chunk"},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", false, "unexpected EOF"},
		{"reset mid-body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", true, "reset"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newRawServer(t, func(conn net.Conn, br *bufio.Reader) {
				http.ReadRequest(br)
				io.WriteString(conn, c.resp)
				if c.reset {
					time.Sleep(20 * time.Millisecond) // the bytes reach the client before the reset
					conn.(*net.TCPConn).SetLinger(0)
					return
				}
				if !strings.Contains(c.resp, "Content-Length: 100") {
					untilClosed(conn, br)
				}
			})
			tr := newTransport(t, Config{})
			resp, err := get(context.Background(), tr, s.URL+"/x")
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want one with %q", err, c.want)
			}
			s.waitClosed(t, 1)
		})
	}
}

// staleServer answers the first request on each connection, then closes
// it as a server's idle timeout would; it reports each close on closed.
func staleServer(t *testing.T, resp string) (*rawServer, chan struct{}) {
	closed := make(chan struct{}, 16)
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, resp)
		c.Close()
		closed <- struct{}{}
	})
	return s, closed
}

// A pooled connection the server closed while it was idle (its idle
// timeout) is seen closed as it is taken: the request, a POST too, goes
// on a new connection, and nothing fails.
func TestIdleClosedByServerNotUsed(t *testing.T) {
	s, closed := staleServer(t, okResp)
	tr := newTransport(t, Config{})
	readAll(t, tr, s.URL+"/x")
	<-closed // the pooled connection is now closed at the server
	time.Sleep(10 * time.Millisecond)
	if code, b := readAll(t, tr, s.URL+"/x"); code != 200 || b != "ok" {
		t.Fatalf("GET after the server closed the idle connection: %d %q; want 200 ok", code, b)
	}
	<-closed
	time.Sleep(10 * time.Millisecond)
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/x", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("POST after the server closed the idle connection: %v", err)
	}
	resp.Body.Close()
	if n := s.accepted.Load(); n != 3 {
		t.Errorf("%d connections; want 3 (one per request)", n)
	}
}

// lateClose is a pooled connection whose server closes it just after the
// client looked at it (Buffered says nothing has come), as it is taken:
// the request written on it fails before any byte of an answer.
type lateClose struct{ *memnet.Conn }

func (lateClose) Buffered() (int, error) { return 0, nil }

// A GET that fails on a pooled connection closed as it was taken, before
// any answer, is sent again, once, on a new connection; a POST is not.
func TestClosedAsTakenRetried(t *testing.T) {
	for _, c := range []struct {
		method string
		ok     bool
		dials  int32 // the first request's, and the retry's
	}{{http.MethodGet, true, 2}, {http.MethodPost, false, 1}} {
		t.Run(c.method, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var (
					server *memnet.Conn
					dials  atomic.Int32
					wg     sync.WaitGroup
				)
				dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
					client, s := memnet.Pipe()
					server = s
					dials.Add(1)
					wg.Go(func() {
						answer(okResp)(s, bufio.NewReader(s))
						s.Close()
					})
					return lateClose{client}, nil
				}
				tr, err := New(Config{DialContext: dial})
				if err != nil {
					t.Fatal(err)
				}
				resp, err := get(context.Background(), tr, "http://backend/x")
				if err != nil {
					t.Fatal(err)
				}
				io.ReadAll(resp.Body)
				resp.Body.Close() // pooled
				server.Close()
				synctest.Wait()
				req, _ := http.NewRequest(c.method, "http://backend/x", nil)
				resp, err = tr.RoundTrip(req)
				if c.ok != (err == nil) {
					t.Fatalf("%s on a connection closed as it was taken: %v", c.method, err)
				}
				if err == nil {
					io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				if n := dials.Load(); n != c.dials {
					t.Errorf("%d dials; want %d", n, c.dials)
				}
				tr.CloseIdleConnections()
				wg.Wait()
			})
		})
	}
}

// A reused connection that fails after part of an answer is not retried:
// the server had begun to answer.
func TestPartialAnswerNotRetried(t *testing.T) {
	var cut atomic.Bool
	s := newRawServer(t, func(c net.Conn, br *bufio.Reader) {
		http.ReadRequest(br)
		io.WriteString(c, okResp)
		http.ReadRequest(br)
		if !cut.Swap(true) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Le")
		}
	})
	tr := newTransport(t, Config{})
	readAll(t, tr, s.URL+"/x")
	if _, err := get(context.Background(), tr, s.URL+"/x"); err == nil {
		t.Fatal("a request cut short in its header succeeded")
	}
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("%d connections; want 1 (no retry)", n)
	}
}

// HEAD has no body: its connection goes back to the pool at once.
func TestHead(t *testing.T) {
	s := newRawServer(t, answer("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"))
	tr := newTransport(t, Config{})
	for range 3 {
		req, _ := http.NewRequest(http.MethodHead, s.URL+"/x", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.ContentLength != 1234 || resp.Body != http.NoBody {
			t.Fatalf("HEAD: %v %v", resp, err)
		}
	}
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("%d connections; want 1", n)
	}
}

// Bytes after a response's end that nobody asked for keep its connection
// out of the pool.
func TestUnsolicitedBytesNotReused(t *testing.T) {
	s := newRawServer(t, answer(okResp+"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil"))
	tr := newTransport(t, Config{})
	for range 2 {
		if code, b := readAll(t, tr, s.URL+"/x"); code != 200 || b != "ok" {
			t.Fatalf("%d %q; want 200 ok", code, b)
		}
	}
	if n := s.accepted.Load(); n != 2 {
		t.Errorf("%d connections; want 2", n)
	}
}

// What the Transport does not send itself goes to Fallback as it is.
func TestFallback(t *testing.T) {
	var got []*http.Request
	fb := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r)
		return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
	})
	tr := newTransport(t, Config{Fallback: fb})
	reqs := []*http.Request{}
	for _, mk := range []func() *http.Request{
		func() *http.Request { r, _ := http.NewRequest("GET", "https://127.0.0.1:1/x", nil); return r },
		func() *http.Request {
			r, _ := http.NewRequest("POST", "http://127.0.0.1:1/x", strings.NewReader("b"))
			return r
		},
		func() *http.Request {
			r, _ := http.NewRequest("GET", "http://127.0.0.1:1/x", nil)
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", "websocket")
			return r
		},
	} {
		r := mk()
		reqs = append(reqs, r)
		if _, err := tr.RoundTrip(r); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(reqs) {
		t.Fatalf("fallback got %d requests; want %d", len(got), len(reqs))
	}
	for i := range reqs {
		if got[i] != reqs[i] {
			t.Errorf("request %d: fallback got another request", i)
		}
	}
	noFallback := newTransport(t, Config{})
	r, _ := http.NewRequest("GET", "https://127.0.0.1:1/x", nil)
	if _, err := noFallback.RoundTrip(r); !errors.Is(err, ErrNotHandled) {
		t.Errorf("https without a fallback: %v; want ErrNotHandled", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A dial that never completes is bounded by DialTimeout.
func TestDialTimeout(t *testing.T) {
	tr := newTransport(t, Config{DialTimeout: 50 * time.Millisecond, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	_, err := get(context.Background(), tr, "http://127.0.0.1:1/x")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v; want the dial's deadline", err)
	}
}

// Bad values in Config are refused, naming the field.
func TestConfigValidation(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{DialTimeout: -1}, "dial timeout"},
		{Config{IdleTimeout: -1}, "idle timeout"},
		{Config{MaxIdlePerHost: -1}, "max idle per host"},
		{Config{MaxResponseHeaderBytes: -1}, "response header limit"},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v; want an error naming %s", c.cfg, err, c.want)
		}
	}
}
