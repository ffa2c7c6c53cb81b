package replica

import (
	"fmt"
	"math"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the synthetic start of time of every test.
var t0 = time.Unix(1_700_000_000, 0)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("http://r%d.test", i)
	}
	return out
}

func mustNew(tb testing.TB, n int, cfg Config) *Set {
	tb.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = 42
	}
	s, err := New(names(n), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// setEWMA gives replica i a peak-EWMA of d as of now, as if its last sample
// had been taken then.
func setEWMA(s *Set, i int, d time.Duration, now time.Time) {
	r := s.reps[i]
	r.ewma.Store(math.Float64bits(float64(d)))
	r.lastUpdate.Store(s.offset(now))
}

// pickAt takes a ticket for replica i specifically, through PickAlternate
// with every other replica excluded.
func pickAt(tb testing.TB, s *Set, i int, now time.Time) Ticket {
	tb.Helper()
	var ex []int
	for j := 0; j < s.Len(); j++ {
		if j != i {
			ex = append(ex, j)
		}
	}
	got, t, ok := s.Pick(now, Attempt{Role: Hedge, Exclude: ex})
	if !ok || got != i || t.Replica() != i {
		tb.Fatalf("pick of replica %d: got %d, ok %v", i, got, ok)
	}
	return t
}

// forceProbation puts replica i on probation at now, as the judge would.
func forceProbation(s *Set, i int, now time.Time) {
	off := s.offset(now)
	s.lin.prob.mu.Lock()
	defer s.lin.prob.mu.Unlock()
	p := &s.reps[i].judged
	p.status, p.since = OnProbation, off
	p.entries++
	s.reps[i].nextShadow.Store(off)
	s.reps[i].probation.Store(true)
	s.lin.onProbation.Add(1)
}

func stateOfReplica(s *Set, i int, now time.Time) State { return s.Snapshot(now)[i] }

func unsafeSizeofReplica() uintptr { return unsafe.Sizeof(replica{}) }
