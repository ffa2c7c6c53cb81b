package hedge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tailgate-dev/tailgate/internal/opctx"
)

// Errors a Steering's Pick returns to say why an attempt has no target.
var (
	// ErrNoTarget: no target is available for the attempt. For the
	// primary, Do fails with it; a hedge is suppressed (SuppressNoTarget).
	ErrNoTarget = errors.New("hedge: no target available")
	// ErrNoCapacity: the caller has no capacity for the attempt (an
	// attempt slot, say); the hedge is suppressed (SuppressCapacity).
	ErrNoCapacity = errors.New("hedge: no capacity for the attempt")
)

// Steering chooses where each attempt of one operation goes and hears how
// each ended, as grpc-go's balancer Picker does for a call. One Steering
// serves one operation, so it may keep the operation's state (the tickets
// its picks took, say). RouteSteering is the implementation over a
// replica set; a Transport with Targets steers every request through one
// unless given another (RoundTripWith).
type Steering interface {
	// Pick chooses the target of attempt a, an index into the operation's
	// targets; used holds the targets of the earlier attempts. For a hedge
	// it is called after the deadline, gate and budget checks, last, so
	// that it may take resources for the attempt (a breaker ticket, an
	// attempt slot), which Done gives back. An error says why there is no
	// target: ErrNoCapacity (or an error wrapping it) suppresses a hedge
	// as SuppressCapacity, any other as SuppressNoTarget; for the primary,
	// Do fails with the error. Pick is called with the operation's lock
	// held: it must not block.
	Pick(a Attempt, used []int) (target int, err error)

	// Done reports, exactly once for every attempt Pick gave a target and
	// that started, how it ended, in the attempt's goroutine, possibly
	// after Do has returned.
	Done(a Attempt, r Result)
}

// Result is how an attempt ended, as Steering.Done hears it.
type Result struct {
	// Verdict is nil when the attempt's result was accepted; otherwise why
	// not: the attempt's error, the acceptance check's verdict, or, for a
	// loser cancelled for a winner, its context's error.
	Verdict error
	// Elapsed is how long the attempt ran, from its launch.
	Elapsed time.Duration
	// Response is the attempt's response for a Transport (its body
	// buffered; do not keep it), nil for Do or when there was none.
	Response *http.Response
}

// Op describes one hedged operation for Do. Only Call is required.
type Op[T any] struct {
	// Call performs one attempt. The primary runs on the caller's
	// goroutine, hedges in their own, concurrently. Call must honour ctx,
	// and return promptly once it ends: ctx is cancelled when another
	// attempt wins (a winning hedge is returned only once the cancelled
	// primary has returned), when the caller's context ends, and when Do
	// returns, so a result that depends on ctx staying alive must be
	// completed inside Call.
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

	// First is the target of the primary without a Steering: attempt i
	// goes to target (First+i) mod len(Targets), so each hedge goes to a
	// different target while one is left.
	First int

	// Steering, when non-nil, chooses each attempt's target instead, and
	// hears how each attempt ended.
	Steering Steering

	// OnReceipt, when non-nil, receives the operation's final receipt once,
	// from any goroutine, possibly after Do has returned.
	OnReceipt func(Receipt)
}

// Do runs op under h's policy. It runs the primary on the caller's
// goroutine; if no acceptable result has arrived after the hedge delay, or
// an attempt fails, it launches a hedge to another target, unless the
// attempt limit, the deadline, the overload gate, the budget or the
// Steering says no. The first acceptable result wins and is returned; the
// other attempts are cancelled at once and their fate is observed for the
// policy's ObserveWindow to complete the receipt.
//
// If no attempt is acceptable, Do returns the last refused result with an
// error wrapping ErrNotAccepted and the verdict (the result is then not
// released: it is the caller's); a result is never displaced by a later
// error, unless its verdict wraps ErrNotAnAnswer. If every attempt failed
// with an error, Do returns the last one. If ctx ends first, Do returns an
// error wrapping ctx's error.
func Do[T any](ctx context.Context, h *Hedger, op Op[T]) (T, error) {
	if op.Call == nil {
		var zero T
		return zero, fmt.Errorf("%w: Op.Call is nil", ErrInvalid)
	}
	f := &funcOp[T]{call_: op.Call, accept_: op.Accept, release_: op.Release, receipt_: op.OnReceipt, targets_: op.Targets}
	f.op.init(ctx, h, f, op.Steering, op.First, &f.own, &f.ctx0)
	return f.op.run()
}

// funcOp adapts an Op's functions to the engine; one allocation holds both.
type funcOp[T any] struct {
	op       operation[T]
	call_    func(ctx context.Context, a Attempt) (T, error)
	accept_  func(v T, err error) error
	release_ func(v T)
	receipt_ func(Receipt)
	targets_ []string
	own      opctx.Ctx  // see operation.init
	ctx0     attemptCtx // see operation.init
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

func (f *funcOp[T]) done(a Attempt, _ T, verdict error, elapsed time.Duration) {
	if s := f.op.steer; s != nil {
		s.Done(a, Result{Verdict: verdict, Elapsed: elapsed})
	}
}

func (f *funcOp[T]) wantsReceipt() bool { return f.receipt_ != nil }

func (f *funcOp[T]) receipt(r Receipt) { f.receipt_(r) }

func (f *funcOp[T]) targets() []string { return f.targets_ }

// calls is what the engine needs from an operation's owner. The HTTP
// Transport implements it directly so a round trip costs one allocation for
// all of its state.
type calls[T any] interface {
	call(ctx context.Context, a Attempt) (T, error)
	accept(v T, err error) error
	release(v T)
	// prepare is told, under the operation's lock, about an attempt about
	// to start, while the caller still owns its inputs: a hedge may
	// outlive the operation.
	prepare(ctx context.Context, a Attempt)
	// done is told, in the attempt's goroutine, that attempt a returned,
	// the verdict on its result, and how long it ran, before the operation
	// accounts for it: it tells the Steering.
	done(a Attempt, v T, verdict error, elapsed time.Duration)
	wantsReceipt() bool
	receipt(r Receipt)
	// targets are the names of the targets attempts go to (see Op.Targets),
	// kept by the owner rather than in every operation's state.
	targets() []string
}
