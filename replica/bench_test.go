package replica

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkPickPrimaryDone measures one attempt's bookkeeping: a primary
// pick and its Done with a latency sample, over 3 and 10 healthy replicas.
func BenchmarkPickPrimaryDone(b *testing.B) {
	for _, n := range []int{3, 10} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			s := benchSet(b, n, 0)
			now := t0
			for b.Loop() {
				now = now.Add(time.Microsecond)
				_, t, ok := s.Pick(now, Attempt{})
				if !ok {
					b.Fatal("no pick")
				}
				s.Done(t, Success, now.Add(time.Duration(t.Replica()+1)*time.Millisecond))
			}
		})
	}
}

// BenchmarkPickPrimaryDoneParallel is the same from every P at once: the
// shared generator and the replicas' counters are contended.
// With a seed, the generator is one shared counter; without, the runtime's
// per-thread one.
func BenchmarkPickPrimaryDoneParallel(b *testing.B) {
	for _, seed := range []uint64{0, 1} {
		b.Run("seed="+strconv.FormatUint(seed, 10), func(b *testing.B) {
			b.ReportAllocs()
			benchParallel(b, benchSet(b, 3, seed))
		})
	}
}

func benchParallel(b *testing.B, s *Set) {
	b.RunParallel(func(pb *testing.PB) {
		// Each goroutine keeps its own clock: a shared one would be a
		// contended line of the benchmark's, not of the Set's.
		now := t0
		for pb.Next() {
			now = now.Add(time.Microsecond)
			_, t, ok := s.Pick(now, Attempt{})
			if !ok {
				b.Fatal("no pick")
			}
			s.Done(t, Success, now.Add(time.Duration(t.Replica()+1)*time.Millisecond))
		}
	})
}

// BenchmarkHedgedRequest is a request that hedges: a primary, an alternate
// excluding it, the alternate wins and the primary is cancelled.
func BenchmarkHedgedRequest(b *testing.B) {
	b.ReportAllocs()
	s := benchSet(b, 3, 0)
	now := t0
	var ex [1]int
	for b.Loop() {
		now = now.Add(time.Microsecond)
		i, p, _ := s.Pick(now, Attempt{})
		ex[0] = i
		_, h, ok := s.Pick(now, Attempt{Role: Hedge, Exclude: ex[:]})
		if !ok {
			b.Fatal("no alternate")
		}
		s.Done(h, Success, now.Add(2*time.Millisecond))
		s.Done(p, Canceled, now.Add(2*time.Millisecond))
	}
}

// BenchmarkProbation is a request's bookkeeping with probation on, as the
// gateway does it: a primary, its Done (which judges every Window/10, here
// every 500ms of synthetic time, so once per 500k requests), and a look
// for a due shadow. "none" has no replica on probation: the shadow check
// is one atomic load. "one" has one of 3 on probation: picks skip it, and
// a shadow is due every second.
func BenchmarkProbation(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "none"
		if on {
			name = "one"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			s, err := New(names(3), Config{Probation: Probation{Enabled: true}})
			if err != nil {
				b.Fatal(err)
			}
			now := t0
			if on {
				forceProbation(s, 2, now)
			}
			for b.Loop() {
				now = now.Add(time.Microsecond)
				_, t, ok := s.Pick(now, Attempt{})
				if !ok {
					b.Fatal("no pick")
				}
				s.Done(t, Success, now.Add(time.Duration(t.Replica()+1)*time.Millisecond))
				if _, t, ok := s.Pick(now, Attempt{Role: Shadow}); ok {
					s.Done(t, Success, now.Add(3*time.Millisecond))
				}
			}
		})
	}
}

// BenchmarkJudge measures one probation judgement over full sample rings:
// Done runs one every Window/10 (500ms by default).
func BenchmarkJudge(b *testing.B) {
	for _, n := range []int{3, 10, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			s, err := New(names(n), Config{Probation: Probation{Enabled: true}})
			if err != nil {
				b.Fatal(err)
			}
			now := t0
			for k := range MaxProbationSamples {
				for i := range n {
					t, _ := s.admit(i, s.offset(now))
					s.Done(t, Success, now.Add(time.Duration(k%7+i)*time.Millisecond))
				}
			}
			for b.Loop() {
				s.updateProbation(now)
			}
		})
	}
}

// benchSet returns a Set of n replicas as production runs it: seed 0 means
// the runtime's generator.
func benchSet(b *testing.B, n int, seed uint64) *Set {
	s, err := New(names(n), Config{Seed: seed})
	if err != nil {
		b.Fatal(err)
	}
	return s
}
