package h1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// rawServer is a backend on a loopback listener that writes whatever
// bytes its serve function does, one goroutine per connection, and
// reports the connections it saw open and closed.
type rawServer struct {
	URL   string
	ln    net.Listener
	serve func(c net.Conn, br *bufio.Reader)

	accepted atomic.Int32
	closed   chan struct{} // one token per connection the client closed (or whose serve returned)

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newRawServer(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{URL: "http://" + ln.Addr().String(), ln: ln, serve: serve, closed: make(chan struct{}, 1024), conns: map[net.Conn]bool{}}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns[c] = true
			s.mu.Unlock()
			s.wg.Go(func() {
				s.serve(c, bufio.NewReader(c))
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				s.closed <- struct{}{}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// waitClosed waits for n connections to end, or fails.
func (s *rawServer) waitClosed(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-s.closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d connections closed after 5s", i, n)
		}
	}
}

// open returns how many connections are open at the server.
func (s *rawServer) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// answer returns a serve function that answers every request on a
// connection with resp, until the client closes it.
func answer(resp string) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	}
}

// untilClosed reads c until the client closes it (or 5s pass).
func untilClosed(c net.Conn, br *bufio.Reader) {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, br)
}

func newTransport(t *testing.T, cfg Config) *Transport {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// get sends a GET for path with ctx and returns the response.
func get(ctx context.Context, tr http.RoundTripper, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return tr.RoundTrip(req)
}

// readAll sends a GET and reads its body in full.
func readAll(t *testing.T, tr http.RoundTripper, url string) (int, string) {
	t.Helper()
	resp, err := get(context.Background(), tr, url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
