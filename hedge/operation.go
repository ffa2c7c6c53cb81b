package hedge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

type result[T any] struct {
	idx int
	v   T
	err error
}

// operation is the state of one Do: a small state machine driven by the
// goroutines that report into it (attempts, the delay timer, the parent's
// cancellation) under mu. The caller's goroutine starts it and, unless the
// outcome is already known, waits on wake.
type operation[T any] struct {
	h      *Hedger
	s      *settings // the policy and gate in force as it began, to the end (its MaxAttempts: o.s.p's, not a copy, which would take the operation into the next size class)
	fn     calls[T]
	hooks  *hooks
	steer  steering // per-operation Pick and Admit, overriding hooks
	first  int      // target of the primary, without pick
	parent context.Context
	ctx    context.Context    // context.WithCancel(parent): what attempts run under
	cancel context.CancelFunc // cancels every attempt; called when the outcome is decided
	start  time.Time
	delay  time.Duration
	expect time.Duration

	mu           sync.Mutex
	launched     int
	pending      int      // attempts launched and not yet returned
	wanted       bool     // a hedge was wanted because an answer was late
	lateHedged   bool     // ... and one was sent: the gate learns how it fared
	pass         gatePass // what the gate granted it, handed back at the end
	warm         bool     // the delay was an adaptive delay's warm-up guess
	finished     bool     // the outcome is decided; later reports are late
	windowClosed bool
	delivered    bool
	outcome      Outcome
	res          result[T]     // the winner, or the latest refused result
	verdict      error         // why res was refused
	haveRefused  bool          // res holds a refused result
	refusedVoid  bool          // ... whose verdict wraps ErrNotAnAnswer
	wake         chan struct{} // set while the caller waits
	timer        *delayTimer
	timerTarget  delayTarget
	fireAt       time.Time // when the armed delay timer is meant to fire
	window       *time.Timer
	tally        tally

	// Per-attempt state. The primary's lives inline; a hedge allocates its
	// own, so an operation that never hedges stays one small allocation.
	// Attempt contexts are handed out, so they never move; records may.
	ctxs [MaxAttemptsCap]*attemptCtx
	ctx0 *attemptCtx     // the primary's, if the owner supplies one
	rec  []AttemptRecord // rec[i] describes attempt i
	rec0 [1]AttemptRecord

	timerStopped bool // the delay timer was stopped before it could fire
	used         [MaxAttemptsCap]int
}

func (o *operation[T]) init(ctx context.Context, h *Hedger, fn calls[T], hk *hooks, first int) {
	o.h, o.fn, o.hooks, o.parent, o.first = h, fn, hk, ctx, first
	o.s = h.cur.Load()
}

func (o *operation[T]) run() (T, error) {
	h := o.h
	var zero T
	now := time.Now()
	o.start = now
	if err := o.parent.Err(); err != nil {
		// Nothing is launched, but the caller is still owed its receipt.
		o.outcome = OutcomeCanceled
		o.delivered = true
		o.deliver()
		return zero, fmt.Errorf("hedge: %w", err)
	}
	h.budget.Admit()
	o.s.gate.addOp(now)
	o.delay, o.expect, o.warm = h.delays.current(now)
	h.observe(Event{Kind: EventStart, Delay: o.delay})

	if t := o.s.p.Timeout; t > 0 {
		o.ctx, o.cancel = context.WithTimeout(o.parent, t)
	} else {
		o.ctx, o.cancel = context.WithCancel(o.parent)
	}
	o.mu.Lock()
	primary := Attempt{Trigger: TriggerPrimary}
	target, ok := o.pick(primary)
	if !ok {
		o.outcome = OutcomeFailed
		o.finish(now) // unlocks
		return zero, ErrNoTarget
	}
	primary.Target = target
	o.launch(now, primary, !o.hooks.inline)
	if o.s.p.MaxAttempts > 1 {
		o.timerTarget.op = o
		o.timer = h.delayTimer(&o.timerTarget)
		o.arm(now)
	}
	o.mu.Unlock()

	if o.hooks.inline {
		// The parent's cancellation reaches the primary through o.ctx.
		x := o.ctxs[0]
		v, err := o.fn.call(x, x.a)
		o.report(0, v, err)
	}
	o.wait()

	switch o.outcome {
	case OutcomeWon:
		return o.res.v, o.res.err
	case OutcomeCanceled:
		return zero, fmt.Errorf("hedge: %w", o.ctx.Err())
	}
	if o.res.err != nil {
		return o.res.v, fmt.Errorf("hedge: %d attempt(s) failed, last: %w", o.launched, o.res.err)
	}
	return o.res.v, fmt.Errorf("%w after %d attempt(s): %w", ErrNotAccepted, o.launched, o.verdict)
}

