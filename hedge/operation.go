package hedge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/internal/opctx"
)

// operation is the state of one Do: the attempts it launched, each with its
// own record, and the outcome, under mu. It is driven by the goroutines
// that report into it (attempts, the delay timer, the caller when its
// context ends). Every entry point locks mu, changes the state, unlocks,
// and then carries out what the change asks for (see effects): cancelling
// the attempts, freeing results, delivering the receipt. One method,
// decide, ends the operation.
//
// The primary runs on the caller's goroutine (run); hedges run in their
// own. An operation that never hedges costs no goroutine and no channel.
type operation[T any] struct {
	h       *Hedger
	s       *settings // the policy and gate in force as it began, to the end
	fn      calls[T]
	steer   Steering           // nil: attempt i goes to target (first+i) mod targets
	ctx     context.Context    // what attempts run under: parent, plus the policy's Timeout
	cancel  context.CancelFunc // cancels every attempt; called once the outcome is decided (nil: own)
	own     *opctx.Ctx         // ctx, when the parent allows it (opctx.Usable); holds the parent either way; its owner's (see init)
	ctx0    *attemptCtx        // the primary's context; its owner's (see init)
	start   time.Time
	delay   time.Duration
	expect  time.Duration
	timer   *delayTimer
	timerAt delayTarget

	// The counts and indexes are small (at most MaxAttemptsCap) and the
	// times offsets from start: every byte here is allocated and cleared
	// for each request, hedged or not (BenchmarkInMemory: see
	// docs/performance.md).
	mu         sync.Mutex
	phase      phase
	outcome    Outcome
	launched   int8
	pending    int8 // attempts launched and not yet reported
	winner     int8 // the winning attempt, or -1
	kept       int8 // the attempt whose refused result Do returns if nothing wins, or -1
	wanted     bool
	lateHedged bool  // a hedge went because an answer was late: the gate learns how it fared
	graced     bool  // the delay timer fired late and waits once more (see stallLag)
	warm       bool  // the delay was an adaptive delay's warm-up guess
	timerLive  bool  // the delay timer could not be stopped: its function may yet run, into o
	first      int32 // without a Steering, attempt i goes to target (first+i) mod targets
	fireAt     time.Duration
	pickedAt   time.Duration // when the pick under way was asked for (see roundTrip.Pick)
	tally      tally
	hx         *hedgeState[T] // see more

	// Per-attempt records (see rec): the primary's inline, a hedge's
	// allocated as it is launched (the first one's with hx), so that an
	// operation that never hedges stays one allocation. An attempt's
	// context is handed out: it never moves.
	a0 attempt[T]
}

// hedgeState is what only an operation that hedges, or waits for
// attempts still out, needs, in one allocation with its first hedge's
// record.
type hedgeState[T any] struct {
	used   [MaxAttemptsCap]int             // Pick's argument, kept here so that it does not escape
	pass   gatePass                        // what the gate granted the operation, handed back at the end
	window *time.Timer                     // the observation window, once decided with attempts out
	wake   chan struct{}                   // made when the caller waits
	hedges [MaxAttemptsCap - 1]*attempt[T] // the hedges' records, by index - 1
	first  attempt[T]                      // the first hedge's record
	taken  bool                            // first is in use
}

// rec returns the record of attempt i, which has been launched.
func (o *operation[T]) rec(i int) *attempt[T] {
	if i == 0 {
		return &o.a0
	}
	return o.hx.hedges[i-1]
}

// more returns the operation's hedgeState, made when first asked for.
// Called with o.mu held.
func (o *operation[T]) more() *hedgeState[T] {
	if o.hx == nil {
		o.hx = new(hedgeState[T])
	}
	return o.hx
}

// phase is where an operation is: running until an outcome is decided, then
// decided until its receipt is final, then delivered.
type phase uint8

const (
	running phase = iota
	decided
	delivered
)

// attempt is one attempt's record: its context (which holds its Attempt
// and start), what became of it, and, once it has reported, its result.
// Its AttemptRecord is made only when a receipt is (see buildReceipt).
type attempt[T any] struct {
	ctx      *attemptCtx // c for a hedge, the operation's ctx0 for the primary
	c        attemptCtx
	start    time.Duration // when it started, from the operation's start
	fate     Fate
	duration time.Duration // until it reported; zero if it never did
	v        T
	err      error
	verdict  error // why its result was refused (nil: accepted)
}

