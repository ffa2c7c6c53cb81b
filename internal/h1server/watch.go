package h1server

import (
	"time"

	"github.com/tailgate-dev/tailgate/internal/opctx"
)

// The watch on a client while its request runs. net/http reads each
// connection in the background for every request, to cancel the
// request's context when the client goes away: a goroutine, and a read
// system call that finds nothing, per request. Here the read starts only
// when the handler has run for WatchAfter (a timer per connection, reset
// per request), so that a request answered sooner costs neither.

// bgState is where the background read of the current request is.
type bgState uint8

const (
	bgIdle    bgState = iota // no read started for this request
	bgReading                // the timer fired: a read is, or is about to be, under way
	bgDone                   // the read returned
)

// startWatch arms the watch of a request whose context is ctx.
func (c *conn) startWatch(ctx *opctx.Ctx, t0 time.Time) {
	c.mu.Lock()
	c.reqCtx, c.bg, c.stopping = ctx, bgIdle, false
	c.mu.Unlock()
	d := c.s.watchAfter()
	if d == 0 {
		c.watch.Reset(0)
		return
	}
	c.watch.Reset(d)
}

// backgroundRead runs when a request has run for WatchAfter: it reads the
// connection until the request ends (stopWatch cuts it short) or the
// client goes away, which cancels the request. A byte read (the next
// pipelined request's first) is kept for the request reader.
func (c *conn) backgroundRead() {
	c.mu.Lock()
	if c.stopping {
		c.bg = bgDone
		c.cond.Broadcast()
		c.mu.Unlock()
		return
	}
	c.bg = bgReading
	// As net/http: the whole request's time, for this read too; none
	// without ReadTimeout (the header's deadline, still set, is past
	// its use: hitting it would pass for the client's leaving).
	var end time.Time
	if d := c.s.ReadTimeout; d > 0 {
		end = time.Now().Add(d)
	}
	c.nc.SetReadDeadline(end)
	c.mu.Unlock()
	var n int
	var err error
	if c.br.Buffered() == 0 && !c.cr.hasByte {
		n, err = c.nc.Read(c.cr.one[:])
	} // else the next request is already here: the client has not gone
	c.mu.Lock()
	if n == 1 {
		c.cr.hasByte = true
	}
	if err != nil && !c.stopping {
		c.reqCtx.Cancel() // the client went away (or stalled past ReadTimeout)
	}
	c.bg = bgDone
	c.cond.Broadcast()
	c.mu.Unlock()
}

// stopWatch ends the watch of the request whose handler returned, and
// waits for a background read to give the connection back.
func (c *conn) stopWatch() {
	if c.watch.Stop() {
		return // it never fired: no read was made
	}
	c.mu.Lock()
	c.stopping = true
	if c.bg == bgReading {
		c.nc.SetReadDeadline(aLongTimeAgo)
	}
	for c.bg != bgDone {
		c.cond.Wait()
	}
	c.bg = bgIdle
	c.mu.Unlock()
}

var aLongTimeAgo = time.Unix(1, 0)
