package memnet

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Pipe returns the two ends of an in-memory connection that behaves as a
// socket where net.Pipe does not: a write never waits for a read (bytes
// wait for the reader, as in a socket's buffer), and Buffered tells what
// has arrived without waiting, so that a client can look at an idle
// connection inside a testing/synctest bubble. Read deadlines are kept;
// write deadlines are accepted and have nothing to bound.
func Pipe() (*Conn, *Conn) {
	var mu sync.Mutex
	a := &Conn{mu: &mu, wake: make(chan struct{}, 1)}
	b := &Conn{mu: &mu, wake: make(chan struct{}, 1), peer: a}
	a.peer = b
	return a, b
}

// Conn is one end of a Pipe.
type Conn struct {
	mu   *sync.Mutex // both ends'
	peer *Conn
	wake chan struct{} // a token when bytes arrive, either end closes, or the read deadline moves

	// Under mu.
	in       []byte // bytes written by the peer, not yet read
	closed   bool   // Close was called on this end
	deadline time.Time
}

// Buffered returns how many bytes have arrived and wait to be read;
// with none, io.EOF once the peer has closed, net.ErrClosed once this
// end has.
func (c *Conn) Buffered() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return 0, net.ErrClosed
	case len(c.in) > 0:
		return len(c.in), nil
	case c.peer.closed:
		return 0, io.EOF
	}
	return 0, nil
}

func (c *Conn) Read(p []byte) (int, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return 0, net.ErrClosed
		case len(c.in) > 0:
			n := copy(p, c.in)
			c.in = c.in[n:]
			c.mu.Unlock()
			return n, nil
		case c.peer.closed:
			c.mu.Unlock()
			return 0, io.EOF
		}
		deadline := c.deadline
		c.mu.Unlock()
		if deadline.IsZero() {
			<-c.wake
			continue
		}
		d := time.Until(deadline)
		if d <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		select {
		case <-c.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return 0, net.ErrClosed
	case c.peer.closed:
		return 0, io.ErrClosedPipe
	}
	c.peer.in = append(c.peer.in, p...)
	c.peer.signal()
	return len(p), nil
}

// Close closes this end: its reads and writes fail, and the peer reads
// what was written before, then io.EOF.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.closed = true
	c.in = nil
	c.signal()
	c.peer.signal()
	return nil
}

// signal wakes a read waiting on c. Under mu.
func (c *Conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Conn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.deadline = t
	c.signal()
	return nil
}

func (c *Conn) SetWriteDeadline(time.Time) error { return nil }

func (c *Conn) LocalAddr() net.Addr  { return pipeAddr{} }
func (c *Conn) RemoteAddr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "memnet" }
func (pipeAddr) String() string  { return "memnet" }
