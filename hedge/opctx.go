package hedge

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// opCtx is an operation's context when its parent is never cancelled
// (context.Background, as an http.Client's request has without a
// Timeout) and the policy sets no Timeout: what every attempt runs under,
// cancelled when the outcome is decided. It lives inside the operation, so
// that such an operation allocates no context of its own, where
// context.WithCancel allocates the context and its cancel function
// (BenchmarkInMemory: docs/performance.md). Contexts derived from it
// (net/http's, context.AfterFunc's) register through its AfterFunc
// method, which the context package uses for a parent that is not one of
// its own, instead of a goroutine per derived context.
type opCtx struct {
	parent   context.Context
	canceled atomic.Bool
	mu       sync.Mutex
	done     chan struct{} // made when first asked for
	fns      *afterFunc    // registered by AfterFunc, not yet run or stopped: a list, a word in the operation
}

type afterFunc struct {
	f    func()
	next *afterFunc
	over bool // run or stopped; guarded by the opCtx's mu
}

// closedChan is the Done of an opCtx asked for it after its cancellation.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Deadline: a parent that is never cancelled has none.
func (c *opCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

func (c *opCtx) Done() <-chan struct{} {
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

func (c *opCtx) Err() error {
	if c.canceled.Load() {
		return context.Canceled
	}
	return nil
}

func (c *opCtx) Value(key any) any { return c.parent.Value(key) }

func (c *opCtx) String() string { return "hedge.opCtx" }

// AfterFunc arranges for f to run in its own goroutine once c is
// cancelled, as context.AfterFunc does; stop keeps it from running, and
// reports whether it did.
func (c *opCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.canceled.Load() {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f, next: c.fns}
	c.fns = a
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if a.over {
			return false
		}
		a.over = true
		for p := &c.fns; *p != nil; p = &(*p).next {
			if *p == a {
				*p = a.next
				break
			}
		}
		return true
	}
}

// cancel cancels c, once: Done closes, Err says context.Canceled, and the
// functions registered run.
func (c *opCtx) cancel() {
	c.mu.Lock()
	if c.canceled.Load() {
		c.mu.Unlock()
		return
	}
	c.canceled.Store(true)
	if c.done != nil {
		close(c.done)
	}
	fns := c.fns
	c.fns = nil
	for a := fns; a != nil; a = a.next {
		a.over = true // a stop from now on leaves the list alone
	}
	c.mu.Unlock()
	for a := fns; a != nil; a = a.next {
		go a.f()
	}
}