// effects are what a change of an operation's state asks for once its lock
// is released: user code (Release, receipts) and cancellation never run
// under it.
type effects[T any] struct {
	cancel     bool // cancel the attempts still out
	waitParent bool // ... once the parent's own cancellation has arrived
	deliver    bool // the receipt is final
	free       [2]T // results to Release
	nfree      int
}

func (fx *effects[T]) release(v T) {
	fx.free[fx.nfree] = v
	fx.nfree++
}

// init readies o, which is new (or zeroed), to run under ctx. own and ctx0
// are where the context of the operation (when it is its own) and that of
// its primary live: what the operation hands out to the calls, which may
// keep it, is apart from the rest of its state, which its owner may then
// reuse once run has returned (see reusable).
func (o *operation[T]) init(ctx context.Context, h *Hedger, fn calls[T], steer Steering, first int, own *opctx.Ctx, ctx0 *attemptCtx) {
	names := fn.targets()
	o.h, o.fn, o.steer, o.own, o.ctx0 = h, fn, steer, own, ctx0
	o.own.Reset(ctx) // see parent
	if n := len(names); n > 1 {
		o.first = int32((first%n + n) % n)
	}
	o.s = h.cur.Load()
	o.winner, o.kept = -1, -1
}

// reusable reports, once run has returned, whether nothing but its owner
// refers to o any more, so that the owner may reuse it (all but own and
// ctx0, which were handed out): the receipt is delivered; no hedge was
// tried nor did the caller wait (no goroutine of an attempt, no
// observation window: hx is made for any of them); and the delay timer
// was stopped before it fired. It reads without the lock: hx is made
// only while running, under the lock the caller took since; and without
// it, only the caller's goroutine has decided and delivered.
func (o *operation[T]) reusable() bool {
	return o.hx == nil && o.phase == delivered && !o.timerLive
}

// parent returns the caller's context, which own holds whether or not it
// is the operation's context: one copy of it fewer in every request's
// state.
func (o *operation[T]) parent() context.Context { return o.own.Parent() }

// run runs the operation on the caller's goroutine and returns its result.
func (o *operation[T]) run() (T, error) {
	h := o.h
	var zero T
	now := time.Now()
	o.start = now
	h.touch(now)
	if err := o.parent().Err(); err != nil {
		// Nothing is launched, but the caller is still owed its receipt.
		o.outcome, o.phase = OutcomeCanceled, delivered
		o.deliver()
		return zero, fmt.Errorf("hedge: %w", err)
	}
	h.budget.Admit()
	o.s.gate.addOp(now)
	o.delay, o.expect, o.warm = h.delays.current(now)
	h.observe(Event{Kind: EventStart, Delay: o.delay})
	o.mu.Lock()
	switch t := o.s.p.Timeout; {
	case opctx.Usable(o.parent()):
		// The gateway's requests (their server's context is an
		// opctx.Ctx) and a client's without a context of its own.
		var end time.Time
		if t > 0 {
			end = now.Add(t)
		}
		o.own.Start(end)
		o.ctx = o.own
		if t > 0 && (o.s.p.MaxAttempts <= 1 || o.delay >= t) {
			o.own.Arm(now) // else at the delay, if still running (armDeadline)
		}
	case t > 0:
		o.ctx, o.cancel = context.WithTimeout(o.parent(), t)
	default:
		o.ctx, o.cancel = context.WithCancel(o.parent())
	}

	primary := Attempt{Trigger: TriggerPrimary}
	target, err := o.pick(primary, now)
	if err != nil {
		o.outcome = OutcomeFailed
		var fx effects[T]
		o.decide(now, &fx)
		o.mu.Unlock()
		o.after(&fx)
		if errors.Is(err, ErrNoTarget) {
			return zero, err
		}
		return zero, fmt.Errorf("%w: %w", ErrNoTarget, err)
	}
	primary.Target = target
	o.launch(now, primary, false)
	if o.s.p.MaxAttempts > 1 {
		o.timerAt.op = o
		o.timer = h.delayTimer(&o.timerAt)
		o.arm(now)
	}
	o.mu.Unlock()

	x := o.a0.ctx
	v, err := o.fn.call(x, x.a)
	if !o.report(0, v, err) {
		o.wait()
	}

	// Decided: the outcome, the winner and the kept result no longer
	// change, so they are read without the lock.
	switch o.outcome {
	case OutcomeWon:
		w := o.rec(int(o.winner))
		return w.v, w.err
	case OutcomeCanceled:
		return zero, fmt.Errorf("hedge: %w", o.ctx.Err())
	}
	k := o.rec(int(o.kept))
	if k.err != nil {
		return k.v, fmt.Errorf("hedge: %d attempt(s) failed, last: %w", o.launched, k.err)
	}
	return k.v, fmt.Errorf("%w after %d attempt(s): %w", ErrNotAccepted, o.launched, k.verdict)
}

