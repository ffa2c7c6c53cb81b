// Package opctx is a cancellable context.Context for one request or one
// hedged operation, lighter than the context package's chain.
//
// A proxied read used to build four layers of the context package's
// contexts: the client server's WithCancel, the engine's WithTimeout, its
// per-attempt registration and the backend client's AfterFunc. Each layer
// allocates its context, its cancel function and, once a child registers,
// its Done channel and a map of children; a timeout adds its timer. That
// was a third of the gateway's allocations per read and 10% of its CPU
// (docs/performance.md, "The gateway's own tail"). A Ctx is one struct
// that can be embedded (the engine's rides in the state a request's
// primary hands out), keeps its Done channel until asked for it, and
// takes cancellation watches (Watch) that the watcher embeds, so that
// registering and removing one allocates nothing.
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
// or at its deadline. The zero Ctx is not usable: Init it. Every byte of
// it is allocated for each request (the engine hands it out with the
// request's primary): it is kept small.
type Ctx struct {
	parent   context.Context
	deadline int64 // the earlier of its own and its parent's, in Unix nanoseconds; 0: none

	state   atomic.Uint32 // live, or why it ended (see Err)
	own     bool          // the deadline is its own, not its parent's: its timer ends c
	mu      sync.Mutex
	done    chan struct{} // made when first asked for
	watches *Watch        // registered, not yet run or removed: a list through next
	timer   *time.Timer   // the own deadline's, once armed
	up      Watch         // its registration on a parent Ctx
}

// Values of Ctx.state.
const (
	live uint32 = iota
	canceled
	expired
	parentEnded // Err is the parent's
)

// Usable reports whether a Ctx may be made over parent: it is a Ctx, or
// nothing above it can be cancelled (context.Background and contexts of
// values over it).
func Usable(parent context.Context) bool {
	if _, ok := parent.(*Ctx); ok {
		return true
	}
	return parent.Done() == nil
}

// Init makes c, a zero Ctx, a context over parent (which must be Usable)
// that ends at deadline, unless it is zero, once Arm has armed its timer.
//
// The timer waits for Arm because arming and stopping one costs as much
// as the rest of a fast read's context: the hedging engine arms it only
// for an operation still running at its hedge delay (or that has no
// delay), and most end sooner.
func (c *Ctx) Init(parent context.Context, deadline time.Time) {
	c.Reset(parent)
	c.Start(deadline)
}

// Reset readies c, which must be a zero Ctx, to be made a context over
// parent by Start, and holds parent meanwhile (Parent): an owner that may
// not make c its context (its parent is not Usable) keeps the parent here
// all the same. A Ctx reset and not started must not be used as a
// context.
func (c *Ctx) Reset(parent context.Context) { c.parent = parent }

// Parent returns the parent c was reset with.
func (c *Ctx) Parent() context.Context { return c.parent }

// Start makes c, reset over a Usable parent, a context over it that ends
// at deadline (unless zero) once armed: see Init.
func (c *Ctx) Start(deadline time.Time) {
	parent := c.parent
	c.own = !deadline.IsZero()
	p, isCtx := parent.(*Ctx)
	if !isCtx {
		if parent.Done() != nil {
			panic("opctx: Start over a parent that can be cancelled and is not a Ctx (see Usable)")
		}
		// Nothing above can end it: nor has it a deadline to count.
		if c.own {
			c.deadline = deadline.UnixNano()
		}
		return
	}
	if p.deadline != 0 && (!c.own || deadline.UnixNano() >= p.deadline) {
		c.deadline, c.own = p.deadline, false // the parent's end ends c in time
	} else if c.own {
		c.deadline = deadline.UnixNano()
	}
	// A parent already ended runs the registration at once, in a
	// goroutine started after child is set.
	c.up.child = c
	p.Watch(&c.up)
}

// Arm arms the timer of c's own deadline, if it has one that comes before
// its parent's, unless it is armed or c has ended. now is the current
// time. A deadline passed fires at once (in its own goroutine).
func (c *Ctx) Arm(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.own && c.timer == nil && c.state.Load() == live {
		c.timer = time.AfterFunc(time.Unix(0, c.deadline).Sub(now), c.expire)
	}
}

// New returns a Ctx over parent, which must be Usable.
func New(parent context.Context) *Ctx {
	c := new(Ctx)
	c.Init(parent, time.Time{})
	return c
}

func (c *Ctx) Deadline() (time.Time, bool) {
	if c.deadline == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, c.deadline), true
}

func (c *Ctx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.state.Load() != live {
			return closedChan
		}
		c.done = make(chan struct{})
	}
	return c.done
}

// closedChan is the Done of a Ctx first asked for it after it ended.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *Ctx) Err() error {
	switch c.state.Load() {
	case canceled:
		return context.Canceled
	case expired:
		return context.DeadlineExceeded
	case parentEnded:
		return c.parent.Err()
	}
	return nil
}

func (c *Ctx) Value(key any) any { return c.parent.Value(key) }

func (c *Ctx) String() string { return "opctx.Ctx" }

// Cancel ends c with context.Canceled, unless it already ended.
func (c *Ctx) Cancel() { c.end(canceled) }

func (c *Ctx) expire() { c.end(expired) }

func (c *Ctx) parentEnded() { c.end(parentEnded) }

// end ends c, once, for why (a state): Done closes, Err says why, the
// watches run, each in its own goroutine, and the registration on the
// parent and the timer are let go.
func (c *Ctx) end(why uint32) {
	c.mu.Lock()
	if c.state.Load() != live {
		c.mu.Unlock()
		return
	}
	c.state.Store(why)
	if c.done != nil {
		close(c.done)
	}
	for w := c.watches; w != nil; {
		next := w.next
		w.on, w.next = nil, nil
		w.run()
		w = next
	}
	c.watches = nil
	timer := c.timer
	c.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	if p, ok := c.parent.(*Ctx); ok {
		p.Unwatch(&c.up)
	}
}

// Watch is a registration of a function to run when a Ctx ends. The
// watcher holds it (embeds it, typically), so that registering allocates
// nothing; one Watch is on at most one Ctx at a time.
type Watch struct {
	f     func()
	child *Ctx // instead of f: a Ctx over the one watched, which ends with it (no closure to allocate)
	on    *Ctx // registered with; nil when not
	next  *Watch
}

// NewWatch returns a Watch that runs f.
func NewWatch(f func()) Watch { return Watch{f: f} }

// Watch registers w: its function runs in its own goroutine once c ends,
// at once if it already has.
func (c *Ctx) Watch(w *Watch) {
	c.mu.Lock()
	if c.state.Load() != live {
		c.mu.Unlock()
		w.run()
		return
	}
	w.on, w.next = c, c.watches
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
	// A Ctx has a watch or two (a backend connection's, a derived
	// context's): a list with no way back costs a short walk, and a word
	// less in every request's context.
	for p := &c.watches; *p != nil; p = &(*p).next {
		if *p == w {
			*p = w.next
			break
		}
	}
	w.on, w.next = nil, nil
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
