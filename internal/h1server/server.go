package h1server

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.x connections to Handler. Set its fields before
// Serve; they are read, not changed, while it serves. Its methods are
// safe for concurrent use.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds the time from a request's first byte to the
	// end of its header block. Zero: no limit.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the time from a request's first byte to the end
	// of its body. Zero: no limit.
	ReadTimeout time.Duration
	// WriteTimeout bounds the writing of an answer, from the end of its
	// request's header. Zero: no limit.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept
	// connection. Zero: ReadTimeout; both zero: no limit.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request line and header block (net/http's
	// 4 KiB of slack added). Zero: http.DefaultMaxHeaderBytes (1 MiB).
	MaxHeaderBytes int
	// WatchAfter is how long a request without a body runs before its
	// connection is read in the background to notice a client that goes
	// away (which cancels the request's context). Zero: DefaultWatchAfter;
	// negative: from the start of every request, as net/http.
	WatchAfter time.Duration
	// ConnState, if set, is told each connection's state changes, as
	// http.Server.ConnState is (no StateHijacked).
	ConnState func(net.Conn, http.ConnState)
	// ErrorLog receives handler panics other than http.ErrAbortHandler
	// and accept errors retried. Nil: the log package's standard logger.
	ErrorLog *log.Logger

	mu        sync.Mutex
	listeners map[*net.Listener]struct{}
	conns     map[*conn]struct{}
	closing   bool // Shutdown or Close called
	wg        sync.WaitGroup

	noKeepAlives atomic.Bool
	closed       atomic.Bool // closing, read without the lock on each request
	aborted      atomic.Bool // Close called: requests starting are cancelled
}

// DefaultWatchAfter is the default Server.WatchAfter: well above a
// proxied hop to a fast backend, which then costs no background read,
// and short enough that a client gone is noticed before a hedge fires.
const DefaultWatchAfter = 5 * time.Millisecond

// ErrServerClosed is returned by Serve after Shutdown or Close: it is
// net/http's, so that callers test one error whichever server they run.
var ErrServerClosed = http.ErrServerClosed

// Serve accepts connections on ln and serves each in its own goroutine
// until Shutdown or Close; it closes ln. It returns ErrServerClosed after
// those, else the listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.init()
	s.listeners[&ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, &ln)
		s.mu.Unlock()
		ln.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logf("h1server: Accept error: %v; retrying in %v", err, backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := newConn(s, nc)
		if !s.track(c) {
			nc.Close()
			return ErrServerClosed
		}
		s.setState(nc, http.StateNew)
		go c.serve()
	}
}

// isTemporary matches the accept errors net/http retries (EMFILE and
// the like report Temporary, deprecated but still the signal).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (s *Server) isClosing() bool { return s.closed.Load() }

// track records c as open, unless the server is closing.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// SetKeepAlivesEnabled(false) closes the idle connections, and each other
// after its current request, telling its client so (Connection: close),
// as net/http does.
func (s *Server) SetKeepAlivesEnabled(v bool) {
	s.noKeepAlives.Store(!v)
	if !v {
		s.closeIdle()
	}
}

// closeIdle closes the connections waiting for a request, and returns how
// many are open.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.closeIfIdle()
	}
	return len(s.conns)
}

func (s *Server) keepAlives() bool { return !s.noKeepAlives.Load() && !s.isClosing() }

// Shutdown stops accepting, closes idle connections, and waits for the
// others to finish their request (each closes after it), or for ctx to
// end: then it returns ctx's error and leaves the rest open (call Close).
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClose()
	for {
		if s.closeIdle() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(shutdownPoll):
		}
	}
}

// shutdownPoll is how often Shutdown looks for connections turned idle
// (net/http polls too, from 1 ms up to 500 ms).
const shutdownPoll = 10 * time.Millisecond

// Close closes the listeners and every connection at once, cancels the
// contexts of the requests in flight (as their clients' leaving would;
// a request with a body is not watched), and waits for their goroutines
// to end.
func (s *Server) Close() error {
	s.beginClose()
	s.aborted.Store(true)
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
		c.mu.Lock()
		if c.reqCtx != nil {
			c.reqCtx.Cancel()
		}
		c.mu.Unlock()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// beginClose marks the server closing and closes its listeners.
func (s *Server) beginClose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.closing = true
	s.closed.Store(true)
	for ln := range s.listeners {
		(*ln).Close()
	}
}

// init makes s's maps, once; s.mu held.
func (s *Server) init() {
	if s.listeners == nil {
		s.listeners = map[*net.Listener]struct{}{}
		s.conns = map[*conn]struct{}{}
	}
}

func (s *Server) setState(nc net.Conn, st http.ConnState) {
	if s.ConnState != nil {
		s.ConnState(nc, st)
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

func (s *Server) maxHeaderBytes() int64 {
	n := s.MaxHeaderBytes
	if n <= 0 {
		n = http.DefaultMaxHeaderBytes
	}
	return int64(n) + 4096 // net/http's slack (bufio's size)
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout != 0 {
		return s.IdleTimeout
	}
	return s.ReadTimeout
}

func (s *Server) readHeaderTimeout() time.Duration {
	if s.ReadHeaderTimeout != 0 {
		return s.ReadHeaderTimeout
	}
	return s.ReadTimeout
}

func (s *Server) watchAfter() time.Duration {
	switch {
	case s.WatchAfter == 0:
		return DefaultWatchAfter
	case s.WatchAfter < 0:
		return 0
	}
	return s.WatchAfter
}

// Like returns a Server of h with s's settings: its time limits, header
// limit, ConnState and ErrorLog (s's handler, TLS and HTTP/2 settings are
// not its to take). A proxy builds its net/http server in one place (the
// gateway's Server, the home of those settings) and serves plain-HTTP/1.1
// clients with this one on the same terms. h serves OPTIONS * itself:
// h1server has no handler of its own for it.
func Like(s *http.Server, h http.Handler) *Server {
	return &Server{
		Handler:           h,
		ReadHeaderTimeout: s.ReadHeaderTimeout,
		ReadTimeout:       s.ReadTimeout,
		WriteTimeout:      s.WriteTimeout,
		IdleTimeout:       s.IdleTimeout,
		MaxHeaderBytes:    s.MaxHeaderBytes,
		ConnState:         s.ConnState,
		ErrorLog:          s.ErrorLog,
	}
}
