package hedge

import (
	"fmt"
	"time"
)

// Update changes the policy of a running Hedger to p, defaults filled in
// as New fills them. Operations under way finish under the policy they
// began with; those that begin after Update returns run under p. The
// state the Hedger has learnt is kept where p allows:
//
//   - Delay and Adaptive: the latency window is kept, and the delay is
//     recomputed from it at once (an adaptive delay needs no new warm-up
//     if the window holds enough latencies). Adaptive.Window must not
//     change: the window is sized for it.
//   - MaxAttempts, Timeout, IgnoreDeadline and ObserveWindow apply to the
//     operations that begin after the change.
//   - Gate: unchanged settings keep the gate and its evidence. Other
//     settings start a fresh gate (open, unproven), since its evidence
//     was weighed against the old ones; the latencies behind its slowdown
//     signal come from the latency window, which is kept. The new gate's
//     GateState.Changes go on from the old one's, and if the old one was
//     shut, its reopening is reported to the Observer. A nil Gate.Load
//     keeps the function in force.
//   - Budget: nil keeps the Hedger's Budget, with its credits; another
//     Budget is an error. Change a Budget's fraction and burst with
//     Budget.SetRates, which every Hedger sharing it sees.
//   - Observer: the one given to New stays; p's is not used.
//
// Update fails, changing nothing, with an error wrapping ErrInvalid.
// It is safe to call concurrently with operations and with itself.
func (h *Hedger) Update(p Policy) error {
	h.update.Lock()
	defer h.update.Unlock()
	old := h.cur.Load()
	if p.Budget != nil && p.Budget != h.budget {
		return fmt.Errorf("%w: a Hedger's budget cannot be replaced (change its rates with Budget.SetRates)", ErrInvalid)
	}
	p.Budget = h.budget
	keepLoad := p.Gate.Load == nil
	if keepLoad {
		p.Gate.Load = old.p.Gate.Load
	}
	p, err := p.withDefaults()
	if err != nil {
		return err
	}
	if p.Adaptive.Window != old.p.Adaptive.Window {
		return fmt.Errorf("%w: adaptive window %v cannot change from %v on a running Hedger", ErrInvalid, p.Adaptive.Window, old.p.Adaptive.Window)
	}
	p.Observer = old.p.Observer

	now := time.Now()
	g := old.gate
	if !keepLoad || !sameGate(p.Gate, old.p.Gate) {
		g = newGate(p.Gate, h.delays.lat, h.notify)
	}
	// The delay first: an operation that sees the new settings must not
	// start with the old delay.
	h.delays.set(p, now)
	if g == old.gate {
		h.cur.Store(&settings{p: p, gate: g})
		return nil
	}
	last := old.gate.retire()
	g.takeOver(last, now)
	h.cur.Store(&settings{p: p, gate: g})
	if !last.Open() && h.notify != nil {
		h.notify(g.snapshot(now))
	}
	return nil
}

// sameGate reports whether a and b have the same settings, Load aside
// (functions do not compare).
func sameGate(a, b Gate) bool {
	return a.Window == b.Window && a.MinWinRate == b.MinWinRate && a.Slowdown == b.Slowdown && a.Disabled == b.Disabled
}

// retire stops g reporting changes, for a gate replaced by Update, and
// returns its last state. Operations that began under it may still
// evaluate it; nobody hears of it any more.
func (g *gate) retire() GateState {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.retired.Store(true)
	return g.state
}

// takeOver makes g, not yet published, the successor of a gate whose last
// state was last: its count of changes goes on from there (one more if the
// old gate was shut, for its reopening now), and so does its count of
// probes, both documented as counting since the Hedger was created.
func (g *gate) takeOver(last GateState, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.state.Changes = last.Changes
	if !last.Open() {
		g.state.Changes++
		g.state.Since = now
	}
	g.probes.Store(last.Probes)
	g.state.Probes = last.Probes
}
