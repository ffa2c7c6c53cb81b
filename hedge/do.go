package hedge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNoTarget is returned by Do when Op.Pick finds no target for the primary.
var ErrNoTarget = errors.New("hedge: no target available")

// Op describes one hedged operation for Do. Only Call is required.
type Op[T any] struct {
	// Call performs one attempt. Hedges run in their own goroutines,
	// concurrently with other attempts. Call must honour ctx: ctx is
	// cancelled when another attempt wins, when the caller's context ends,
	// and when Do returns (like a deferred cancel), so a result that depends
	// on ctx staying alive must be completed inside Call.
	Call func(ctx context.Context, a Attempt) (T, error)

	// Accept decides whether a result wins: nil means it does, an error says
	// why not (it appears in the receipt). A refused result or an error may
	// launch the next attempt at once, budget permitting. Nil Accept accepts
	// exactly the results whose error is nil. Accept runs in the goroutine
	// of the attempt it judges, so it may be called concurrently.
	Accept func(v T, err error) error

	// Release frees a result, returned with a nil error, that is not given
	// to the caller: losers, refused results, late completions. It may run
	// in any goroutine, also after Do has returned. Nil means nothing to
	// free.
	Release func(v T)

	// Targets names the interchangeable targets attempts may go to (replica
	// addresses, say); they appear in the receipt. Empty means a single,
	// unnamed target.
	Targets []string

	// First is the target of the primary. Without Pick, attempt i goes to
	// target (First+i) mod len(Targets): each hedge goes to a different
	// target while one is left.
	First int

	// Pick, when non-nil, chooses each attempt's target instead; used holds
	// the targets of the earlier attempts. For a hedge it is called after
	// the deadline, gate and budget checks, so it may take resources for
	// the attempt. Returning false for a hedge suppresses it
	// (SuppressNoTarget); for the primary, Do fails with ErrNoTarget. Pick
	// is called with the operation's lock held and must not block.
	Pick func(a Attempt, used []int) (target int, ok bool)

	// Admit, when non-nil, is asked just before a hedge is launched, after
	// every other check and after Pick; false suppresses it
	// (SuppressCapacity), and then Admit must release whatever Pick took.
	// It lets a caller reserve capacity, such as an attempt slot, for the
	// hedge: the slot is then the Call's to release. The primary is not
	// asked. Admit is called with the operation's lock held and must not
	// block.
	Admit func(a Attempt) bool

	// OnReceipt, when non-nil, receives the operation's final receipt once,
	// from any goroutine, possibly after Do has returned.
	OnReceipt func(Receipt)

	// InlinePrimary runs the primary on the caller's goroutine instead of
	// a new one. That saves a goroutine hand-off per operation (about 2µs
	// on a 2-core machine), but a winning hedge is then returned only once
	// the cancelled primary has returned: set it only when Call returns
	// promptly on cancellation, as net/http does.
	InlinePrimary bool
}

// Do runs op under h's policy. It launches the primary; if no acceptable
// result has arrived after the hedge delay, or an attempt fails, it launches
// a hedge to another target, unless the attempt limit, the deadline, the
// overload gate, the budget or op.Admit says no. The first acceptable result
// wins and is returned; the other attempts are cancelled at once and their
// fate is observed for the policy's ObserveWindow to complete the receipt.
//
// If no attempt is acceptable, Do returns the last refused result with an
// error wrapping ErrNotAccepted and the verdict (the result is then not
// released: it is the caller's); a result is never displaced by a later
// error, unless its verdict wraps ErrNotAnAnswer. If every attempt failed with an error, Do returns the last one. If
// ctx ends first, Do returns an error wrapping ctx's error.
func Do[T any](ctx context.Context, h *Hedger, op Op[T]) (T, error) {
	if op.Call == nil {
		var zero T
		return zero, fmt.Errorf("%w: Op.Call is nil", ErrInvalidPolicy)
	}
	f, _ := h.ops.Get().(*funcOp[T])
	if f == nil {
		f = new(funcOp[T])
	}
	f.call_, f.accept_, f.release_, f.receipt_ = op.Call, op.Accept, op.Release, op.OnReceipt
	f.hooks = hooks{targets: op.Targets, pick: op.Pick, admit: op.Admit, inline: op.InlinePrimary}
	f.op.init(ctx, h, f, &f.hooks, op.First)
	v, err := f.op.run()
	if f.op.reusable() {
		*f = funcOp[T]{}
		h.ops.Put(f)
	}
	return v, err
}

// funcOp adapts an Op's functions to the engine; one allocation holds both.
// It keeps only the functions: the rest of the Op lives in the hooks.
type funcOp[T any] struct {
	op       operation[T]
	hooks    hooks
	call_    func(ctx context.Context, a Attempt) (T, error)
	accept_  func(v T, err error) error
	release_ func(v T)
	receipt_ func(Receipt)
}

func (f *funcOp[T]) call(ctx context.Context, a Attempt) (T, error) { return f.call_(ctx, a) }

func (f *funcOp[T]) accept(v T, err error) error {
	if f.accept_ != nil {
		return f.accept_(v, err)
	}
	return err
}

func (f *funcOp[T]) release(v T) {
	if f.release_ != nil {
		f.release_(v)
	}
}

func (f *funcOp[T]) prepare(context.Context, Attempt) {}

func (f *funcOp[T]) done(Attempt, T, error, time.Duration) {}

func (f *funcOp[T]) wantsReceipt() bool { return f.receipt_ != nil }

func (f *funcOp[T]) receipt(r Receipt) { f.receipt_(r) }

// calls is what the engine needs from an operation's owner. The HTTP
// Transport implements it directly so a round trip costs one allocation for
// all of its state.
type calls[T any] interface {
	call(ctx context.Context, a Attempt) (T, error)
	accept(v T, err error) error
	release(v T)
	// prepare is told, under the operation's lock, about an attempt about
	// to start, while the caller still owns its inputs: a hedge (or a
	// detached primary) may outlive the operation.
	prepare(ctx context.Context, a Attempt)
	// done is told, in the attempt's goroutine, that attempt a returned,
	// the verdict on its result, and how long it ran, before the operation
	// accounts for it.
	done(a Attempt, v T, verdict error, elapsed time.Duration)
	wantsReceipt() bool
	receipt(r Receipt)
}

// steering chooses targets and admits hedges for one operation.
type steering interface {
	Pick(a Attempt, used []int) (target int, ok bool)
	Admit(a Attempt) bool
}

// hooks are the non-generic options of an operation; the Transport shares
// one set between all its requests.
type hooks struct {
	targets []string
	pick    func(a Attempt, used []int) (int, bool)
	admit   func(a Attempt) bool
	inline  bool
}
