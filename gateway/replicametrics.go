package gateway

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/tied"
)

// Attempt roles and outcomes, as tailgate_replica_attempts_total counts
// them. The outcomes are chosen for a dashboard that asks which replica
// fails and which is slow: failed says the first; lost for a primary
// (a hedge answered first), and timeout, say the second.
const (
	rolePrimary = iota
	roleHedge
	roleShadow
	nRoles
)

const (
	outWon      = iota // its answer was the one forwarded
	outLost            // another attempt's answer was forwarded first: it was cancelled, or its answer came later and was discarded (and, in tied mode, an answer dropped for its twin)
	outFailed          // a transport error or a refused answer (5xx, too large), whether it came before or after the winner
	outTimeout         // still running when the request's time ran out, no answer forwarded
	outCanceled        // still running when the client left (or, for a shadow, when the gateway closed)
	outAnswered        // a shadow's acceptable answer (read and discarded)
	nOutcomes
)

var (
	roleNames    = [nRoles]string{"primary", "hedge", "shadow"}
	outcomeNames = [nOutcomes]string{"won", "lost", "failed", "timeout", "canceled", "answered"}
	// roleOutcomes lists the outcomes each role can have: only those
	// series are made (at zero, so that rates and alerts see them from
	// the start).
	roleOutcomes = [nRoles][]int{
		rolePrimary: {outWon, outLost, outFailed, outTimeout, outCanceled},
		roleHedge:   {outWon, outLost, outFailed, outTimeout, outCanceled},
		roleShadow:  {outAnswered, outFailed, outTimeout, outCanceled},
	}
)

// replicaAttempts counts attempts by replica, role and outcome. Each view
// (see reload.go) holds the children of its backends, made as it is
// built, so that counting is an index and an atomic add: no label lookup,
// no allocation.
type replicaAttempts struct {
	vec *prometheus.CounterVec
}

// attemptCounters are one replica's children, by role and outcome; nil where
// the role has no such outcome.
type attemptCounters [nRoles][nOutcomes]prometheus.Counter

func newReplicaAttempts() replicaAttempts {
	return replicaAttempts{vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_replica_attempts_total",
		Help: "Attempts sent to each replica (its backend URL as configured), by role (primary, hedge, shadow) and outcome: " +
			"won (its answer was forwarded), " +
			"lost (another attempt answered first: a primary that loses was slower than its hedge; in tied mode, also an answer dropped for its twin), " +
			"failed (a transport error or a refused answer: 5xx, too large), " +
			"timeout (running when the request's time ran out, nothing forwarded), " +
			"canceled (running when the client left; a shadow: when the gateway closed), " +
			"answered (shadows only: an acceptable answer, discarded).",
	}, []string{"replica", "role", "outcome"})}
}

// counters returns the children of backends, by index: those of a backend
// already counted are the same children, so its counts go on.
func (r replicaAttempts) counters(backends []string) []attemptCounters {
	c := make([]attemptCounters, len(backends))
	for i, b := range backends {
		name := replicaLabel(b)
		for role, outs := range roleOutcomes {
			for _, o := range outs {
				c[i][role][o] = r.vec.WithLabelValues(name, roleNames[role], outcomeNames[o])
			}
		}
	}
	return c
}

// forget removes the series of a backend that a reload removed: a
// replica that is gone should not be reported at zero rate for ever.
func (r replicaAttempts) forget(backend string) {
	r.vec.DeletePartialMatch(prometheus.Labels{"replica": replicaLabel(backend)})
}

func (c *attemptCounters) count(role, outcome int) { c[role][outcome].Inc() }

// replicaLabel is a backend URL as a label value: as configured, but
// without user information, should a backend ever carry some (New refuses
// them today), since labels end up in dashboards and alerts.
func replicaLabel(backend string) string {
	if !strings.Contains(backend, "@") {
		return backend
	}
	u, err := url.Parse(backend)
	if err != nil || u.User == nil {
		return backend
	}
	u.User = nil
	return u.String()
}

