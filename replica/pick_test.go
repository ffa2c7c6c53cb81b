package replica

import (
	"slices"
	"testing"
	"time"
)

// pickCounts makes n primary picks at now, each given back at once as
// Canceled (neutral: no latency sample, no breaker change), and counts the
// replicas chosen.
func pickCounts(t *testing.T, s *Set, n int, now time.Time) []int {
	t.Helper()
	counts := make([]int, s.Len())
	for range n {
		i, tk, ok := s.Pick(now, Attempt{})
		if !ok || tk.Replica() != i {
			t.Fatalf("PickPrimary = %d, %v, %v", i, tk, ok)
		}
		counts[i]++
		s.Done(tk, Canceled, now)
	}
	return counts
}

func TestPickPrimaryAvoidsSlowReplica(t *testing.T) {
	s := mustNew(t, 4, Config{})
	for i, d := range []time.Duration{10, 12, 11, 200} {
		setEWMA(s, i, d*time.Millisecond, t0)
	}
	const n = 4000
	c := pickCounts(t, s, n, t0)
	// Nothing is in flight, so cost is latency: the slow replica loses every
	// pair it is drawn in, and each fast one wins its pairs against slower
	// replicas.
	if c[3] != 0 {
		t.Errorf("slow replica chosen %d times of %d: %v", c[3], n, c)
	}
	// Replica 0 is in 3 of the 6 pairs and wins them all: 1/2. Replica 2
	// wins 2 of 6 (1/3), replica 1 one (1/6).
	for i, want := range []float64{1.0 / 2, 1.0 / 6, 1.0 / 3} {
		if got := float64(c[i]) / n; got < want-0.04 || got > want+0.04 {
			t.Errorf("replica %d chosen %.3f of the time, want %.3f: %v", i, got, want, c)
		}
	}
}

func TestPickPrimarySteersAwayFromBusyReplica(t *testing.T) {
	s := mustNew(t, 3, Config{})
	for i := range 3 {
		setEWMA(s, i, 10*time.Millisecond, t0)
	}
	// Replica 0 is as fast, but has 5 attempts in flight: it costs 6 times
	// as much as an idle one.
	for range 5 {
		pickAt(t, s, 0, t0)
	}
	c := pickCounts(t, s, 3000, t0)
	if c[0] != 0 || c[1] < 1300 || c[2] < 1300 {
		t.Errorf("picks %v: want none on the busy replica 0, the rest shared", c)
	}
}

func TestPickPrimaryBalancesInFlight(t *testing.T) {
	// Picks that are never given back: each pick weighs the in-flight
	// counts, so the load stays even even with no latency known at all.
	s := mustNew(t, 5, Config{})
	for i := range 1000 {
		if _, _, ok := s.Pick(t0.Add(time.Duration(i)), Attempt{}); !ok {
			t.Fatal("no pick")
		}
	}
	var in []int64
	for _, st := range s.Snapshot(t0) {
		in = append(in, st.InFlight)
	}
	if lo, hi := slices.Min(in), slices.Max(in); hi-lo > 10 {
		t.Errorf("in flight %v: spread %d, want <= 10", in, hi-lo)
	}
}

func TestPickPrimaryWithoutSamplesSpreadsEvenly(t *testing.T) {
	s := mustNew(t, 4, Config{})
	c := pickCounts(t, s, 4000, t0)
	for i, n := range c {
		if n < 800 || n > 1200 {
			t.Errorf("replica %d chosen %d times of 4000: %v", i, n, c)
		}
	}
}

func TestPickPrimarySingleReplica(t *testing.T) {
	s := mustNew(t, 1, Config{})
	setEWMA(s, 0, time.Hour, t0)
	for range 100 {
		i, tk, ok := s.Pick(t0, Attempt{})
		if !ok || i != 0 || tk.Replica() != 0 || tk.probe() {
			t.Fatalf("PickPrimary = %d, %+v, %v", i, tk, ok)
		}
	}
	if st := stateOfReplica(s, 0, t0); st.InFlight != 100 || st.Picks != 100 {
		t.Errorf("in flight %d, picks %d; want 100, 100", st.InFlight, st.Picks)
	}
}

// trip opens replica i's breaker at now with FailureThreshold failures.
func trip(t *testing.T, s *Set, i int, now time.Time) {
	t.Helper()
	for range s.cfg.FailureThreshold {
		s.Done(pickAt(t, s, i, now), Failure, now)
	}
	if st := stateOfReplica(s, i, now); st.Breaker != Open {
		t.Fatalf("replica %d: breaker %v after %d failures", i, st.Breaker, s.cfg.FailureThreshold)
	}
}

func TestPickPrimaryOnlyAmongAvailable(t *testing.T) {
	s := mustNew(t, 3, Config{FailureThreshold: 1})
	trip(t, s, 0, t0)
	trip(t, s, 2, t0)
	setEWMA(s, 1, time.Hour, t0) // slow, but the only one left
	c := pickCounts(t, s, 100, t0)
	if c[1] != 100 {
		t.Errorf("picks %v: want all on replica 1", c)
	}
	trip(t, s, 1, t0)
	for _, pick := range []func() (int, Ticket, bool){
		func() (int, Ticket, bool) { return s.Pick(t0, Attempt{}) },
		func() (int, Ticket, bool) { return s.Pick(t0, Attempt{Role: Hedge, Exclude: nil}) },
	} {
		if i, tk, ok := pick(); ok || i != -1 || tk != (Ticket{}) {
			t.Errorf("pick with every breaker open = %d, %+v, %v; want -1, zero, false", i, tk, ok)
		}
	}
	if n := s.Available(t0); n != 0 {
		t.Errorf("Available = %d, want 0", n)
	}
}