// wait blocks until the outcome is decided. The wake channel comes from a
// pool: finish sends on it exactly once, and it is empty again when wait
// returns it.
func (o *operation[T]) wait() {
	o.mu.Lock()
	if o.finished {
		o.mu.Unlock()
		return
	}
	o.wake = o.h.wakeChan()
	o.mu.Unlock()
	if o.parent.Done() == nil && o.s.p.Timeout <= 0 {
		// Only finish can end o.ctx, and finish sends on wake: watching
		// o.ctx would just allocate its Done channel.
		<-o.wake
	} else {
		select {
		case <-o.wake:
		case <-o.ctx.Done(): // the caller left or the policy's Timeout passed
			o.onContextDone()
			<-o.wake // sent by whichever finish won
		}
	}
	o.h.wakes.Put(o.wake)
}

// onContextDone ends the operation because its context ended: the caller's
// was cancelled or the policy's Timeout passed.
func (o *operation[T]) onContextDone() {
	o.mu.Lock()
	if o.finished {
		o.mu.Unlock()
		return
	}
	o.outcome = OutcomeCanceled
	stale, release := o.takeRefused()
	o.finish(time.Now())
	if release {
		o.fn.release(stale)
	}
}

// takeRefused removes the kept refused result, reporting whether it needs
// releasing. Called with o.mu held.
func (o *operation[T]) takeRefused() (T, bool) {
	v, release := o.res.v, o.haveRefused && o.res.err == nil
	o.res, o.verdict, o.haveRefused, o.refusedVoid = result[T]{}, nil, false, false
	return v, release
}

// pick chooses the target of attempt a. Called with o.mu held.
func (o *operation[T]) pick(a Attempt) (int, bool) {
	n := max(len(o.hooks.targets), 1)
	if o.steer != nil || o.hooks.pick != nil {
		used := o.used[:o.launched] // in the operation: a local would escape
		for i := range used {
			used[i] = o.rec[i].Target
		}
		var t int
		var ok bool
		if o.steer != nil {
			t, ok = o.steer.Pick(a, used)
		} else {
			t, ok = o.hooks.pick(a, used)
		}
		return t, ok && t >= 0 && t < n
	}
	first := o.first % n
	if first < 0 {
		first += n
	}
	return (first + a.Index) % n, true
}

// admit asks the caller's hook whether hedge a may start. Called with o.mu
// held.
func (o *operation[T]) admit(a Attempt) bool {
	if o.steer != nil {
		return o.steer.Admit(a)
	}
	return o.hooks.admit == nil || o.hooks.admit(a)
}

// launch records attempt a, has its owner prepare it and, if spawn, starts
// it in a new goroutine. Called with o.mu held.
func (o *operation[T]) launch(now time.Time, a Attempt, spawn bool) {
	i := a.Index
	x := o.ctx0
	if i == 0 {
		o.rec = o.rec0[:0]
	}
	if x == nil || i > 0 {
		x = new(attemptCtx)
	}
	*x = attemptCtx{Context: o.ctx, a: a, start: now.Sub(o.start)}
	o.ctxs[i] = x
	o.rec = append(o.rec, AttemptRecord{
		Index:      i,
		Target:     a.Target,
		TargetName: o.targetName(a.Target),
		Trigger:    a.Trigger,
		Start:      Millis(now.Sub(o.start)),
	})
	o.launched++
	o.pending++
	o.h.observe(Event{Kind: EventLaunch, Attempt: a})
	o.fn.prepare(x, a)
	if spawn {
		go o.attempt(i)
	}
}

func (o *operation[T]) targetName(t int) string {
	if t < len(o.hooks.targets) {
		return o.hooks.targets[t]
	}
	return ""
}

