// Package memnet is an in-memory HTTP network for tests: a RoundTripper that
// serves requests with http.Handlers keyed by host, without sockets, so that
// timing logic can run inside a testing/synctest bubble (where loopback
// sockets would hang) and be checked to the nanosecond.
package memnet

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Transport serves each request with the handler registered for its host.
// Like a real network, RoundTrip returns as soon as the request's context is
// done, while the handler goroutine goes on working until it returns: a
// cancelled request does not prove saved computation.
type Transport struct {
	mu    sync.Mutex
	hosts map[string]http.Handler
	// busy counts handlers running, under mu; idle is signalled when it
	// drops to zero. Not a WaitGroup: a RoundTrip in a goroutine of its
	// own (a detached hedge primary) may start a handler with nothing
	// ordering it before a Wait that, in virtual time, surely comes after.
	busy int
	idle *sync.Cond
}

// Handle registers h for host ("a:80", as in a URL).
func (t *Transport) Handle(host string, h http.Handler) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hosts == nil {
		t.hosts = make(map[string]http.Handler)
	}
	t.hosts[host] = h
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	h := t.hosts[req.URL.Host]
	t.mu.Unlock()
	if req.Body != nil {
		defer req.Body.Close()
	}
	if h == nil {
		return nil, fmt.Errorf("memnet: no host %q", req.URL.Host)
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// What a server would see: a request of its own, parsed from the
	// bytes the client wrote (so that it never reads the client's after
	// the client has moved on), its Host from the URL unless set.
	req = req.Clone(ctx)
	if req.Host == "" {
		req.Host = req.URL.Host
	}
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	t.mu.Lock()
	t.busy++
	t.mu.Unlock()
	go func() {
		defer t.handlerDone()
		defer close(done)
		h.ServeHTTP(rec, req)
	}()
	select {
	case <-done:
		resp := rec.Result()
		resp.Request = req
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (t *Transport) handlerDone() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy--; t.busy == 0 && t.idle != nil {
		t.idle.Broadcast()
	}
}

// Wait blocks until every handler started so far has returned.
func (t *Transport) Wait() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle == nil {
		t.idle = sync.NewCond(&t.mu)
	}
	for t.busy > 0 {
		t.idle.Wait()
	}
}

// Sleep waits for d or until ctx is done, whichever comes first, and
// reports whether the full d elapsed.
func Sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
