package hedge

import (
	"errors"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/replica"
)

// RouteSteering picks over its route (a hedge to a replica no earlier
// attempt used), says ErrNoTarget when the route has none, and gives each
// outcome to the replica: failures open its breaker, and the next picks
// go elsewhere.
func TestRouteSteering(t *testing.T) {
	set, err := replica.New([]string{"a", "b"}, replica.Config{FailureThreshold: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := &RouteSteering{Route: set.Route(nil, false)}
	first, err := s.Pick(Attempt{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hedge, err := s.Pick(Attempt{Index: 1, Trigger: TriggerDelay}, []int{first})
	if err != nil || hedge == first {
		t.Fatalf("hedge: %d, %v; want the other replica than %d", hedge, err, first)
	}
	s.Done(Attempt{Index: 0, Target: first}, Result{Verdict: errors.New("503"), Elapsed: time.Millisecond})
	s.Done(Attempt{Index: 1, Target: hedge}, Result{Elapsed: time.Millisecond})
	if _, err := s.Pick(Attempt{Index: 2, Trigger: TriggerDelay}, []int{first, hedge}); !errors.Is(err, ErrNoTarget) {
		t.Errorf("a third attempt over two replicas both used: %v, want ErrNoTarget", err)
	}

	// One more failure of first's replica opens its breaker: as the
	// primary, or as a hedge past the other replica.
	s = &RouteSteering{Route: set.Route(nil, false)}
	a := Attempt{}
	i, _ := s.Pick(a, nil)
	if i != first {
		s.Done(Attempt{Index: 0, Target: i}, Result{Elapsed: time.Millisecond})
		a = Attempt{Index: 1, Trigger: TriggerDelay}
		if i, _ = s.Pick(a, []int{i}); i != first {
			t.Fatalf("hedge past %d: %d", 1-first, i)
		}
	}
	a.Target = i
	s.Done(a, Result{Verdict: errors.New("503"), Elapsed: time.Millisecond})
	for range 20 {
		s = &RouteSteering{Route: set.Route(nil, false)}
		if i, err := s.Pick(Attempt{}, nil); err != nil || i == first {
			t.Fatalf("primary %d (%v) with %d's breaker open", i, err, first)
		}
		s.Done(Attempt{Index: 0, Target: 1 - first}, Result{Elapsed: time.Millisecond})
	}
}