// wait blocks until the outcome is decided, or the operation's context
// ends (the caller left, or the policy's Timeout passed), which decides it.
func (o *operation[T]) wait() {
	o.mu.Lock()
	if o.phase != running {
		o.mu.Unlock()
		return
	}
	wake := make(chan struct{}, 1)
	o.more().wake = wake
	o.armDeadline(time.Now())
	o.mu.Unlock()
	select {
	case <-wake:
	case <-o.ctx.Done():
		o.mu.Lock()
		var fx effects[T]
		if o.phase == running {
			o.outcome = OutcomeCanceled
			o.decide(time.Now(), &fx)
		}
		o.mu.Unlock()
		o.after(&fx)
	}
}

// armDeadline arms the Timeout of an operation on its own context: at its
// hedge delay, at its first hedge and when its caller waits, whichever
// comes first; an operation decided sooner never arms it (see opctx.Init).
// Called with o.mu held.
func (o *operation[T]) armDeadline(now time.Time) {
	if o.cancel == nil {
		o.own.Arm(now)
	}
}

// pick chooses the target of attempt a. Called with o.mu held.
func (o *operation[T]) pick(a Attempt, now time.Time) (int, error) {
	o.pickedAt = now.Sub(o.start)
	n := max(len(o.fn.targets()), 1)
	if o.steer == nil {
		return (int(o.first) + a.Index) % n, nil
	}
	var used []int
	if o.launched > 0 {
		used = o.hx.used[:o.launched]
	}
	for i := range used {
		used[i] = o.rec(i).ctx.a.Target
	}
	t, err := o.steer.Pick(a, used)
	if err == nil && (t < 0 || t >= n) {
		err = fmt.Errorf("%w: target %d out of range [0, %d)", ErrNoTarget, t, n)
	}
	return t, err
}

// launch records attempt a, has its owner prepare it and, unless it is
// the primary (which run calls), starts it in a goroutine of its own.
// Called with o.mu held.
func (o *operation[T]) launch(now time.Time, a Attempt, spawn bool) {
	x := &o.a0
	switch {
	case a.Index == 0:
	case !o.hx.taken:
		x, o.hx.taken = &o.hx.first, true
	default:
		x = new(attempt[T])
	}
	if a.Index == 0 {
		x.ctx = o.ctx0
	} else {
		x.ctx = &x.c
	}
	*x.ctx = attemptCtx{Context: o.ctx, a: a}
	x.start = now.Sub(o.start)
	if a.Index > 0 {
		o.hx.hedges[a.Index-1] = x
	}
	o.launched++
	o.pending++
	o.h.observe(Event{Kind: EventLaunch, Attempt: a})
	o.fn.prepare(x.ctx, a)
	if spawn {
		o.armDeadline(now)
		go o.attempt(x)
	}
}

func (o *operation[T]) targetName(t int) string {
	if names := o.fn.targets(); t < len(names) {
		return names[t]
	}
	return ""
}

// attempt runs a hedge in its own goroutine.
func (o *operation[T]) attempt(x *attempt[T]) {
	v, err := o.fn.call(x.ctx, x.ctx.a)
	o.report(x.ctx.a.Index, v, err)
}

