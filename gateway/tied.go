package gateway

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
)

// Tied requests (Config.Tied) run on the same path as hedged ones: the
// engine sends the second copy as its one hedge, after TiedDelay, and the
// exchange picks replicas, holds breaker tickets and attempt slots, and
// feeds outcomes back as it does for hedges. What tied mode adds: the
// twin's replica is picked with the primary's (the first copy must name
// it as it leaves), each copy is stamped with its tie as it is launched
// (Rewrite), and an answer dropped for its twin never wins and counts as a
// cancellation that took no time. The rules, for operators:
// docs/gateway.md.

// Outcomes of tied-mode reads, as counted in tailgate_tied_requests_total.
const (
	tiedFirst  = "first"  // tied; the first copy's answer won
	tiedSecond = "second" // tied; the second copy's answer won
	tiedRetry  = "retry"  // tied; the first copy failed before the second was due, which went at once, untied, and won
	tiedUntied = "untied" // not tied: no second replica available, or the budget or deadline would not allow a second copy
	tiedFailed = "failed" // tied; no acceptable answer (every copy failed, a timeout, the client left)
)

var tiedOutcomes = []string{tiedFirst, tiedSecond, tiedRetry, tiedUntied, tiedFailed}

// Labels of tailgate_tied_copies_total and tailgate_tied_dropped_total.
var (
	tiedCopies  = []string{"first", "second"}
	tiedDropped = []string{tied.DroppedQueued, tied.DroppedOnArrival}
)

// tieState is a tied-mode read's tie, in its exchange.
type tieState struct {
	// vals backs the tie headers: the tie identity, then the PeerHeader
	// of the first copy (the twin's backend) and of the second (the
	// primary's). Written by tieTo, with the primary's pick.
	vals [3]string
	// copies[i]: copy i goes tied. Written under the engine's lock, by
	// Pick (and Admit, for a second copy refused a slot), before the copy
	// is launched.
	copies [2]bool
	// twinHeld: tickets[1] is the twin's, held for the second copy, not
	// yet given to an attempt.
	twinHeld bool
	exclude  [1]int // PickAlternate's argument for the twin
}

// tiedPolicy sets p up for tied requests as cfg asks: the delay, two
// attempts, the gate off, and a budget that lets every read be tied
// unless one is given.
func tiedPolicy(cfg Config, p *hedge.Policy) error {
	p.Delay = max(cfg.TiedDelay, time.Nanosecond) // the engine's smallest fixed delay: at once, in effect
	p.MaxAttempts = 2
	p.Gate.Disabled = true
	if p.Budget == nil {
		// One credit per read, so that every read may be tied, and room
		// to bank the credit of every read in flight: a read earns its
		// credit as it starts and spends it a delay later, and with the
		// default burst a burst of reads would lose theirs to the cap.
		b, err := hedge.NewBudget(1, float64(max(hedge.DefaultBudgetBurst, cfg.MaxInFlightRequests)))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		p.Budget = b
	}
	return nil
}

