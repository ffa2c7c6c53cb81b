package h1

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Defaults of a Config.
const (
	DefaultDialTimeout            = 2 * time.Second
	DefaultIdleTimeout            = 90 * time.Second // net/http's DefaultTransport's
	DefaultMaxIdlePerHost         = 64
	DefaultMaxResponseHeaderBytes = 64 << 10
)

// Config configures a Transport. The zero value is usable: every request
// it does not send itself fails (no Fallback).
type Config struct {
	// Fallback sends the requests the Transport does not (see Transport):
	// an *http.Transport, say, for https:// and requests with a body.
	// Nil fails them with ErrNotHandled.
	Fallback http.RoundTripper

	// DialContext dials a backend's TCP connection. Nil means a
	// net.Dialer with a 30s TCP keep-alive.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// DialTimeout bounds each dial. Default DefaultDialTimeout (2s).
	DialTimeout time.Duration

	// IdleTimeout is how long a connection may stay idle in the pool
	// before it is closed. Default DefaultIdleTimeout (90s).
	IdleTimeout time.Duration

	// MaxIdlePerHost bounds the idle connections kept per backend
	// address; a connection released beyond it is closed. Default
	// DefaultMaxIdlePerHost (64).
	MaxIdlePerHost int

	// MaxResponseHeaderBytes bounds the bytes read for a response's
	// header block, any 1xx answers before it included; past it the
	// request fails (the error says "server response headers exceeded")
	// and the connection is closed. Default DefaultMaxResponseHeaderBytes
	// (64 KiB).
	MaxResponseHeaderBytes int64

	// OnUnsolicited, if set, is told of each connection closed because
	// its backend sent bytes nobody asked for, from the goroutine that
	// saw them (a request's, or a replacement dial's): it must not block.
	// Nil: nobody is told.
	OnUnsolicited func(Unsolicited)
}

// ErrNotHandled is RoundTrip's error for a request the Transport does not
// send itself when it has no Fallback.
var ErrNotHandled = errors.New("h1: request not handled (https, a body or an upgrade) and no fallback")

// Transport is an http.RoundTripper over HTTP/1.1 for plain-HTTP backends.
// Safe for concurrent use.
type Transport struct {
	fallback    http.RoundTripper
	dialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	dialTimeout time.Duration
	idleTimeout time.Duration
	maxIdle     int
	maxHeader   int64
	// onUnsolicited is Config.OnUnsolicited.
	onUnsolicited func(Unsolicited)
	hosts         sync.Map // URL.Host -> *hostPool
}

// New validates cfg and returns a Transport.
func New(cfg Config) (*Transport, error) {
	t := &Transport{
		fallback:    cfg.Fallback,
		dialContext: cfg.DialContext,
		dialTimeout: cfg.DialTimeout,
		idleTimeout: cfg.IdleTimeout,
		maxIdle:     cfg.MaxIdlePerHost,
		maxHeader:   cfg.MaxResponseHeaderBytes,

		onUnsolicited: cfg.OnUnsolicited,
	}
	switch {
	case t.dialTimeout < 0:
		return nil, fmt.Errorf("h1: negative dial timeout %v", t.dialTimeout)
	case t.idleTimeout < 0:
		return nil, fmt.Errorf("h1: negative idle timeout %v", t.idleTimeout)
	case t.maxIdle < 0:
		return nil, fmt.Errorf("h1: negative max idle per host %d", t.maxIdle)
	case t.maxHeader < 0:
		return nil, fmt.Errorf("h1: negative response header limit %d", t.maxHeader)
	}
	if t.dialContext == nil {
		t.dialContext = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	if t.dialTimeout == 0 {
		t.dialTimeout = DefaultDialTimeout
	}
	if t.idleTimeout == 0 {
		t.idleTimeout = DefaultIdleTimeout
	}
	if t.maxIdle == 0 {
		t.maxIdle = DefaultMaxIdlePerHost
	}
	if t.maxHeader == 0 {
		t.maxHeader = DefaultMaxResponseHeaderBytes
	}
	return t, nil
}

// handles reports whether the Transport sends req itself: http://, no
// body, no upgrade, not CONNECT, an ASCII host (net/http's would be sent
// in Punycode).
func handles(req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" || !ascii(req.URL.Host) || !ascii(req.Host) {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody || req.ContentLength != 0 || len(req.TransferEncoding) > 0 || len(req.Trailer) > 0 {
		return false
	}
	if req.Method == http.MethodConnect || len(req.Header["Upgrade"]) > 0 || hasToken(req.Header["Connection"], "upgrade") {
		return false
	}
	return true
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !handles(req) {
		if t.fallback == nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, ErrNotHandled
		}
		return t.fallback.RoundTrip(req)
	}
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("h1: request canceled: %w", context.Cause(ctx))
	}
	p := t.pool(req.URL.Host)
	c, err := p.get(ctx, false)
	if err != nil {
		return nil, err
	}
	pooled := c.pooled
	resp, err := c.roundTrip(ctx, req, t.maxHeader)
	if err == nil || !pooled || c.cr.n > 0 || ctx.Err() != nil || !replayable(req) {
		return resp, err
	}
	// The server closed the idle connection as it was taken (its idle
	// timeout, a restart), before any byte of an answer: as net/http, an
	// idempotent request is sent again, once, on a new connection, which
	// cannot have been closed for idleness.
	if c, err = p.get(ctx, true); err != nil {
		return nil, err
	}
	return c.roundTrip(ctx, req, t.maxHeader)
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// replayable reports whether req may be sent twice (net/http's rule).
func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// pool returns the pool of host (a URL's host, the port perhaps
// missing).
func (t *Transport) pool(host string) *hostPool {
	if p, ok := t.hosts.Load(host); ok {
		return p.(*hostPool)
	}
	addr := host
	if h, port, err := net.SplitHostPort(host); err != nil || port == "" {
		addr = net.JoinHostPort(strings.Trim(host, "[]"), "80")
	} else {
		addr = net.JoinHostPort(h, port)
	}
	p, _ := t.hosts.LoadOrStore(host, &hostPool{t: t, host: host, addr: addr})
	return p.(*hostPool)
}

// Prove has a connection to host (a URL's host) dialled in the
// background and checked as a new connection to a backend not yet known
// to send nothing as connections open is (it waits settleTimeout for
// bytes nobody asked for), then kept idle: so that the first requests to
// a backend do not each wait for that check, call it when the backend
// becomes known. It does nothing when the backend is proven already, a
// connection to it is being dialled for the pool, or its idle connections
// are closed (CloseIdleConnections) by the time the check ends.
func (t *Transport) Prove(host string) {
	p := t.pool(host)
	p.mu.Lock()
	proven := p.proven
	p.mu.Unlock()
	if !proven {
		go p.replace()
	}
}

// CloseIdleConnections closes the idle connections, the Fallback's too.
// Connections in use go back to the pool when their responses end; one
// closed by a cancellation is not replaced until the next request.
func (t *Transport) CloseIdleConnections() {
	t.hosts.Range(func(_, p any) bool {
		p.(*hostPool).closeIdle()
		return true
	})
	if c, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
