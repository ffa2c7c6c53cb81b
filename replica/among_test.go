package replica

import (
	"slices"
	"testing"
	"time"
)

func TestPickPrimaryAmongStaysInSubset(t *testing.T) {
	s := mustNew(t, 6, Config{})
	among := []int{1, 4}
	seen := map[int]int{}
	for range 200 {
		i, tk, ok := s.Pick(t0, Attempt{Among: among})
		if !ok || !slices.Contains(among, i) {
			t.Fatalf("pick %d ok %v, want one of %v", i, ok, among)
		}
		seen[i]++
		s.Done(tk, Success, t0.Add(time.Millisecond))
	}
	if seen[1] == 0 || seen[4] == 0 {
		t.Errorf("picks %v: power of two choices should use both", seen)
	}
}

func TestPickPrimaryAmongPrefersCheaper(t *testing.T) {
	s := mustNew(t, 4, Config{})
	setEWMA(s, 2, 50*time.Millisecond, t0)
	setEWMA(s, 3, 5*time.Millisecond, t0)
	for range 50 {
		// With two candidates, power of two choices compares both.
		if i, tk, _ := s.Pick(t0, Attempt{Among: []int{2, 3}}); i != 3 {
			t.Fatalf("picked %d, want the cheaper 3", i)
		} else {
			s.Done(tk, Canceled, t0)
		}
	}
}

func TestPickAmongSkipsOpenBreakerAndProbation(t *testing.T) {
	s := mustNew(t, 4, Config{FailureThreshold: 1, Probation: Probation{Enabled: true}})
	trip(t, s, 1, t0)
	forceProbation(s, 2, t0)
	for range 20 {
		i, tk, ok := s.Pick(t0, Attempt{Among: []int{1, 2, 3}})
		if !ok || i != 3 {
			t.Fatalf("pick %d ok %v, want 3: 1's breaker is open, 2 is on probation", i, ok)
		}
		s.Done(tk, Success, t0)
	}
	// No owner admits: not ok, and no fallback to the one on probation.
	if i, _, ok := s.Pick(t0, Attempt{Among: []int{1, 2}}); ok {
		t.Fatalf("picked %d among an open breaker and a replica on probation", i)
	}
	if i, _, ok := s.Pick(t0, Attempt{Role: Hedge, Among: []int{1, 2, 3}, Exclude: []int{3}}); ok {
		t.Fatalf("alternate %d: only 3 admits and it is excluded", i)
	}
	if i, _, ok := s.Pick(t0, Attempt{Role: Retry, Among: []int{1, 2, 3}, Exclude: []int{3}}); ok {
		t.Fatalf("retry %d: among never falls back to probation", i)
	}
	// Out-of-range indices are skipped.
	if i, tk, ok := s.Pick(t0, Attempt{Role: Hedge, Among: []int{-1, 9, 0}, Exclude: nil}); !ok || i != 0 {
		t.Fatalf("alternate %d ok %v, want 0", i, ok)
	} else {
		s.Done(tk, Success, t0)
	}
}

func TestPickAmongDoesNotAllocate(t *testing.T) {
	s := mustNew(t, 8, Config{})
	among, used := []int{2, 5}, []int{2}
	if n := testing.AllocsPerRun(100, func() {
		_, tk, _ := s.Pick(t0, Attempt{Among: among})
		s.Done(tk, Canceled, t0)
		_, tk, _ = s.Pick(t0, Attempt{Role: Hedge, Among: among, Exclude: used})
		s.Done(tk, Canceled, t0)
	}); n != 0 {
		t.Errorf("picks among allocate %v", n)
	}
}
