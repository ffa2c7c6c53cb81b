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
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/internal/memnet"
)

// pipeBackend serves connections made with memnet.Pipe, in a synctest
// bubble: each runs serve (nil: answers every request with okResp until
// the client closes it). It counts the connections dialled and those the
// client closed.
type pipeBackend struct {
	serve           func(c net.Conn, br *bufio.Reader)
	dialled, closed atomic.Int32
	wg              sync.WaitGroup
}

func (b *pipeBackend) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := memnet.Pipe()
	b.dialled.Add(1)
	serve := b.serve
	if serve == nil {
		serve = answer(okResp)
	}
	b.wg.Go(func() {
		serve(server, bufio.NewReader(server))
		server.Close()
		b.closed.Add(1)
	})
	return client, nil
}

// Idle connections are closed once idle for IdleTimeout, by the reaper
// when no request comes, and not before.
func TestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &pipeBackend{}
		tr, err := New(Config{DialContext: b.dial, IdleTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		// Two connections at once: two idle afterwards.
		var wg sync.WaitGroup
		resps := make(chan *http.Response, 2)
		for range 2 {
			wg.Go(func() {
				resp, err := get(context.Background(), tr, "http://backend:80/x")
				if err != nil {
					t.Error(err)
					return
				}
				resps <- resp
			})
		}
		wg.Wait()
		close(resps)
		for resp := range resps {
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if n := b.closed.Load(); n != 0 {
			t.Fatalf("%d connections closed after 29s idle; want none before 30s", n)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := b.closed.Load(); n != 2 {
			t.Fatalf("%d connections closed after 31s idle; want 2", n)
		}
		// A request after that dials anew.
		resp, err := get(context.Background(), tr, "http://backend:80/x")
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if n := b.dialled.Load(); n != 3 {
			t.Errorf("%d dials; want 3", n)
		}
		tr.CloseIdleConnections()
		b.wg.Wait()
	})
}

// At most MaxIdlePerHost connections stay idle; the others close as they
// are released.
func TestMaxIdlePerHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &pipeBackend{}
		tr, err := New(Config{DialContext: b.dial, MaxIdlePerHost: 1})
		if err != nil {
			t.Fatal(err)
		}
		var resps []*http.Response
		for range 3 { // bodies unread: each holds its connection
			resp, err := get(context.Background(), tr, "http://backend/x")
			if err != nil {
				t.Fatal(err)
			}
			resps = append(resps, resp)
		}
		for _, resp := range resps {
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		synctest.Wait()
		if d, c := b.dialled.Load(), b.closed.Load(); d != 3 || c != 2 {
			t.Fatalf("%d dialled, %d closed; want 3 and 2 (one kept idle)", d, c)
		}
		tr.CloseIdleConnections()
		synctest.Wait()
		if c := b.closed.Load(); c != 3 {
			t.Errorf("%d closed after CloseIdleConnections; want 3", c)
		}
		b.wg.Wait()
	})
}

// hangBackend is a pipeBackend whose connections never answer /hang: the
// request is read (and hung told) and the connection held until the
// client closes it. dialGate, when set, holds each dial until it is
// closed.
type hangBackend struct {
	pipeBackend
	dialGate chan struct{}
	hung     chan struct{}
}

func newHangBackend() *hangBackend { return &hangBackend{hung: make(chan struct{}, 16)} }

func (b *hangBackend) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	if b.dialGate != nil {
		select {
		case <-b.dialGate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	client, server := memnet.Pipe()
	b.dialled.Add(1)
	b.wg.Go(func() {
		br := bufio.NewReader(server)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				break
			}
			if req.URL.Path == "/hang" {
				b.hung <- struct{}{}
				io.Copy(io.Discard, br) // until the client closes
				break
			}
			if _, err := io.WriteString(server, okResp); err != nil {
				break
			}
		}
		server.Close()
		b.closed.Add(1)
	})
	return client, nil
}

// hang sends /hang to b on tr in the background, and returns once b has
// read it and the client waits for the answer: cancel ends it, and done
// gets its error.
func hang(b *hangBackend, tr http.RoundTripper) (cancel context.CancelFunc, done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		_, err := get(ctx, tr, "http://backend/hang")
		errs <- err
	}()
	<-b.hung
	synctest.Wait()
	return cancel, errs
}

// cancelHang sends /hang to b on tr and cancels it once it is waiting for
// the answer: the cancellation closes its connection.
func cancelHang(t *testing.T, b *hangBackend, tr http.RoundTripper) {
	t.Helper()
	cancel, done := hang(b, tr)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled request succeeded")
	}
	synctest.Wait()
}

