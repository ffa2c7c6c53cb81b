package h1

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
)

// A pooled connection carries a new request only if nothing has arrived
// on it since its last answer was framed: HTTP/1.1 has no way to tell
// which request a response answers but its order, so bytes that come
// unasked (a second response after the answer, a body on a HEAD, 204 or
// 304 answer, bytes past a Content-Length, a response sent as the
// connection opens) would be read as the answer to the next request,
// another client's. No goroutine reads an idle connection here (net/http
// runs one per connection for this), so a connection is looked at when
// it is released (the bytes already buffered) and when it is taken from
// the pool (one read that does not wait), and closed on any byte.
//
// What the look cannot see is a byte that is not there yet: a stray that
// arrives while the next request is being written is read as its answer,
// by any HTTP/1.1 client (docs/gateway.md). The pool narrows that window
// for a backend once it has been seen to send strays: its connections
// are not reused for a while (each request gets a new connection, which
// can carry nothing from an earlier answer); and for one seen to send
// bytes as a connection opens, each new connection waits a moment for
// them before its first request (see settleTimeout).

// ErrUnsolicited is wrapped by the error of a request that found no
// connection to its backend free of bytes nobody asked for: a new one
// received some before its first request was written.
var ErrUnsolicited = errors.New("h1: the backend sent bytes nobody asked for")

// Unsolicited is what Config.OnUnsolicited is told: a connection closed
// because its backend sent bytes nobody asked for.
type Unsolicited struct {
	// Host is the host of the requests' URLs (the pool's key).
	Host string
	// OnOpen says the bytes came on a new connection before its first
	// request (a server that greets, or answers before it is asked);
	// else they came after an answer's end (a second response, a body
	// on a HEAD, 204 or 304 answer, bytes past a Content-Length, a
	// response to nothing on an idle connection).
	OnOpen bool
}

// settleTimeout is how long a new connection waits for bytes nobody
// asked for before its first request, when its backend is not yet known
// to send none (the first connection to each address) or has sent some
// as a connection opened (for suspectFor since). A server greets once it
// has accepted the connection: on loopback 30-60µs after the dial
// returns at the median, 0.4 ms at the 99.9th percentile, 14 ms at most
// on a busy machine (2,000 dials, under -race too).
const settleTimeout = 50 * time.Millisecond

// suspectFor is how long a backend is treated as one that sends stray
// bytes after its last was seen.
const suspectFor = time.Minute

// lookState is what a look at a connection that waits for a request
// finds.
type lookState uint8

const (
	lookEmpty lookState = iota // nothing has arrived
	lookBytes                  // bytes nobody asked for
	lookGone                   // the server closed it, reset it, or said 408 as it closed it
)

// look reports what has arrived on c, without waiting: over a socket,
// one recv that peeks and does not block, through the runtime's poller
// (syscall.RawConn), so that Go's own reads of c are undisturbed.
func (c *conn) look() lookState {
	if c.raw == nil {
		if b, ok := c.nc.(interface{ Buffered() (int, error) }); ok {
			// An in-memory connection (internal/memnet's Pipe) that can
			// say what it holds.
			switch n, err := b.Buffered(); {
			case n > 0:
				return lookBytes
			case err != nil:
				return lookGone
			}
			return lookEmpty
		}
		// Another connection (net.Pipe, a wrapper): a read with a
		// deadline just ahead, which returns what a writer has ready.
		return c.wait(nil, lookFallback)
	}
	if err := c.raw.Read(c.lookFn); err != nil {
		return lookGone
	}
	switch {
	case c.lookErr == syscall.EAGAIN || c.lookErr == syscall.EWOULDBLOCK:
		return lookEmpty
	case c.lookErr != nil || c.lookN == 0:
		return lookGone // reset; or EOF, the server's idle timeout
	case is408(c.lookBuf[:c.lookN]):
		return lookGone
	}
	return lookBytes
}

// lookFallback is how long look waits on a connection that is not a
// socket.
const lookFallback = time.Microsecond

