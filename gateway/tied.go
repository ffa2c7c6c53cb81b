package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
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
	tiedDropped = []string{tiedwire.DroppedQueued, tiedwire.DroppedOnArrival}
)

// tiedPolicy sets p up for tied requests as cfg asks: the delay, two
// attempts, the gate off. (Its budget, one credit per read, is the
// route's own: see newRoute.)
func tiedPolicy(cfg Config, p *hedge.Policy) {
	p.Delay = max(cfg.TiedDelay, time.Nanosecond) // the engine's smallest fixed delay: at once, in effect
	p.Adaptive.Quantile = 0
	p.MaxAttempts = 2
	p.Gate.Disabled = true
}

// tieable reports whether a read of the route, of h's class, whose
// primary is picked at now, with ctx, may be tied: whether its second copy, due tiedDelay later, would pass
// the engine's checks that come before its pick, the budget and the
// deadline, as far as can be told now. The engine checks again when the
// copy is due. A read that is not tied goes alone: its primary names no
// twin, so no replica is sent a cancel for a copy that will never come,
// and its twin's replica is not held for nothing.
func (rt *route) tieable(h *hedge.Hedger, now time.Time, ctx context.Context) bool {
	if rt.keep.budget.Credits() < 1 {
		return false
	}
	if !rt.checkExpected {
		return true
	}
	need := h.Expected()
	if need <= 0 {
		return true
	}
	dl := now.Add(rt.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	return dl.Sub(now.Add(rt.tiedDelay)) >= need
}

// stampTie writes copy a's tie headers as it is launched: the first copy
// names its twin's backend, the second the primary's; an attempt that is
// not a tied copy goes without them. The primary's header map is the
// exchange's own (the engine shares it with the first copy); a second
// attempt's is a copy of it.
func (x *exchange) stampTie(a hedge.Attempt, out *http.Request) {
	h := out.Header
	switch {
	case x.Route.Tied(a.Index):
		peer := x.Route.Replica(0) // the second copy names the primary's backend
		if a.Index == 0 {
			peer, _ = x.Route.Twin()
		}
		h[tiedwire.TieHeader] = []string{x.tieID}
		h[tiedwire.PeerHeader] = []string{x.rt.pool.origins[peer]}
	case a.Index > 0:
		delete(h, tiedwire.TieHeader)
		delete(h, tiedwire.PeerHeader)
	}
}

// tiedDone is Done's part in tied mode: it keeps the first copy's answer,
// to tell the winner, and counts an answer dropped for its twin. (Such an
// answer is no answer: tied.Accept refuses it with hedge.ErrNotAnAnswer,
// which makes it neutral for its replica's breaker and latency.)
func (x *exchange) tiedDone(a hedge.Attempt, resp *http.Response) {
	if a.Index == 0 {
		x.first.Store(resp)
	}
	if tied.Dropped(resp) {
		x.g.metrics.tiedDrop(resp.Header.Get(tiedwire.DroppedHeader))
	}
}

// settleTie counts a tied-mode read's outcome, once the engine has
// returned.
func (g *Gateway) settleTie(x *exchange, resp *http.Response, err error) {
	o := tiedRetry
	switch {
	case !x.Route.Tied(0):
		o = tiedUntied
	case err != nil:
		o = tiedFailed
	case resp == x.first.Load():
		o = tiedFirst
	case x.Route.Tied(1):
		o = tiedSecond
	}
	g.metrics.tiedRequest(o)
}