func TestPickPrimaryIsReproducibleWithSeed(t *testing.T) {
	seq := func(seed uint64) []int {
		s := mustNew(t, 5, Config{Seed: seed})
		var out []int
		for range 50 {
			i, tk, _ := s.Pick(t0, Attempt{})
			s.Done(tk, Canceled, t0)
			out = append(out, i)
		}
		return out
	}
	if a, b := seq(1), seq(1); !slices.Equal(a, b) {
		t.Errorf("same seed, different picks:\n%v\n%v", a, b)
	}
	if a, b := seq(1), seq(2); slices.Equal(a, b) {
		t.Errorf("seeds 1 and 2 gave the same 50 picks: %v", a)
	}
	// Seed 0 draws a random seed; it must still work.
	s, err := New(names(3), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.Pick(t0, Attempt{}); !ok {
		t.Error("no pick with a random seed")
	}
}

func TestCandidatesToleratesVanishedReplicas(t *testing.T) {
	// candidates counts replicas again after they were counted; if some
	// became unavailable in between, it returns those it still finds.
	s := mustNew(t, 3, Config{FailureThreshold: 1})
	trip(t, s, 0, t0)
	trip(t, s, 1, t0)
	off := s.offset(t0)
	for range 20 {
		a, b := s.candidates(3, off, false, nil) // 3 were counted, 1 is left
		if a != 2 && a != -1 || b != -1 {
			t.Fatalf("candidates = %d, %d", a, b)
		}
	}
	trip(t, s, 2, t0)
	if a, b := s.candidates(2, off, false, nil); a != -1 || b != -1 {
		t.Fatalf("candidates with none left = %d, %d", a, b)
	}
}

func TestPickAlternateNeverReturnsExcluded(t *testing.T) {
	s := mustNew(t, 4, Config{})
	for i, d := range []time.Duration{40, 10, 30, 20} {
		setEWMA(s, i, d*time.Millisecond, t0)
	}
	for mask := range 16 {
		var ex []int
		for j := range 4 {
			if mask&(1<<j) != 0 {
				ex = append(ex, j)
			}
		}
		i, tk, ok := s.Pick(t0, Attempt{Role: Hedge, Exclude: ex})
		if mask == 15 {
			if ok || i != -1 {
				t.Errorf("all excluded: PickAlternate = %d, %v", i, ok)
			}
			continue
		}
		if !ok || slices.Contains(ex, i) {
			t.Fatalf("exclude %v: PickAlternate = %d, %v", ex, i, ok)
		}
		// The lowest-cost replica left: order by EWMA is 1, 3, 2, 0.
		for _, want := range []int{1, 3, 2, 0} {
			if !slices.Contains(ex, want) {
				if i != want {
					t.Errorf("exclude %v: got %d, want %d", ex, i, want)
				}
				break
			}
		}
		s.Done(tk, Canceled, t0)
	}
}

func TestPickAlternateWeighsInFlight(t *testing.T) {
	s := mustNew(t, 3, Config{})
	setEWMA(s, 0, 10*time.Millisecond, t0)
	setEWMA(s, 1, 25*time.Millisecond, t0)
	setEWMA(s, 2, 40*time.Millisecond, t0)
	// Replica 0 with 2 in flight costs 30ms: replica 1 is cheaper.
	pickAt(t, s, 0, t0)
	pickAt(t, s, 0, t0)
	if i, _, _ := s.Pick(t0, Attempt{Role: Hedge, Exclude: nil}); i != 1 {
		t.Errorf("PickAlternate = %d, want 1", i)
	}
	// Ties (no samples anywhere) go to fewer in flight, then the lower index.
	s = mustNew(t, 3, Config{})
	pickAt(t, s, 0, t0)
	if i, _, _ := s.Pick(t0, Attempt{Role: Hedge, Exclude: nil}); i != 1 {
		t.Errorf("tie: PickAlternate = %d, want 1", i)
	}
}

func TestPickAlternateSkipsUnavailable(t *testing.T) {
	s := mustNew(t, 3, Config{FailureThreshold: 1})
	trip(t, s, 1, t0)
	if i, _, ok := s.Pick(t0, Attempt{Role: Hedge, Exclude: []int{0}}); !ok || i != 2 {
		t.Errorf("PickAlternate = %d, %v; want 2", i, ok)
	}
	if i, _, ok := s.Pick(t0, Attempt{Role: Hedge, Exclude: []int{0, 2}}); ok {
		t.Errorf("PickAlternate = %d, want none", i)
	}
	// Out-of-range indexes in exclude are harmless.
	if i, _, ok := s.Pick(t0, Attempt{Role: Hedge, Exclude: []int{-1, 7, 0}}); !ok || i != 2 {
		t.Errorf("PickAlternate = %d, %v; want 2", i, ok)
	}
}