// wait waits up to d for bytes on c, or for ctx (nil: none) to end. The
// bytes are consumed: c is closed when there are any.
func (c *conn) wait(ctx context.Context, d time.Duration) lookState {
	if err := c.nc.SetReadDeadline(time.Now().Add(d)); err != nil {
		return lookGone
	}
	stop := func() bool { return true }
	if ctx != nil {
		stop = context.AfterFunc(ctx, func() { c.nc.SetReadDeadline(time.Unix(1, 0)) })
	}
	n, err := c.nc.Read(c.lookBuf[:])
	if !stop() {
		return lookGone // the caller sees ctx done
	}
	switch {
	case n > 0:
		if is408(c.lookBuf[:n]) {
			return lookGone
		}
		return lookBytes
	case errors.Is(err, os.ErrDeadlineExceeded):
		if c.nc.SetReadDeadline(time.Time{}) != nil {
			return lookGone
		}
		return lookEmpty
	}
	return lookGone
}

// is408 reports whether b starts a 408 answer: a server's word that it
// closes an idle connection (nginx sends none, some servers do), which
// net/http does not count as unsolicited either (golang.org/issue/32310).
func is408(b []byte) bool {
	const prefix = "HTTP/1.x 408"
	return len(b) >= len(prefix) && string(b[:7]) == "HTTP/1." && string(b[8:12]) == " 408"
}

// checkNew looks at c, just dialled, before its first request: without
// waiting, or for settleTimeout when its backend is not known to send
// nothing as a connection opens (see hostPool.settle). Its error means
// c is of no use and must be closed.
func (c *conn) checkNew(ctx context.Context) error {
	p := c.pool
	d := p.settle(time.Now())
	var st lookState
	if d > 0 {
		st = c.wait(ctx, d)
	} else {
		st = c.look()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("h1: request canceled: %w", context.Cause(ctx))
	}
	switch st {
	case lookBytes:
		p.unsolicited(true)
		return fmt.Errorf("h1: %s sent bytes before any request on a new connection: %w", p.addr, ErrUnsolicited)
	case lookGone:
		return fmt.Errorf("h1: server closed the connection before answering: %w", io.EOF)
	}
	if d > 0 {
		p.settled()
	}
	return nil
}

// leavesBytes reports whether resp's framing announces a body that its
// status has none of: a 204 with a Content-Length other than 0, or a
// Transfer-Encoding (RFC 9110 §8.6, RFC 9112 §6.1 forbid both). Its
// bytes would follow the answer: its connection is not reused. (A HEAD
// answer and a 304 may carry both, saying what a GET would get.)
func leavesBytes(resp *http.Response) bool {
	if resp.StatusCode != http.StatusNoContent {
		return false
	}
	return len(resp.TransferEncoding) > 0 || announcesBody(resp.Header)
}

// announcesBody reports whether h has a Content-Length other than 0.
func announcesBody(h http.Header) bool {
	for _, v := range h["Content-Length"] {
		if strings.TrimSpace(v) != "0" {
			return true
		}
	}
	return false
}

// settle returns how long a connection to p's backend, just dialled,
// waits for bytes before its first request: settleTimeout until one has
// waited that long and got none, and for suspectFor after one got some;
// else 0.
func (p *hostPool) settle(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.proven || now.Before(p.greetUntil) {
		return settleTimeout
	}
	return 0
}

// settled records that a connection waited settleTimeout and got no
// byte.
func (p *hostPool) settled() {
	p.mu.Lock()
	p.proven = true
	p.mu.Unlock()
}

// unsolicited records that a connection to p's backend got bytes nobody
// asked for, and closed: before its first request (onOpen), after which
// new connections wait before their first (see settle); or after an
// answer, after which connections are not reused and the idle ones are
// closed, for suspectFor. It tells Config.OnUnsolicited.
func (p *hostPool) unsolicited(onOpen bool) {
	until := time.Now().Add(suspectFor)
	p.mu.Lock()
	if onOpen {
		p.greetUntil = until
	} else {
		p.strayUntil = until
		for _, c := range p.idle {
			c.close()
		}
		clear(p.idle)
		p.idle = p.idle[:0]
	}
	p.mu.Unlock()
	if f := p.t.onUnsolicited; f != nil {
		f(Unsolicited{Host: p.host, OnOpen: onOpen})
	}
}
