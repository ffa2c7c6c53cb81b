package hedge

import (
	"context"

	"github.com/tailgate-dev/tailgate/internal/opctx"
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
// it) is an attempt context made by Do: code deep in a call can tell a
// hedge (its IsHedge) and deprioritise or label duplicate work.
func AttemptFrom(ctx context.Context) (Attempt, bool) {
	if a, ok := ctx.Value(attemptKey{}).(*Attempt); ok {
		return *a, true
	}
	return Attempt{}, false
}

// attemptCtx is the context an attempt runs under: the operation's
// context (an opctx.Ctx, or the context package's over a caller's context
// it cannot be made over: either way the caller's values, deadline and
// cancellation reach every attempt) plus the attempt's identity. Done and Err are the embedded context's, which keeps them
// consistent by construction.
type attemptCtx struct {
	context.Context
	a Attempt
}

func (x *attemptCtx) Value(key any) any {
	if key == (attemptKey{}) {
		return &x.a
	}
	return x.Context.Value(key)
}

func (x *attemptCtx) String() string { return "hedge.attemptCtx" }

// AfterFunc lets a context derived from the attempt's register with its
// operation's own context (an opctx.Ctx) rather than start a goroutine to
// watch it. Over a context of the context package's, the package finds
// that context (through Value) and never asks.
func (x *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	if c, ok := x.Context.(*opctx.Ctx); ok {
		return c.AfterFunc(f)
	}
	return context.AfterFunc(x.Context, f)
}

// OpCtx returns the operation's own context, whose cancellation the
// attempt's is, or nil when the operation's context is the context
// package's: the backend client watches it without allocating
// (opctx.Of).
func (x *attemptCtx) OpCtx() *opctx.Ctx {
	c, _ := x.Context.(*opctx.Ctx)
	return c
}