// onDelay runs when the hedge delay expires.
func (o *operation[T]) onDelay() {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	// A timer re-armed while its previous firing was on its way, or
	// handed from a finished operation to this one still armed for that
	// one's delay (see delayTimer), may fire early: only a firing at or
	// after the time it was armed for counts, and an early one arms it
	// again for the rest.
	since := now.Sub(o.start)
	if o.phase != running {
		return
	}
	if since < o.fireAt {
		o.timer.arm(now, o.fireAt-since)
		return
	}
	o.armDeadline(now) // at its delay and still running
	if !o.graced {
		lag := since - o.fireAt
		o.h.late.note(now, lag)
		// An adaptive delay's timer held up by a stall of the process
		// waits once more: the read's answer may be in, unread. See
		// stallLag.
		if g := stallGrace(lag); g > 0 && o.s.p.Delay == 0 {
			o.graced = true
			o.fireAt = since + g
			o.timer.arm(now, g)
			return
		}
	}
	o.graced = false
	o.tryHedge(TriggerDelay, now)
}

// A delay timer that fires stallLag or more after its time was held up by
// the process (a pause of the host, of the runtime, a burst of work), not
// by the read: the read's answer may be in already, unread. Go runs a
// timer's function on a goroutine of its own, put first in its
// processor's queue, while the goroutines that network events woke wait
// until the queues drain and the poller is consulted; so after a stall a
// hedge would be sent for reads whose answers had arrived in time. Such a
// firing waits graceWait more, and the hedge goes only if the read is
// still undecided then. A straggler's hedge is late by that much more; a
// hedge on the process's own stall is not sent, and spends no budget.
//
// stallLag sits above the lateness of an idle process's timers: Go's
// Linux poller sleeps in whole milliseconds (epoll_wait), so a timer due
// in 2.13ms fires at about 3.1ms when nothing else wakes the process. No
// answer waits unread meanwhile (its arrival wakes the poller), and
// waiting after such a firing held lab classes' point reads' hedges back
// to twice their delay (at 0.5ms, nearly every one of them waited).
//
// Only an adaptive delay waits so, as only it has the lateness floor (see
// lateness): both are its guard against hedging the process's own jitter.
// A fixed delay is its owner's word.
const (
	stallLag  = 1500 * time.Microsecond
	graceWait = time.Millisecond
)

// stallGrace returns how much longer a delay timer that fired lag late
// waits before its hedge: 0 unless lag says the process stalled. A
// variable for tests.
var stallGrace = func(lag time.Duration) time.Duration {
	if lag < stallLag {
		return 0
	}
	return graceWait
}