// attempt runs attempt i in its own goroutine.
func (o *operation[T]) attempt(i int) {
	x := o.ctxs[i]
	v, err := o.fn.call(x, x.a)
	o.report(i, v, err)
}

// onDelay runs when the hedge delay expires with no outcome.
func (o *operation[T]) onDelay() {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	// A timer re-armed while its previous firing was on its way (or handed
	// from a finished operation to this one) may fire early: only a firing
	// at or after the time it was armed for counts.
	if o.finished || now.Before(o.fireAt) {
		return
	}
	o.h.noteTimerLag(now.Sub(o.fireAt))
	o.tryHedge(TriggerDelay, now)
}

// tryHedge launches the next attempt unless a limit says no, and reports
// whether it did. Checks run cheapest and least consuming first; the budget
// credit is taken last but one, and handed back if Admit refuses. Called
// with o.mu held.
func (o *operation[T]) tryHedge(trig Trigger, now time.Time) bool {
	h := o.h
	if o.ctx.Err() != nil {
		return false // the caller has left or time is up; not a suppression
	}
	a := Attempt{Index: o.launched, Trigger: trig}
	if o.launched >= o.s.p.MaxAttempts {
		o.suppress(a, SuppressMaxAttempts)
		return false
	}
	// The gate looks for overload: only hedges wanted because an answer
	// was late wait for it and count towards it. A failure is not
	// variability, and the hedge it wants is bounded by the budget alone,
	// so that failing over from a broken replica is never paused.
	delayed := trig == TriggerDelay
	if delayed && !o.wanted {
		o.wanted = true
		o.s.gate.late(now)
	}
	if !o.s.p.IgnoreDeadline && o.expect > 0 {
		if dl, ok := o.ctx.Deadline(); ok && dl.Sub(now) < o.expect {
			o.suppress(a, SuppressDeadline)
			return false
		}
	}
	var pass gatePass
	if delayed {
		var ok bool
		if pass, ok = o.s.gate.allow(now, o.lateHedged); !ok {
			o.suppress(a, SuppressGate)
			return false
		}
	}
	if !h.budget.TrySpend() {
		o.s.gate.refuse(pass, now)
		o.suppress(a, SuppressBudget)
		return false
	}
	// Choosing the target comes last but one, so that a picker that takes
	// resources for the attempt (a breaker ticket, say) only does so for a
	// hedge that every limit has let through; only Admit, the caller's own
	// hook, can still refuse, and it releases what its pick took.
	target, ok := o.pick(a)
	if !ok {
		h.budget.refund()
		o.s.gate.refuse(pass, now)
		o.suppress(a, SuppressNoTarget)
		return false
	}
	a.Target = target
	if !o.admit(a) {
		h.budget.refund()
		o.s.gate.refuse(pass, now)
		o.suppress(a, SuppressCapacity)
		return false
	}
	o.launch(now, a, true)
	if delayed {
		o.s.gate.launched(pass)
		if !o.lateHedged {
			o.lateHedged, o.pass = true, pass
		}
		o.pass.probe = o.pass.probe || pass.probe
	}
	if o.launched < o.s.p.MaxAttempts && o.timer != nil {
		o.arm(now) // the next hedge, one delay later
	}
	return true
}

// arm sets the delay timer for a hedge due one delay after now, early by
// the timer lateness the Hedger has measured, so that the hedge goes out
// at the delay rather than after it. Called with o.mu held.
func (o *operation[T]) arm(now time.Time) {
	lead := o.h.timerLead(o.delay)
	o.fireAt = now.Add(o.delay - lead)
	o.timer.t.Reset(o.delay - lead)
}

// suppress accounts for hedge a, not sent for reason r.
func (o *operation[T]) suppress(a Attempt, r SuppressReason) {
	o.tally.suppressed[r]++
	o.h.observe(Event{Kind: EventSuppress, Reason: r, Attempt: Attempt{Index: a.Index}})
	tellSuppressed(o.steer, a, r)
}

