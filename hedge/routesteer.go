package hedge

import (
	"time"

	"github.com/tailgate-dev/tailgate/replica"
)

// RouteSteering is the Steering of one operation over a replica set: its
// Route (from replica.Set's Route, RouteHome or RouteCold, which choose
// the mode: latency-aware, tied, limited to a key's owners) picks each
// attempt's replica, and Done gives the outcome to the replica's breaker
// and latency. A Transport with Targets steers each request with one;
// the gateway, tied.Transport and hedgegrpc's Replicas embed one in their
// own Steering, which adds what each needs (attempt slots, ties).
type RouteSteering struct {
	Route replica.Route
}

// Pick implements Steering: the primary by latency, a hedge to a replica
// no earlier attempt used, an attempt after a failure the same but
// falling back at last to a replica on probation.
func (s *RouteSteering) Pick(a Attempt, used []int) (int, error) {
	return s.PickAt(a, used, time.Now())
}

// PickAt is Pick at now, for a caller that has read the clock already (on
// a virtual machine a read of the clock costs as much as the rest of a
// pick).
func (s *RouteSteering) PickAt(a Attempt, used []int, now time.Time) (int, error) {
	i, ok := s.Route.Pick(a.Index, a.Trigger == TriggerFailure, used, now)
	if !ok {
		return -1, ErrNoTarget
	}
	return i, nil
}

// Done implements Steering: the attempt's outcome (Result.ReplicaOutcome)
// goes to its replica, and its ticket back.
func (s *RouteSteering) Done(a Attempt, r Result) {
	o, elapsed := r.ReplicaOutcome()
	s.Route.Done(a.Index, o, elapsed)
}
