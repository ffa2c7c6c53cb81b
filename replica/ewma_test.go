package replica

import (
	"math"
	"testing"
	"time"
)

// sample gives replica i a latency sample of rtt, finishing at end.
func sample(t *testing.T, s *Set, i int, rtt time.Duration, end time.Time) {
	t.Helper()
	s.Done(pickAt(t, s, i, end.Add(-rtt)), Success, end)
}

func ewmaOf(s *Set, i int, now time.Time) float64 {
	return s.ewmaAt(s.reps[i], s.offset(now))
}

func TestEWMARisesAtOnceOnSpike(t *testing.T) {
	s := mustNew(t, 1, Config{})
	if st := stateOfReplica(s, 0, t0); st.EWMA != 0 {
		t.Fatalf("EWMA before any sample = %v", st.EWMA)
	}
	now := t0.Add(time.Second)
	sample(t, s, 0, 10*time.Millisecond, now)
	if st := stateOfReplica(s, 0, now); st.EWMA != 10*time.Millisecond {
		t.Fatalf("first sample: EWMA %v, want 10ms", st.EWMA)
	}
	now = now.Add(time.Millisecond)
	sample(t, s, 0, 250*time.Millisecond, now)
	if st := stateOfReplica(s, 0, now); st.EWMA != 250*time.Millisecond || st.EWMAMs != 250 {
		t.Fatalf("spike: EWMA %v (%vms), want 250ms at once", st.EWMA, st.EWMAMs)
	}
}

func TestEWMADecaysTowardLowerSamples(t *testing.T) {
	const decay = 2 * time.Second
	s := mustNew(t, 1, Config{DecayTime: decay})
	now := t0
	sample(t, s, 0, 100*time.Millisecond, now)
	want := float64(100 * time.Millisecond)
	for _, gap := range []time.Duration{500 * time.Millisecond, time.Second, 0, 3 * time.Second, time.Millisecond} {
		now = now.Add(gap)
		const rtt = float64(10 * time.Millisecond)
		sample(t, s, 0, 10*time.Millisecond, now)
		w := math.Exp(-float64(gap) / float64(decay))
		want = want*w + rtt*(1-w)
		if got := ewmaOf(s, 0, now); math.Abs(got-want) > 1e-6*want {
			t.Fatalf("after a 10ms sample %v later: EWMA %.0fns, want %.0fns", gap, got, want)
		}
	}
	if want > float64(20*time.Millisecond) {
		t.Fatalf("test too weak: EWMA still %.0fns", want)
	}
}

func TestEWMADecaysWhenRead(t *testing.T) {
	// A replica priced out by one spike must become worth trying again as
	// time passes, or it would never be picked and never get a sample.
	s := mustNew(t, 2, Config{DecayTime: 10 * time.Second})
	sample(t, s, 0, 2*time.Second, t0)
	sample(t, s, 1, 20*time.Millisecond, t0)
	later := t0.Add(10 * time.Second)
	want := float64(2*time.Second) / math.E
	if got := ewmaOf(s, 0, later); math.Abs(got-want) > 1 {
		t.Fatalf("EWMA one time constant later = %.0f, want %.0f", got, want)
	}
	if st := stateOfReplica(s, 0, later); st.EWMA != time.Duration(want+0.5) {
		t.Errorf("Snapshot EWMA %v, want %v", st.EWMA, time.Duration(want+0.5))
	}
	// Replica 1 keeps answering in 20ms; replica 0 is not picked while its
	// decayed spike costs more, and is tried again once 2s·e^(-t/10s) falls
	// below replica 1's, itself 20ms decayed for the 980ms since its last
	// sample: after 10s·(ln(100)+0.098), about 47.03s.
	for sec := 1; sec <= 60; sec++ {
		now := t0.Add(time.Duration(sec) * time.Second)
		i, tk, _ := s.Pick(now, Attempt{})
		s.Done(tk, Success, now.Add(20*time.Millisecond))
		if i == 0 {
			if sec != 48 {
				t.Errorf("spiked replica tried again after %ds, want 48s", sec)
			}
			return
		}
	}
	t.Error("spiked replica never tried again")
}

func TestEWMACanceledIsALowerBoundAndClampsNegative(t *testing.T) {
	s := mustNew(t, 1, Config{})
	sample(t, s, 0, 40*time.Millisecond, t0)
	// A cancelled attempt shorter than the estimate says nothing new.
	s.Done(pickAt(t, s, 0, t0.Add(-10*time.Millisecond)), Canceled, t0)
	if got := ewmaOf(s, 0, t0); got != float64(40*time.Millisecond) {
		t.Fatalf("a short cancelled attempt moved the EWMA to %.0f", got)
	}
	// One that ran longer took at least that long: the peak follows it, so
	// a replica whose attempts hang until a hedge wins cannot look fast.
	s.Done(pickAt(t, s, 0, t0.Add(-300*time.Millisecond)), Canceled, t0)
	if got := ewmaOf(s, 0, t0); got != float64(300*time.Millisecond) {
		t.Fatalf("EWMA %.0f after a 300ms cancelled attempt, want 300ms", got)
	}
	s = mustNew(t, 1, Config{})
	sample(t, s, 0, 40*time.Millisecond, t0)
	// An outcome reported before its start (a caller's clock mix-up) counts
	// as 0, not as a negative latency.
	tk := pickAt(t, s, 0, t0.Add(time.Second))
	s.Done(tk, Success, t0)
	if got := ewmaOf(s, 0, t0); got != float64(40*time.Millisecond) {
		t.Errorf("EWMA %.0f after a sample at an earlier time, want unchanged 40ms (weight 0)", got)
	}
	if got := s.reps[0].lastUpdate.Load(); got != s.offset(t0) {
		t.Errorf("lastUpdate moved: %d", got)
	}
}

func TestEWMALastUpdateNeverMovesBack(t *testing.T) {
	s := mustNew(t, 1, Config{})
	sample(t, s, 0, 50*time.Millisecond, t0.Add(time.Second))
	sample(t, s, 0, 60*time.Millisecond, t0.Add(500*time.Millisecond)) // finished "earlier"
	if got, want := s.reps[0].lastUpdate.Load(), s.offset(t0.Add(time.Second)); got != want {
		t.Errorf("lastUpdate %d, want %d", got, want)
	}
	if got := ewmaOf(s, 0, t0.Add(time.Second)); got != float64(60*time.Millisecond) {
		t.Errorf("EWMA %.0f, want the 60ms peak", got)
	}
}
