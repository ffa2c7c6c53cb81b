// Package opctx is a cancellable context.Context for one request or one
// hedged operation, lighter than the context package's chain.
//
// A proxied read used to build four layers of the context package's
// contexts: the client server's WithCancel, the engine's WithTimeout, its
// per-attempt registration and the backend client's AfterFunc. Each layer
// allocates its context, its cancel function and, once a child registers,
// its Done channel and a map of children; a timeout adds its timer. That
// was a third of the gateway's allocations per read and 10% of its CPU
// (docs/performance.md, "Gateway throughput"). A Ctx is one struct that
// can be embedded (the engine's operation holds one), keeps its Done
// channel until asked for it, and takes cancellation watches (Watch) that
// the watcher embeds, so that registering and removing one allocates
// nothing.
//
// A Ctx must only be made over a parent with no cancellation of the
// context package's above it (Usable): context.Cause looks for the
// nearest such context through Value, and over a Ctx it must find none, so
// that it reports the Ctx's own error.
package opctx

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Ctx is a context.Context cancelled by its owner (Cancel), by its parent,
// or at its deadline. The zero Ctx is not usable: Init it.
type Ctx struct {
	parent   context.Context
	deadline time.Time // the earlier of its own and its parent's; zero: none
	own      bool      // the deadline is its own, not its parent's: its timer ends c

	canceled atomic.Bool
	mu       sync.Mutex
	err      error         // set before canceled; read after it
	done     chan struct{} // made when first asked for
	watches  *Watch        // registered, not yet run or removed: a list through next/prev
	timer    *time.Timer   // the own deadline's, once armed
	up       Watch         // its registration on a parent Ctx
	upStop   func() bool   // its registration on any other cancellable parent
}

// Usable reports whether a Ctx may be made over parent: it is a Ctx, or
// nothing above it can be cancelled (context.Background and contexts of
// values over it).
func Usable(parent context.Context) bool {
	if _, ok := parent.(*Ctx); ok {
		return true
	}
	return parent.Done() == nil
}

// Init makes c a context over parent (which must be Usable) that ends at
// deadline, unless it is zero, once Arm has armed its timer.
//
// The timer waits for Arm because arming and stopping one costs as much
// as the rest of a fast read's context: the hedging engine arms it only
// for an operation still running at its hedge delay (or that has no
// delay), and most end sooner.
func (c *Ctx) Init(parent context.Context, deadline time.Time) {
	c.Reset(parent)
	c.Start(deadline)
}

// Reset readies c to be made a context over parent by Start, and holds
// parent meanwhile (Parent): an owner that may not make c its context
// (its parent is not Usable) keeps the parent here all the same. A Ctx
// reset and not started must not be used as a context.
func (c *Ctx) Reset(parent context.Context) { *c = Ctx{parent: parent} }

// Parent returns the parent c was reset with.
func (c *Ctx) Parent() context.Context { return c.parent }

// Start makes c, reset over a Usable parent, a context over it that ends
// at deadline (unless zero) once armed: see Init.
func (c *Ctx) Start(deadline time.Time) {
	parent := c.parent
	pd, hasParentDeadline := parent.Deadline()
	c.own = !deadline.IsZero()
	if hasParentDeadline && parent.Done() != nil && (!c.own || !deadline.Before(pd)) {
		deadline, c.own = pd, false // the parent's end ends c in time
	}
	c.deadline = deadline
	// The registration may fire before it is stored: it is stored under
	// mu, which end takes.
	c.mu.Lock()
	defer c.mu.Unlock()
	switch p := parent.(type) {
	case *Ctx:
		c.up.child = c
		p.Watch(&c.up)
	default:
		if parent.Done() != nil {
			c.upStop = context.AfterFunc(parent, c.parentEnded)
		}
	}
}

// Arm arms the timer of c's own deadline, if it has one that comes before
// its parent's, unless it is armed or c has ended. now is the current
// time. A deadline passed fires at once (in its own goroutine).
func (c *Ctx) Arm(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.own && c.timer == nil && !c.canceled.Load() {
		c.timer = time.AfterFunc(c.deadline.Sub(now), c.expire)
	}
}