// report applies the result of attempt i, in the goroutine that ran it.
func (o *operation[T]) report(i int, v T, err error) {
	// time.Since reads only the monotonic clock: cheaper than time.Now.
	end := o.start.Add(time.Since(o.start))
	verdict := o.fn.accept(v, err)
	o.fn.done(o.ctxs[i].a, v, verdict, end.Sub(o.startOf(i)))
	o.mu.Lock()
	if !o.finished && o.ctx.Err() != nil {
		// The caller has left, and its cancellation reached this attempt
		// (through o.ctx) before anyone decided the
		// operation: end it now, so that this attempt and any other still
		// running count as cancelled by the caller.
		o.outcome = OutcomeCanceled
		stale, release := o.takeRefused()
		o.finish(end) // unlocks; pending still counts this attempt
		if release {
			o.fn.release(stale)
		}
		o.mu.Lock()
	}
	o.pending--
	if o.finished {
		o.late(i, v, err, end) // unlocks
		return
	}
	rec := &o.rec[i]
	elapsed := end.Sub(o.startOf(i))
	rec.Duration = Millis(elapsed)
	a := o.ctxs[i].a
	if verdict == nil {
		rec.Fate = FateWon
		stale, release := o.takeRefused()
		o.outcome = OutcomeWon
		o.res = result[T]{idx: i, v: v, err: err}
		o.tally.winnerLatency = end.Sub(o.start)
		o.h.record(end, elapsed)
		o.h.observe(Event{Kind: EventReport, Attempt: a, Elapsed: elapsed, Fate: FateWon})
		o.h.observe(Event{Kind: EventWin, Attempt: a, Elapsed: end.Sub(o.start)})
		o.finish(end) // unlocks
		if release {
			o.fn.release(stale)
		}
		return
	}
	rec.Error = verdict.Error()
	rec.Fate = FateRejected
	if err != nil {
		rec.Fate = FateFailed
	}
	o.h.observe(Event{Kind: EventReport, Attempt: a, Elapsed: elapsed, Fate: rec.Fate, Err: verdict})
	// Keep the latest refused result to return if nothing wins, except that
	// a result (a 503, say) is never displaced by a later error: the
	// caller learns more from the server's answer than from a reset. A
	// result that is not an answer at all ranks below both.
	var stale T
	release := false
	void := errors.Is(verdict, ErrNotAnAnswer)
	if !o.haveRefused || o.refusedVoid || !void && (err == nil || o.res.err != nil) {
		stale, release = o.takeRefused()
		o.res, o.verdict, o.haveRefused, o.refusedVoid = result[T]{idx: i, v: v, err: err}, verdict, true, void
	} else if void && err == nil {
		stale, release = v, true // not kept: freed like a loser
	}
	// A failure is a reason to hedge at once.
	if o.tryHedge(TriggerFailure, end) || o.pending > 0 {
		o.mu.Unlock()
	} else {
		o.outcome = OutcomeFailed
		o.finish(end) // unlocks
	}
	if release {
		o.fn.release(stale)
	}
}

// late accounts for an attempt that returned after the outcome was
// decided. Called with o.mu held; unlocks.
func (o *operation[T]) late(i int, v T, err error, end time.Time) {
	rec := &o.rec[i]
	observed := !o.windowClosed
	elapsed := end.Sub(o.startOf(i))
	if observed {
		rec.Duration = Millis(elapsed)
		if err != nil {
			rec.Fate = FateCanceled
			rec.Error = err.Error()
			o.tally.observed++
		} else {
			rec.Fate = FateLate
			o.tally.late++
		}
	}
	fate := rec.Fate
	deliver := observed && o.pending == 0 && !o.delivered
	if deliver {
		o.delivered = true
		if o.window != nil {
			o.window.Stop()
		}
	}
	a := o.ctxs[i].a
	o.mu.Unlock()
	if observed {
		o.h.observe(Event{Kind: EventReport, Attempt: a, Elapsed: elapsed, Fate: fate, Err: err})
	}
	if err == nil {
		o.fn.release(v)
	}
	if deliver {
		o.deliver()
	}
}

