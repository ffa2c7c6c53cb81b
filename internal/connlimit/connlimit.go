// Package connlimit bounds the connections a listener holds open at once,
// so that the memory they cost (about 22 KiB each for an idle HTTP/1.1
// keep-alive connection in net/http: two 4 KiB bufio buffers, the
// connection's state and its goroutine's 8 KiB stack) has a ceiling, whatever
// clients do.
//
// At the limit a new connection takes the place of the connection that has
// been idle between requests the longest, which is closed; only when no
// connection is idle is the new one refused, closed at once. See Listener.
package connlimit

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/tailgate-dev/tailgate/internal/fifo"
)

// Listener is a net.Listener that keeps at most a fixed number of accepted
// connections open. Its methods are safe for concurrent use.
//
// Over the limit, a connection is not left waiting in the kernel's accept
// queue, as HAProxy's maxconn or golang.org/x/net/netutil.LimitListener
// would leave it: a reverse proxy facing the internet is most often full
// because some clients hold connections without using them, and a queue
// behind those gives the next client a connection that answers nothing
// until its own timeout, while the queue fills and the kernel starts
// dropping handshakes. Instead, as nginx does when worker_connections run
// out, the listener first closes the longest-idle keep-alive connection
// (its client has no request outstanding and reconnects when it needs to;
// HTTP clients retry an idempotent request that meets a closed keep-alive
// connection) and gives its place to the newcomer. If no connection is
// idle, every one is in the middle of a request, or of sending its headers,
// which the server's timeouts bound; the newcomer is refused promptly with a
// reset, so that its client fails fast and can try elsewhere, and so that
// a flood of refused connections leaves no TIME_WAIT state behind here.
//
// For the listener to know which connections are idle, the http.Server
// serving it must report connection states to ConnState.
type Listener struct {
	net.Listener
	max int

	mu   sync.Mutex
	open int                    // connections holding a slot
	peak int                    // most open since TakePeak
	idle fifo.List[conn, *conn] // idle connections, longest idle first

	refused   atomic.Int64
	reclaimed atomic.Int64
}

// New returns a Listener accepting from ln that keeps at most max
// connections open; max must be at least 1.
func New(ln net.Listener, max int) *Listener {
	if max < 1 {
		panic("connlimit: max must be at least 1")
	}
	return &Listener{Listener: ln, max: max}
}

// Accept waits for a connection that may be kept and returns it. A
// connection over the limit either displaces the longest-idle one or is
// closed; Accept then waits for the next. Errors are the wrapped
// listener's.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.peak = max(l.peak, l.open)
			l.mu.Unlock()
			return &conn{Conn: nc, l: l}, nil
		}
		victim := l.idle.Pop()
		if victim != nil {
			victim.done = true // its slot passes to nc
		}
		l.mu.Unlock()
		if victim != nil {
			l.reclaimed.Add(1)
			victim.Conn.Close() // the server's read fails; it closes through conn.Close, a no-op for the slot
			return &conn{Conn: nc, l: l}, nil
		}
		l.refused.Add(1)
		if tc, ok := nc.(interface{ SetLinger(int) error }); ok {
			tc.SetLinger(0) // a reset, not a FIN: no TIME_WAIT for a refused connection
		}
		nc.Close()
	}
}

// ConnState records the states an http.Server reports for the connections
// it took from l: set it as the server's ConnState (or call it from
// there). Connections from elsewhere are ignored. A connection the server
// got through a TLS listener over l (a *tls.Conn) counts as the one it
// wraps.
func (l *Listener) ConnState(nc net.Conn, s http.ConnState) {
	if w, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = w.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.done {
		return // closed or displaced: it holds no slot to give up
	}
	switch {
	case s == http.StateIdle && !c.links.In():
		l.idle.Push(c)
	case s != http.StateIdle && c.links.In():
		l.idle.Remove(c)
	}
}

// Stats is a Listener's limit, use and counts so far.
type Stats struct {
	Max  int // the limit
	Open int // connections open now
	Idle int // of which idle between requests (as the server reports)
	// Refused counts connections closed at once for want of a slot.
	Refused int64
	// Reclaimed counts idle connections closed to make room for a new one.
	Reclaimed int64
}

// Stats returns l's current figures.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Max: l.max, Open: l.open, Idle: l.idle.Len(), Refused: l.refused.Load(), Reclaimed: l.reclaimed.Load()}
}

// TakePeak returns the most connections that were open at once since the
// previous call (or since New), and starts the next period at the number
// open now. It tells a poller of a wave of connections that came and went
// between two polls.
func (l *Listener) TakePeak() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.peak
	l.peak = l.open
	return p
}

// release gives up c's slot, once.
func (l *Listener) release(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	if c.links.In() {
		l.idle.Remove(c)
	}
	l.open--
}

// conn is an accepted connection holding one of the listener's slots until
// it is closed.
type conn struct {
	net.Conn
	l     *Listener
	links fifo.Links[conn] // in l.idle while idle; guarded by l.mu
	done  bool             // slot given up or handed over; guarded by l.mu
}

func (c *conn) Links() *fifo.Links[conn] { return &c.links }

// Close closes the connection and frees its slot.
func (c *conn) Close() error {
	c.l.release(c)
	return c.Conn.Close()
}