// tryHedge launches the next attempt unless a limit says no, and reports
// whether it did. Checks run cheapest and least consuming first; the
// budget credit is taken before the pick, and handed back if the pick
// finds no target. Called with o.mu held.
func (o *operation[T]) tryHedge(trig Trigger, now time.Time) bool {
	if o.ctx.Err() != nil {
		return false // the caller has left or time is up; not a suppression
	}
	a := Attempt{Index: int(o.launched), Trigger: trig}
	if a.Index >= o.s.p.MaxAttempts {
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
	if !o.h.budget.TrySpend() {
		o.s.gate.refuse(pass, now)
		o.suppress(a, SuppressBudget)
		return false
	}
	o.more()
	// The pick comes last, so that a Steering that takes resources for the
	// attempt (a breaker ticket, an attempt slot) only does so for a hedge
	// that every other limit has let through.
	target, err := o.pick(a, now)
	if err != nil {
		o.h.budget.refund()
		o.s.gate.refuse(pass, now)
		r := SuppressNoTarget
		if errors.Is(err, ErrNoCapacity) {
			r = SuppressCapacity
		}
		o.suppress(a, r)
		return false
	}
	a.Target = target
	o.launch(now, a, true)
	if delayed {
		o.s.gate.launched(pass)
		if !o.lateHedged {
			o.lateHedged, o.hx.pass = true, pass
		}
		o.hx.pass.probe = o.hx.pass.probe || pass.probe
	}
	if int(o.launched) < o.s.p.MaxAttempts && o.timer != nil {
		o.arm(now) // the next hedge, one delay later
	}
	return true
}

// arm sets the delay timer for a hedge due one delay after now (never
// earlier: see lateness). Called with o.mu held.
func (o *operation[T]) arm(now time.Time) {
	o.fireAt = now.Sub(o.start) + o.delay
	o.timer.arm(now, o.delay)
}

// suppress accounts for hedge a, not sent for reason r. Called with o.mu
// held.
func (o *operation[T]) suppress(a Attempt, r SuppressReason) {
	o.tally.suppressed[r]++
	o.h.observe(Event{Kind: EventSuppress, Reason: r, Attempt: Attempt{Index: a.Index}})
	if s, ok := o.steer.(interface {
		Suppressed(a Attempt, r SuppressReason)
	}); ok {
		s.Suppressed(Attempt{Index: a.Index, Trigger: a.Trigger}, r)
	}
}

// report applies the result of attempt i, in the goroutine that ran it,
// and reports whether the operation was decided by then (so that the
// primary's caller need not look again, under the lock, in wait).
func (o *operation[T]) report(i int, v T, err error) (decided bool) {
	// time.Since reads only the monotonic clock: cheaper than time.Now.
	end := o.start.Add(time.Since(o.start))
	x := o.rec(i) // set at launch, before the attempt could run
	elapsed := end.Sub(o.start) - x.start
	verdict := o.fn.accept(v, err)
	o.fn.done(x.ctx.a, v, verdict, elapsed)

	o.mu.Lock()
	var fx effects[T]
	if o.phase == running && o.ctx.Err() != nil {
		// The caller has left, or time is up, and the cancellation
		// reached this attempt before anyone decided the operation: end it
		// now, so that this attempt and any other still out count as
		// cancelled by the caller.
		o.outcome = OutcomeCanceled
		o.decide(end, &fx)
	}
	o.pending--
	if o.phase != running {
		o.late(x, v, err, elapsed, &fx)
		o.mu.Unlock()
		o.after(&fx)
		return true
	}
	x.duration = elapsed
	x.v, x.err, x.verdict = v, err, verdict
	if verdict == nil {
		x.fate = FateWon
		o.outcome, o.winner = OutcomeWon, int8(i)
		o.h.record(end, elapsed)
		o.h.observe(Event{Kind: EventReport, Attempt: x.ctx.a, Elapsed: elapsed, Fate: FateWon})
		o.h.observe(Event{Kind: EventWin, Attempt: x.ctx.a, Elapsed: end.Sub(o.start)})
		o.decide(end, &fx)
		o.mu.Unlock()
		o.after(&fx)
		return true
	}
	x.fate = FateRejected
	if err != nil {
		x.fate = FateFailed
	}
	o.h.observe(Event{Kind: EventReport, Attempt: x.ctx.a, Elapsed: elapsed, Fate: x.fate, Err: verdict})
	o.keep(x, &fx)
	// A failure is a reason to hedge at once.
	if !o.tryHedge(TriggerFailure, end) && o.pending == 0 {
		o.outcome = OutcomeFailed
		o.decide(end, &fx)
	}
	decided = o.phase != running
	o.mu.Unlock()
	o.after(&fx)
	return decided
}

// keep makes x's refused result the one Do returns if nothing wins, unless
// the one kept already says more: a result (a 503, say) is never displaced
// by a later error, since the caller learns more from the server's answer
// than from a reset; a result that is not an answer at all ranks below
// both. A result displaced, or not kept, is freed like a loser's. Called
// with o.mu held.
func (o *operation[T]) keep(x *attempt[T], fx *effects[T]) {
	void := errors.Is(x.verdict, ErrNotAnAnswer)
	var k *attempt[T]
	if o.kept >= 0 {
		k = o.rec(int(o.kept))
	}
	if k == nil || errors.Is(k.verdict, ErrNotAnAnswer) || !void && (x.err == nil || k.err != nil) {
		if k != nil && k.err == nil {
			fx.release(k.v)
		}
		o.kept = int8(x.ctx.a.Index)
		return
	}
	if x.err == nil {
		fx.release(x.v)
	}
}

// late accounts for attempt x, which reported after the outcome was
// decided: a loser that stopped, or finished its work anyway. Called with
// o.mu held.
func (o *operation[T]) late(x *attempt[T], v T, err error, elapsed time.Duration, fx *effects[T]) {
	fate := FateUnobserved
	if o.phase == decided {
		x.duration, x.err = elapsed, err
		if err != nil {
			x.fate = FateCanceled
			o.tally.observed++
		} else {
			x.fate = FateLate
			o.tally.late++
		}
		fate = x.fate
		if o.pending == 0 {
			o.phase = delivered
			o.hx.window.Stop()
			fx.deliver = true
		}
		o.h.observe(Event{Kind: EventReport, Attempt: x.ctx.a, Elapsed: elapsed, Fate: fate, Err: err})
	}
	if err == nil {
		fx.release(v)
	}
}

// decide ends the operation with o.outcome (and o.winner, for a win), at
// now: the one place an outcome is decided. It settles the gate, stops the
// delay timer, wakes a waiting caller, and either makes the receipt final
// or opens the observation window for the attempts still out. It adds to
// fx what is to be done once o.mu is released. Called with o.mu held,
// while running.
func (o *operation[T]) decide(now time.Time, fx *effects[T]) {
	o.phase = decided
	o.s.gate.ended(o.wanted)
	if o.lateHedged {
		helped, counts := o.hedgeHelped()
		var took time.Duration
		if helped {
			took = now.Sub(o.start) - o.rec(int(o.winner)).start
		}
		o.s.gate.settle(now, o.hx.pass, counts && !o.warm, helped, took)
	}
	if o.timer != nil {
		o.timerLive = !o.h.putDelayTimer(o.timer)
		o.timer = nil
	}
	if o.outcome != OutcomeFailed && o.kept >= 0 {
		// A refused result kept in case nothing won is nobody's now.
		if k := o.rec(int(o.kept)); k.err == nil {
			fx.release(k.v)
		}
		o.kept = -1
	}
	o.tally.requested = uint8(o.pending)
	for i := range o.launched {
		// A loser already past the delay has taken at least that long; its
		// elapsed time is a valid lower bound for the adaptive quantile,
		// and leaving it out would hide exactly the tail hedging cut off.
		x := o.rec(int(i))
		if x.fate == FateRunning && i != o.winner {
			if elapsed := now.Sub(o.start) - x.start; elapsed >= o.delay {
				o.h.record(now, elapsed)
			}
		}
	}
	if o.pending == 0 {
		o.phase = delivered
		fx.deliver = true
	} else {
		o.more().window = time.AfterFunc(o.s.p.ObserveWindow, o.closeWindow)
	}
	if o.hx != nil && o.hx.wake != nil {
		o.hx.wake <- struct{}{} // buffered: never blocks
	}
	fx.cancel = true
	// The caller's cancellation (or the Timeout) is on its way to o.ctx,
	// if not there yet: the context package propagates a parent's to its
	// children right after closing the parent's Done. Let it arrive first,
	// so attempts see the real reason (DeadlineExceeded, say) rather than
	// our Canceled.
	fx.waitParent = o.outcome == OutcomeCanceled
}

// after carries out fx, with o.mu released.
func (o *operation[T]) after(fx *effects[T]) {
	if fx.waitParent {
		<-o.ctx.Done()
	}
	if fx.cancel {
		if o.cancel != nil {
			o.cancel()
		} else {
			o.own.Cancel()
		}
	}
	for i := range fx.nfree {
		o.fn.release(fx.free[i])
	}
	if fx.deliver {
		o.deliver()
	}
}

// hedgeHelped reports, for an operation that sent a hedge because an
// answer was late and is being decided, whether the hedge helped: a hedge
// won. Running out of time (the policy's Timeout, or the caller's
// deadline) counts as no help; a caller who left, or attempts that all
// failed, as neither. Called with o.mu held, from decide.
func (o *operation[T]) hedgeHelped() (helped bool, counts bool) {
	switch o.outcome {
	case OutcomeWon:
		return o.winner > 0, true
	case OutcomeCanceled:
		// o.ctx ended: its parent did (the caller's deadline or
		// cancellation), or else the policy's Timeout passed.
		err := o.parent().Err()
		return false, err == nil || errors.Is(err, context.DeadlineExceeded)
	}
	return false, false
}

// closeWindow runs when the observation window ends with attempts still out.
func (o *operation[T]) closeWindow() {
	o.mu.Lock()
	if o.phase != decided {
		o.mu.Unlock()
		return
	}
	o.phase = delivered
	o.tally.unobserved = uint8(o.pending)
	for i := range o.launched {
		if x := o.rec(int(i)); x.fate == FateRunning {
			x.fate = FateUnobserved
		}
	}
	o.mu.Unlock()
	o.deliver()
}

// deliver hands the receipt to whoever wants it. It runs once, after the
// phase turned delivered under o.mu, when nothing writes the tally or the
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