// finish decides the operation: it wakes the caller, stops the delay timer,
// cancels the attempts still running and either delivers the receipt or
// opens the observation window. Called with o.mu held; unlocks.
func (o *operation[T]) finish(now time.Time) {
	o.finished = true
	o.s.gate.ended(o.wanted)
	if o.lateHedged {
		helped, counts := o.hedgeHelped()
		var took time.Duration
		if helped {
			took = now.Sub(o.startOf(o.res.idx))
		}
		o.s.gate.settle(now, o.pass, counts && !o.warm, helped, took)
	}
	if o.timer != nil {
		o.timerStopped = o.h.putDelayTimer(o.timer)
		o.timer = nil
	}
	o.tally.requested = uint8(o.pending)
	for i := range o.launched {
		// A loser already past the delay has taken at least that long; its
		// elapsed time is a valid lower bound for the adaptive quantile,
		// and leaving it out would hide exactly the tail hedging cut off.
		if o.rec[i].Fate == FateRunning {
			if elapsed := now.Sub(o.startOf(i)); elapsed >= o.delay {
				o.h.record(now, elapsed)
			}
		}
	}
	deliver := o.pending == 0
	if deliver {
		o.delivered = true
	} else {
		o.window = time.AfterFunc(o.s.p.ObserveWindow, o.closeWindow)
	}
	if o.wake != nil {
		o.wake <- struct{}{} // buffered: never blocks
	}
	o.mu.Unlock()
	if o.outcome == OutcomeCanceled {
		// The caller's cancellation (or the Timeout) is on its way to o.ctx,
		// if not there yet: the context package propagates a parent's to
		// its children right after closing the parent's Done. Let it arrive
		// first, so attempts see the real reason (DeadlineExceeded, say)
		// rather than our Canceled.
		<-o.ctx.Done()
	}
	o.cancel()
	if deliver {
		o.deliver()
	}
}

// hedgeHelped reports, for an operation that sent a hedge because an
// answer was late and has just been decided, whether the hedge helped: a
// hedge won. Running out of time (the policy's Timeout, or the caller's
// deadline) counts as no help; a caller who left, or attempts that all
// failed, as neither. Called with o.mu held, from finish.
func (o *operation[T]) hedgeHelped() (helped bool, counts bool) {
	switch o.outcome {
	case OutcomeWon:
		return o.res.idx > 0, true
	case OutcomeCanceled:
		// o.ctx ended: its parent did (the caller's deadline or
		// cancellation), or else the policy's Timeout passed.
		err := o.parent.Err()
		return false, err == nil || errors.Is(err, context.DeadlineExceeded)
	}
	return false, false
}

// closeWindow runs when the observation window ends with attempts still out.
func (o *operation[T]) closeWindow() {
	o.mu.Lock()
	if o.delivered {
		o.mu.Unlock()
		return
	}
	o.windowClosed = true
	o.delivered = true
	o.tally.unobserved = uint8(o.pending)
	for i := range o.launched {
		if o.rec[i].Fate == FateRunning {
			o.rec[i].Fate = FateUnobserved
		}
	}
	o.mu.Unlock()
	o.deliver()
}

// deliver hands the receipt to whoever wants it. It runs once, after
// delivered was set under o.mu, when nothing writes the tally or the
// records any more. The Receipt is built only if someone reads it.
func (o *operation[T]) deliver() {
	wanted := o.fn.wantsReceipt()
	if !wanted && !o.h.observes(EventReceipt) {
		return
	}
	r := o.buildReceipt()
	if wanted {
		o.fn.receipt(r)
	}
	o.h.observe(Event{Kind: EventReceipt, Receipt: &r})
}

// reusable reports, once run has returned, whether nothing can touch the
// operation any more, so its memory may serve another one: the primary ran
// on the caller's goroutine, no hedge was launched, the receipt was
// delivered there, and the delay timer was stopped before it could fire.
// A goroutine-run primary may still be finishing its report after the
// caller wakes, so such operations are never reused.
func (o *operation[T]) reusable() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hooks.inline && o.launched == 1 && o.pending == 0 && o.delivered &&
		o.window == nil && (o.s.p.MaxAttempts == 1 || o.timerStopped)
}

// startOf returns when attempt i was launched. It reads the attempt's
// context, which never changes after launch, so it needs no lock.
func (o *operation[T]) startOf(i int) time.Time {
	return o.start.Add(o.ctxs[i].start)
}
