package replica

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestExactlyOneProbeUnderContention(t *testing.T) {
	for round := range 200 {
		s := mustNew(t, 2, Config{FailureThreshold: 1, Cooldown: time.Millisecond})
		now := t0
		for i := range 2 {
			_, tk, _ := s.Pick(now, Attempt{Role: Hedge, Exclude: []int{1 - i}})
			s.Done(tk, Failure, now)
		}
		later := now.Add(2 * time.Millisecond)
		var got [2]atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		var tickets sync.Map
		for k := range 32 {
			wg.Go(func() {
				<-start
				var i int
				var tk Ticket
				var ok bool
				if k%2 == 0 {
					i, tk, ok = s.Pick(later, Attempt{})
				} else {
					i, tk, ok = s.Pick(later, Attempt{Role: Hedge, Exclude: nil})
				}
				if ok {
					got[i].Add(1)
					tickets.Store(k, tk)
				}
			})
		}
		close(start)
		wg.Wait()
		if got[0].Load() != 1 || got[1].Load() != 1 {
			t.Fatalf("round %d: probes %d and %d, want exactly one each", round, got[0].Load(), got[1].Load())
		}
		tickets.Range(func(_, v any) bool { s.Done(v.(Ticket), Canceled, later); return true })
		for _, st := range s.Snapshot(later) {
			if st.InFlight != 0 || st.Breaker != HalfOpen || !st.Available {
				t.Fatalf("after cancelled probes: %+v", st)
			}
		}
	}
}
