package hedge

import (
	"context"
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
// context (a context.WithCancel of the caller's, so the caller's values,
// deadline and cancellation reach every attempt, and contexts derived from
// an attempt hang directly off a standard cancelCtx) plus the attempt's
// identity. Done and Err are the embedded context's, which keeps them
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
// operation's own context (see opCtx) rather than start a goroutine to
// watch it. Over a context of the context package's, the package finds
// that context (through Value) and never asks.
func (x *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	if a, ok := x.Context.(interface{ AfterFunc(func()) func() bool }); ok {
		return a.AfterFunc(f)
	}
	return context.AfterFunc(x.Context, f)
}