// attemptTally settles each attempt of one read to an outcome. An attempt
// that failed is counted as it ends. Any other (an accepted answer, or one
// stopped by its context) depends on what became of the read, which the
// engine decides after the attempt's Done and which serve learns when
// RoundTripWith returns: whichever of the attempt's end and that decision
// comes second counts it. Losers may end after the handler has returned.
//
// It is laid out compactly (80 bytes), since it lives in every exchange:
// the exchange stays within the allocation size class it had without it.
type attemptTally struct {
	mu       sync.Mutex
	decided  bool
	winner   int8  // attempt index, -1: none won
	noWinner uint8 // the outcome of the attempts still open when none won
	// The attempts that ended before the read was decided, by index:
	// their replica, and their accepted answer (nil: stopped).
	waiting [hedge.MaxAttemptsCap]bool
	replica [hedge.MaxAttemptsCap]int32
	resp    [hedge.MaxAttemptsCap]*http.Response
}

// attemptDone is Done's part: it counts attempt a, which ended with resp
// and the engine's verdict, or leaves it to decide.
func (x *exchange) attemptDone(a hedge.Attempt, resp *http.Response, verdict error) {
	role := rolePrimary
	if a.IsHedge() {
		role = roleHedge
	}
	switch {
	case x.rt.tied && tied.Dropped(resp):
		x.settled(a.Index, a.Target, role, outLost) // its twin started elsewhere first
		return
	case verdict != nil && !errors.Is(verdict, context.Canceled) && !errors.Is(verdict, context.DeadlineExceeded):
		x.settled(a.Index, a.Target, role, outFailed)
		return
	}
	if verdict != nil {
		resp = nil // stopped: no answer of its own
	}
	t := &x.tally
	t.mu.Lock()
	if !t.decided {
		t.waiting[a.Index], t.replica[a.Index], t.resp[a.Index] = true, int32(a.Target), resp
		t.mu.Unlock()
		return
	}
	o := t.settle(a.Index)
	t.mu.Unlock()
	x.settled(a.Index, a.Target, role, o)
}

// settled counts attempt i, of role, to replica, with outcome o, and ends
// its span if the read is traced.
func (x *exchange) settled(i, replica, role, o int) {
	x.rt.pool.counts[replica].count(role, o)
	if x.trace != nil {
		x.trace.endAttempt(i, o)
	}
}

// decide records what became of the read, once RoundTripWith has returned
// resp and err (left is true when the client has gone), and counts the
// attempts that ended before.
func (x *exchange) decide(resp *http.Response, err error, left bool) {
	t := &x.tally
	t.mu.Lock()
	defer t.mu.Unlock()
	t.decided, t.winner, t.noWinner = true, -1, outCanceled
	if err == nil {
		for i, w := range t.waiting {
			if w && t.resp[i] == resp {
				t.winner = int8(i)
			}
		}
	} else if !left && errors.Is(err, context.DeadlineExceeded) {
		t.noWinner = outTimeout
	}
	for i, w := range t.waiting {
		if w {
			role := rolePrimary
			if i > 0 {
				role = roleHedge
			}
			x.settled(i, int(t.replica[i]), role, t.settle(i))
			t.waiting[i], t.resp[i] = false, nil
		}
	}
}

// settle returns the outcome of attempt i, which was not a failure, once
// the read is decided.
func (t *attemptTally) settle(i int) int {
	switch int(t.winner) {
	case i:
		return outWon
	case -1:
		return int(t.noWinner)
	}
	return outLost
}

// msSeconds converts milliseconds to seconds by way of whole nanoseconds:
// dividing by 1e3 twice over (ns to ms in replica, ms to s here) left a
// quarter of the medians at figures such as 0.0012961999999999999 in
// /metrics; a whole number of nanoseconds divided once prints as it should
// (0.0012962). A nanosecond is finer than any latency measured.
func msSeconds(ms float64) float64 { return math.Round(ms*1e6) / 1e9 }

// shadowOutcome is a shadow's outcome by its error (nil: an acceptable
// answer).
func shadowOutcome(err error) int {
	switch {
	case err == nil:
		return outAnswered
	case errors.Is(err, context.DeadlineExceeded):
		return outTimeout // ShadowTimeout
	case errors.Is(err, context.Canceled):
		return outCanceled // Close
	}
	return outFailed
}