// New returns a Ctx over parent, which must be Usable.
func New(parent context.Context) *Ctx {
	c := new(Ctx)
	c.Init(parent, time.Time{})
	return c
}

func (c *Ctx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

func (c *Ctx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.canceled.Load() {
			return closedChan
		}
		c.done = make(chan struct{})
	}
	return c.done
}

// closedChan is the Done of a Ctx first asked for it after it ended.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *Ctx) Err() error {
	if c.canceled.Load() {
		return c.err
	}
	return nil
}

func (c *Ctx) Value(key any) any { return c.parent.Value(key) }

func (c *Ctx) String() string { return "opctx.Ctx" }

// Cancel ends c with context.Canceled, unless it already ended.
func (c *Ctx) Cancel() { c.end(context.Canceled) }

func (c *Ctx) expire() { c.end(context.DeadlineExceeded) }

func (c *Ctx) parentEnded() { c.end(c.parent.Err()) }

// end ends c with err, once: Done closes, Err says err, the watches run,
// each in its own goroutine, and the registration on the parent and the
// timer are let go.
func (c *Ctx) end(err error) {
	c.mu.Lock()
	if c.canceled.Load() {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.canceled.Store(true)
	if c.done != nil {
		close(c.done)
	}
	for w := c.watches; w != nil; {
		next := w.next
		w.on, w.next, w.prev = nil, nil, nil
		w.run()
		w = next
	}
	c.watches = nil
	timer, upStop := c.timer, c.upStop
	c.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	if p, ok := c.parent.(*Ctx); ok {
		p.Unwatch(&c.up)
	} else if upStop != nil {
		upStop()
	}
}

// Watch is a registration of a function to run when a Ctx ends. The
// watcher holds it (embeds it, typically), so that registering allocates
// nothing; one Watch is on at most one Ctx at a time.
type Watch struct {
	f          func()
	child      *Ctx // instead of f: a Ctx over the one watched, which ends with it (no closure to allocate)
	on         *Ctx // registered with; nil when not
	next, prev *Watch
}

// NewWatch returns a Watch that runs f.
func NewWatch(f func()) Watch { return Watch{f: f} }

// Watch registers w: its function runs in its own goroutine once c ends,
// at once if it already has.
func (c *Ctx) Watch(w *Watch) {
	c.mu.Lock()
	if c.canceled.Load() {
		c.mu.Unlock()
		w.run()
		return
	}
	w.on = c
	w.prev, w.next = nil, c.watches
	if c.watches != nil {
		c.watches.prev = w
	}
	c.watches = w
	c.mu.Unlock()
}

// run starts w's function in its own goroutine.
func (w *Watch) run() {
	if w.child != nil {
		go w.child.parentEnded()
		return
	}
	go w.f()
}

// Unwatch removes w, and reports whether it did so before its function
// was started (false: it ran, or is about to, or w was not registered).
func (c *Ctx) Unwatch(w *Watch) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.on != c {
		return false
	}
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		c.watches = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	}
	w.on, w.next, w.prev = nil, nil, nil
	return true
}

// AfterFunc is context.AfterFunc's for a Ctx: the context package calls
// it to register the contexts derived from c (net/http's, say), instead
// of starting a goroutine to watch c.
func (c *Ctx) AfterFunc(f func()) (stop func() bool) {
	w := &Watch{f: f}
	c.Watch(w)
	return func() bool { return c.Unwatch(w) }
}

// Of returns the Ctx whose cancellation ctx has, exactly: ctx itself, or
// the Ctx of a context that wraps one and says so (an OpCtx method, as
// the hedging engine's attempt contexts have); nil if none.
func Of(ctx context.Context) *Ctx {
	switch c := ctx.(type) {
	case *Ctx:
		return c
	case interface{ OpCtx() *Ctx }:
		return c.OpCtx()
	}
	return nil
}