// tieable reports whether a read whose primary is picked at now, with ctx,
// may be tied: whether its second copy, due tiedDelay later, would pass
// the engine's checks that come before its pick, the budget and the
// deadline, as far as can be told now. The engine checks again when the
// copy is due. A read that is not tied goes alone: its primary names no
// twin, so no replica is sent a cancel for a copy that will never come,
// and its twin's replica is not held for nothing.
func (g *Gateway) tieable(v *view, now time.Time, ctx context.Context) bool {
	if g.budget.Credits() < 1 {
		return false
	}
	if !v.checkExpected {
		return true
	}
	need := g.expectedLatency(now)
	if need <= 0 {
		return true
	}
	dl := now.Add(v.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	return dl.Sub(now.Add(v.tiedDelay)) >= need
}

// tieTo makes the read tied as its primary is picked (replica primary, at
// now), if it may be and another replica is available: it picks the twin's
// replica, as a hedge's (never the primary, never one on probation), and
// holds its ticket for the second copy. Called from Pick, under the
// engine's lock, before the first copy is launched.
func (x *exchange) tieTo(now time.Time, primary int) {
	v := x.v
	if !x.g.tieable(v, now, x.req.Context()) {
		return
	}
	x.tie.exclude[0] = primary
	j, t, ok := x.pickAlternate(now, x.tie.exclude[:])
	if !ok {
		return
	}
	x.tickets[1], x.picked[1] = t, now
	x.tie.twinHeld = true
	x.tie.vals = [3]string{tied.NewTie(), v.origins[j], v.origins[primary]}
	x.tie.copies[0] = true
	x.g.metrics.tiedCopy(0)
}

// stampTie writes copy a's tie headers as it is launched: the first copy
// names its twin's backend, the second the primary's; an attempt that is
// not a tied copy goes without them. The primary's header map is the
// exchange's own (the engine shares it with the first copy); a second
// attempt's is a copy of it.
func (x *exchange) stampTie(a hedge.Attempt, out *http.Request) {
	h := out.Header
	switch {
	case a.Index < 2 && x.tie.copies[a.Index]:
		h[tied.TieHeader] = x.tie.vals[0:1:1]
		h[tied.PeerHeader] = x.tie.vals[1+a.Index : 2+a.Index : 2+a.Index]
	case a.Index > 0:
		delete(h, tied.TieHeader)
		delete(h, tied.PeerHeader)
	}
}

// pickTwin picks the replica of a tied-mode read's second attempt (the
// engine makes at most two). A read that was tied sends it to the twin
// picked with the primary: tied when it is due after the delay, untied
// when it goes at once because the first copy failed (nothing is left to
// cancel). A read that was not tied sends no second copy after the delay,
// since an untied duplicate would run in full; after a failure it sends
// one where a hedging gateway would (PickRetry).
func (x *exchange) pickTwin(now time.Time, a hedge.Attempt, used []int) (int, bool) {
	if a.Index != 1 {
		return -1, false // unreachable: two attempts at most
	}
	if x.tie.twinHeld {
		x.tie.twinHeld = false
		x.tie.copies[1] = a.Trigger == hedge.TriggerDelay
		return x.tickets[1].Replica(), true
	}
	if a.Trigger != hedge.TriggerFailure {
		return -1, false
	}
	i, t, ok := x.v.set.PickRetry(now, used)
	if ok {
		x.tickets[1], x.picked[1] = t, now
	}
	return i, ok
}

// tiedDone is Done's part in tied mode: it keeps the first copy's answer,
// to tell the winner, and makes an answer dropped for its twin neutral:
// a cancellation that took no time, so that it moves neither the breaker
// nor the replica's latency (peak-EWMA, probation samples). Its time
// measures how soon the twin started on another replica, and, for a
// second copy, which waits behind every first copy, the priority it was
// given, not its replica's health; as a lower bound it would price up, or
// send on probation, a replica for answering duplicates last.
func (x *exchange) tiedDone(a hedge.Attempt, resp *http.Response, o replica.Outcome, end time.Time) (replica.Outcome, time.Time) {
	if a.Index == 0 {
		x.first.Store(resp)
	}
	if tied.Dropped(resp) {
		x.g.metrics.tiedDrop(resp.Header.Get(tied.DroppedHeader))
		return replica.Canceled, x.picked[a.Index]
	}
	return o, end
}

// settleTie ends a tied-mode read, once the engine has returned: the
// twin's ticket, if the second copy was never sent, goes back (it took
// no time), and the read's outcome is counted.
func (g *Gateway) settleTie(x *exchange, resp *http.Response, err error) {
	if x.tie.twinHeld {
		x.tie.twinHeld = false
		x.v.set.Done(x.tickets[1], replica.Canceled, x.picked[1])
	}
	o := tiedRetry
	switch {
	case !x.tie.copies[0]:
		o = tiedUntied
	case err != nil:
		o = tiedFailed
	case resp == x.first.Load():
		o = tiedFirst
	case x.tie.copies[1]:
		o = tiedSecond
	}
	g.metrics.tiedRequest(o)
}
