// This file: the gateway's changes of state, logged once each as they
// happen (breakers, probation, readiness), for an operator who reads the
// log rather than the metrics. The overload gate's changes are logged by
// metrics.gateChanged.

package gateway

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
)

// stateLog logs the replicas' changes of state, which the replica set
// reports through replica.Config.OnChange, and the gateway's readiness.
type stateLog struct {
	// gen is, per replica name, the breaker generation last logged. By
	// name, not index: a Reload gives indexes to other replicas, while a
	// replica kept keeps its breaker, generations and all. A replica a
	// Reload removes is forgotten (forget), so that one added again under
	// its name, which starts with a new breaker, is not taken for stale.
	mu  sync.Mutex
	gen map[string]uint64

	// ready is readiness as last logged (see observeReady); readyMu
	// orders its changes, so that two observers cannot log one change
	// twice, or two in the wrong order.
	ready   atomic.Bool
	readyMu sync.Mutex
}

// init readies the log for New.
func (s *stateLog) init() {
	s.gen = map[string]uint64{}
	s.ready.Store(true) // every breaker starts closed
}

// forget drops what is known of the breakers of replicas that a Reload
// removed.
func (s *stateLog) forget(removed []string) {
	s.mu.Lock()
	for _, name := range removed {
		delete(s.gen, name)
	}
	s.mu.Unlock()
}

// replicaConfig returns c with OnChange reporting to the gateway's log,
// after any OnChange of the caller's: for New's replica set and each
// generation a Reload makes.
func (g *Gateway) replicaConfig(c replica.Config) replica.Config {
	caller := c.OnChange
	c.OnChange = func(e replica.Event) {
		if caller != nil {
			caller(e)
		}
		g.replicaChanged(e)
	}
	return c
}

// replicaChanged logs a change of a replica's state: a breaker's opening
// and probation at warn level (the replica is out of the rotation), its
// half-opening, closing and return from probation at info level. A
// breaker change older than one already logged (changes reach OnChange
// outside the set's locks, in any order) is not logged. Replicas are
// named by the event (see replica.Event.Name), which is right in every
// generation of the set; a change of a replica that a Reload removed, as
// its last attempts drain, is logged but not remembered. An opening or a
// closing may change readiness; a reopening cannot. (So does a half-opening, whose probe,
// while out, leaves the replica unavailable; but that lasts as long as
// one attempt, and logging it would put a "not ready" and a "ready"
// around every probe of a lone replica.)
func (g *Gateway) replicaChanged(e replica.Event) {
	switch e.Kind {
	case replica.ProbationEntered:
		g.log.Warn("replica on probation: shadow requests only", "replica", e.Name, "reason", e.Reason)
		return
	case replica.ProbationExited:
		if e.Reason == replica.ReasonRemoved { // by a Reload
			g.log.Info("replica off probation: removed from the backends", "replica", e.Name)
			return
		}
		g.log.Info("replica off probation: back in the rotation", "replica", e.Name, "reason", e.Reason)
		return
	}
	s := &g.states
	member := g.view.Load().member(e.Name) // a scan, for a change of state: rare
	s.mu.Lock()
	stale := e.Generation <= s.gen[e.Name]
	if !stale && member {
		s.gen[e.Name] = e.Generation
	}
	s.mu.Unlock()
	if stale {
		return
	}
	switch e.Kind {
	case replica.BreakerOpened:
		if e.Probe {
			// Unavailable before (its probe out) and after: readiness
			// is not this change's to move.
			g.log.Warn("breaker reopened: its probe failed", "replica", e.Name, "cooldown", e.Cooldown)
			return
		}
		g.log.Warn("breaker opened: replica refused attempts", "replica", e.Name, "failures", e.Failures, "cooldown", e.Cooldown)
	case replica.BreakerHalfOpen:
		g.log.Info("breaker half-open: one probe let through", "replica", e.Name)
		return
	case replica.BreakerClosed:
		g.log.Info("breaker closed: replica back in use", "replica", e.Name)
	}
	g.observeReady(time.Now())
}

// observeReady returns whether the gateway is ready at now (a replica
// would take a request: what /readyz answers) and logs a change of that
// since it was last observed: at warn level when it turns unready, at
// info level when it is ready again. It is observed as /readyz is asked
// and as breakers open and close: an open breaker whose cooldown is over
// counts as available before anything moves (its probe is let through),
// so a gateway nobody asks learns of that only when the probe closes the
// breaker.
func (g *Gateway) observeReady(now time.Time) bool {
	set := g.view.Load().defaultPool().set
	n := set.Available(now)
	ready := n > 0
	s := &g.states
	if s.ready.Load() == ready {
		return ready
	}
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	// Again, under the lock: another observer may have logged it, and
	// the set may have moved since.
	set = g.view.Load().defaultPool().set
	n = set.Available(now)
	if ready = n > 0; s.ready.Load() == ready {
		return ready
	}
	s.ready.Store(ready)
	if ready {
		g.log.Info("ready: a replica is available again", "available", n, "replicas", set.Len())
	} else {
		g.log.Warn("not ready: no replica available, every breaker is open", "replicas", set.Len())
	}
	return ready
}

// gateEvidence puts the overload gate's figures in words, for the line
// that says it reopened: what the signals it checks show now.
func gateEvidence(st *hedge.GateState) string {
	s := fmt.Sprintf("hedges won %d of %d", st.HedgeWins, st.Hedged)
	if st.RecentMedian > 0 && st.BaselineMedian > 0 {
		s += fmt.Sprintf("; median latency %v against a baseline of %v", st.RecentMedian.Round(time.Microsecond), st.BaselineMedian.Round(time.Microsecond))
	}
	return s + fmt.Sprintf("; %.0f%% of the concurrency limit in use; %.0f%% of the replicas unavailable", 100*st.Load.InUse, 100*st.Load.Unavailable)
}

// member reports whether a pool of v has the replica called name.
func (v *view) member(name string) bool {
	for _, p := range v.pools {
		if _, ok := p.set.Index(name); ok {
			return true
		}
	}
	return false
}
