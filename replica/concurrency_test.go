package replica

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentPicksAndOutcomes runs requests (a primary and sometimes a
// hedge, with random outcomes and synthetic times that advance) from many
// goroutines at once, with breakers opening, probing and closing under them
// and an admin reader taking snapshots, then checks that the books balance.
func TestConcurrentPicksAndOutcomes(t *testing.T) {
	const (
		workers  = 8
		requests = 2000
	)
	s := mustNew(t, 4, Config{FailureThreshold: 3, Cooldown: time.Millisecond, MaxCooldown: 8 * time.Millisecond})
	var (
		clock   atomic.Int64 // synthetic nanoseconds since t0
		tickets atomic.Int64
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	now := func() time.Time { return t0.Add(time.Duration(clock.Add(int64(50 * time.Microsecond)))) }
	outcome := func(rng *rand.Rand, i int) Outcome {
		// Replica 3 fails most of the time, so its breaker keeps moving.
		p := rng.Float64()
		switch {
		case i == 3 && p < 0.8, p < 0.05:
			return Failure
		case p < 0.15:
			return Canceled
		}
		return Success
	}
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for range requests {
				i, primary, ok := s.Pick(now(), Attempt{})
				if !ok {
					continue
				}
				tickets.Add(1)
				if primary.Replica() != i {
					t.Errorf("ticket for %d, pick %d", primary.Replica(), i)
				}
				if rng.IntN(3) == 0 { // hedge
					j, hedge, ok := s.Pick(now(), Attempt{Role: Hedge, Exclude: []int{i}})
					if ok {
						tickets.Add(1)
						if j == i {
							t.Errorf("hedge went to the primary's replica %d", i)
						}
						s.Done(hedge, outcome(rng, j), now())
					}
				}
				s.Done(primary, outcome(rng, i), now())
			}
		})
	}
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, st := range s.Snapshot(now()) {
				if st.Breaker > HalfOpen || st.Breaker == Open && st.OpenUntil.IsZero() {
					t.Errorf("torn state: %+v", st)
				}
			}
			_ = s.Available(now())
		}
	})
	wg.Wait()
	close(stop)
	reader.Wait()

	var picks, outcomes, moved uint64
	for _, st := range s.Snapshot(now()) {
		if st.InFlight != 0 {
			t.Errorf("%s: %d in flight at the end", st.Name, st.InFlight)
		}
		if st.Breaker == HalfOpen && !st.Available {
			t.Errorf("%s: probe slot taken at the end", st.Name)
		}
		picks += st.Picks
		outcomes += st.Successes + st.Failures + st.Canceled
		moved += st.Generation
		if st.Stale > st.Successes+st.Failures+st.Canceled {
			t.Errorf("%s: more stale outcomes than outcomes: %+v", st.Name, st)
		}
	}
	if picks != outcomes || picks != uint64(tickets.Load()) {
		t.Errorf("picks %d, outcomes %d, tickets %d: want all equal", picks, outcomes, tickets.Load())
	}
	if moved == 0 {
		t.Error("no breaker ever moved: the test exercised nothing")
	}
	t.Logf("tickets %d, breaker transitions %d", tickets.Load(), moved)
}
