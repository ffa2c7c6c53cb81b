package hedge

import (
	"context"
	"sync"
)

// Trigger says why an attempt was launched.
type Trigger uint8

const (
	// TriggerPrimary marks the first attempt of an operation.
	TriggerPrimary Trigger = iota
	// TriggerDelay marks a hedge sent because earlier attempts had not
	// answered acceptably within the hedge delay.
	TriggerDelay
	// TriggerFailure marks a hedge sent at once because an earlier attempt
	// failed or was not acceptable.
	TriggerFailure
)

var triggerNames = [...]string{"primary", "delay", "failure"}

func (t Trigger) String() string { return enumName(triggerNames[:], t) }

// MarshalText encodes the trigger as its name.
func (t Trigger) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText decodes a trigger name.
func (t *Trigger) UnmarshalText(b []byte) error { return enumParse("trigger", triggerNames[:], b, t) }

// Attempt describes one try of an operation. It is passed to the call and is
// available from the attempt's context through AttemptFrom.
type Attempt struct {
	// Index is 0 for the primary and counts up for hedges.
	Index int
	// Target is the index of the target the attempt should use, in the
	// operation's Targets (0 when there is only one).
	Target int
	// Trigger says why the attempt was launched.
	Trigger Trigger
}

// IsHedge reports whether the attempt duplicates an earlier one.
func (a Attempt) IsHedge() bool { return a.Index > 0 }

type attemptKey struct{}

// AttemptFrom returns the attempt that ctx belongs to, if ctx (or a parent of
// it) is an attempt context made by Do.
func AttemptFrom(ctx context.Context) (Attempt, bool) {
	if a, ok := ctx.Value(attemptKey{}).(*Attempt); ok {
		return *a, true
	}
	return Attempt{}, false
}

// IsHedge reports whether ctx belongs to a hedge attempt, so code deep in a
// call can deprioritise or label duplicate work.
func IsHedge(ctx context.Context) bool {
	a, ok := AttemptFrom(ctx)
	return ok && a.IsHedge()
}

// canceller is the cancellation shared by the attempts of one operation. It
// is embedded in the operation so that attempt contexts cost no allocation
// beyond their done channel, which is made only when someone asks for it.
type canceller struct {
	mu     sync.Mutex
	done   chan struct{}
	err    error
	afters []func()
	store  [2]func() // backing for afters: most attempts register one
}

// closedChan is returned by Done after cancellation when no channel was made.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *canceller) doneChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			return closedChan
		}
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *canceller) errValue() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// cancel cancels every attempt context of the operation; later calls do
// nothing. Registered after-functions run synchronously, outside the lock:
// only the context package registers them (through the unexported
// afterFuncer interface), and what it registers is a short cancel of a
// derived context; context.AfterFunc itself moves user functions to their
// own goroutine.
func (c *canceller) cancel(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, f := range afters {
		f()
	}
}

// afterFunc registers f to run once the operation is cancelled. It lets the
// context package hang derived contexts (net/http derives one per round trip)
// on an attempt context without a watcher goroutine per attempt.
func (c *canceller) afterFunc(f func()) {
	c.mu.Lock()
	if c.err == nil {
		if c.afters == nil {
			c.afters = c.store[:0]
		}
		c.afters = append(c.afters, f)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	f()
}

// attemptCtx is the context an attempt runs under: its parent's values and
// deadline, the operation's cancellation, and the attempt's identity.
type attemptCtx struct {
	context.Context // the operation's parent context
	c               *canceller
	a               Attempt
}

func (x *attemptCtx) Done() <-chan struct{} { return x.c.doneChan() }
func (x *attemptCtx) Err() error            { return x.c.errValue() }

func (x *attemptCtx) Value(key any) any {
	if key == (attemptKey{}) {
		return &x.a
	}
	return x.Context.Value(key)
}

// AfterFunc makes attemptCtx an afterFuncer for the context package (see
// context.AfterFunc). The returned stop function never unregisters f: the
// context package only calls it while tearing down a derived context, and f
// running later against that already-cancelled context does nothing. The
// registration lives no longer than the operation.
func (x *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	x.c.afterFunc(f)
	return neverStopped
}

func neverStopped() bool { return false }

func (x *attemptCtx) String() string { return "hedge.attemptCtx" }
