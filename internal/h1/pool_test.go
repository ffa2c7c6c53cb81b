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
)

// pipeBackend serves connections made with net.Pipe, in a synctest
// bubble: each answers every request with okResp until the client closes
// it. It counts the connections dialled and those the client closed.
type pipeBackend struct {
	dialled, closed atomic.Int32
	wg              sync.WaitGroup
}

func (b *pipeBackend) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	b.dialled.Add(1)
	b.wg.Go(func() {
		answer(okResp)(server, bufio.NewReader(server))
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