// A connection closed by a cancellation (a hedge's loser) is replaced in
// the background, so that the next request does not wait on a dial; not
// when MaxIdlePerHost connections are idle already.
func TestCancellationReplacesConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newHangBackend()
		tr, err := New(Config{DialContext: b.dial, MaxIdlePerHost: 1})
		if err != nil {
			t.Fatal(err)
		}
		cancelHang(t, b, tr)
		if d, c := b.dialled.Load(), b.closed.Load(); d != 2 || c != 1 {
			t.Fatalf("after a cancellation: %d dialled, %d closed; want 2 and 1 (one replaced)", d, c)
		}
		// The next request takes the replacement: no dial.
		resp, err := get(context.Background(), tr, "http://backend/x")
		if err != nil {
			t.Fatal(err)
		}
		if d := b.dialled.Load(); d != 2 {
			t.Fatalf("%d dialled after a request that found the replacement idle; want 2", d)
		}
		// With resp's connection held, /hang dials a third; resp's goes
		// back idle, which fills MaxIdlePerHost: the cancellation of /hang
		// replaces nothing.
		cancel, done := hang(b, tr)
		io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		<-done
		synctest.Wait()
		if d, c := b.dialled.Load(), b.closed.Load(); d != 3 || c != 2 {
			t.Fatalf("after a cancellation with MaxIdlePerHost idle: %d dialled, %d closed; want 3 and 2", d, c)
		}
		tr.CloseIdleConnections()
		b.wg.Wait()
	})
}

// A replacement whose dial is still under way when CloseIdleConnections
// runs is closed as it arrives, not kept idle.
func TestReplacementAcrossCloseIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newHangBackend()
		tr, err := New(Config{DialContext: b.dial})
		if err != nil {
			t.Fatal(err)
		}
		// The first connection is dialled at once; then dials wait.
		resp, err := get(context.Background(), tr, "http://backend/x")
		if err != nil {
			t.Fatal(err)
		}
		b.dialGate = make(chan struct{})
		// Hold the idle one, so that the cancellation below finds none idle.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := get(ctx, tr, "http://backend/hang")
			done <- err
		}()
		synctest.Wait() // /hang waits on a dial (the first connection is held by resp)
		close(b.dialGate)
		<-b.hung
		synctest.Wait()
		b.dialGate = make(chan struct{})
		cancel()
		<-done
		synctest.Wait() // the replacement's dial is waiting at the gate
		tr.CloseIdleConnections()
		close(b.dialGate)
		synctest.Wait()
		io.ReadAll(resp.Body)
		resp.Body.Close() // back to the pool: idle
		synctest.Wait()
		if d, c := b.dialled.Load(), b.closed.Load(); d != 3 || c != 2 {
			t.Fatalf("%d dialled, %d closed; want 3 and 2 (the cancelled one and the stale replacement)", d, c)
		}
		tr.CloseIdleConnections()
		b.wg.Wait()
	})
}

// A connection closed because its request's deadline passed is not
// replaced: the backend may hang.
func TestDeadlineDoesNotReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newHangBackend()
		tr, err := New(Config{DialContext: b.dial})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := get(ctx, tr, "http://backend/hang"); err == nil {
			t.Fatal("a request past its deadline succeeded")
		}
		synctest.Wait()
		if d, c := b.dialled.Load(), b.closed.Load(); d != 1 || c != 1 {
			t.Fatalf("after a deadline: %d dialled, %d closed; want 1 and 1 (none replaced)", d, c)
		}
		b.wg.Wait()
	})
}

// A replacement the server closed while it waited in the pool (a header
// timeout on a connection that never carried a request) is retried as a
// reused connection would be: the GET that takes it is sent again, once,
// on a new connection, and succeeds.
func TestReplacementClosedWhileIdleRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newHangBackend()
		var n atomic.Int32
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			if n.Add(1) != 2 {
				return b.dial(ctx, network, addr)
			}
			// The replacement: its server gives up on it before any request.
			client, server := memnet.Pipe()
			server.Close()
			return client, nil
		}
		tr, err := New(Config{DialContext: dial})
		if err != nil {
			t.Fatal(err)
		}
		cancelHang(t, b, tr)
		if n.Load() != 2 {
			t.Fatalf("%d dials after a cancellation; want 2 (the replacement)", n.Load())
		}
		resp, err := get(context.Background(), tr, "http://backend/x")
		if err != nil {
			t.Fatalf("GET on a replacement closed while idle: %v; want it sent again", err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if n.Load() != 3 {
			t.Errorf("%d dials; want 3 (the retry's new one)", n.Load())
		}
		tr.CloseIdleConnections()
		b.wg.Wait()
	})
}

// After CloseIdleConnections (the gateway's Close, once its server has
// stopped), a request still in flight that is cancelled dials no
// replacement: nothing would take it, and it would hold a backend
// connection and the reaper for IdleTimeout. The next request brings
// replacements back.
func TestNoReplacementAfterCloseIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newHangBackend()
		tr, err := New(Config{DialContext: b.dial})
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := hang(b, tr)
		tr.CloseIdleConnections()
		cancel()
		<-done
		synctest.Wait()
		if d, c := b.dialled.Load(), b.closed.Load(); d != 1 || c != 1 {
			t.Fatalf("a cancellation after CloseIdleConnections: %d dialled, %d closed; want 1 and 1 (none replaced)", d, c)
		}
		cancelHang(t, b, tr) // dials one, replaced: the pool is in use again
		if d, c := b.dialled.Load(), b.closed.Load(); d != 3 || c != 2 {
			t.Fatalf("a cancellation after a new request: %d dialled, %d closed; want 3 and 2 (one replaced)", d, c)
		}
		tr.CloseIdleConnections()
		b.wg.Wait()
	})
}
