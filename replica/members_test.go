package replica

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// byName returns the state of the replica called name in s, at now.
func byName(t *testing.T, s *Set, name string, now time.Time) State {
	t.Helper()
	i, ok := s.Index(name)
	if !ok {
		t.Fatalf("no replica %q in %v", name, s.Snapshot(now))
	}
	return s.Snapshot(now)[i]
}

// A replica kept by Next is the same replica: its breaker, latency,
// counters and in-flight count carry over. A new one starts cold.
func TestNextKeepsStateOfKeptReplicas(t *testing.T) {
	n := names(3) // r0, r1, r2
	s := mustNew(t, 3, Config{FailureThreshold: 1, Cooldown: time.Minute})
	now := t0
	s.Done(pickAt(t, s, 0, now), Success, now.Add(7*time.Millisecond))
	s.Done(pickAt(t, s, 1, now), Failure, now) // opens r1's breaker
	held := pickAt(t, s, 2, now)               // in flight across the change
	before := s.Snapshot(now)

	next, err := s.Next([]string{n[1], "http://new.test", n[0]}, Config{FailureThreshold: 1, Cooldown: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if next.Len() != 3 || next.Name(0) != n[1] || next.Name(1) != "http://new.test" || next.Name(2) != n[0] {
		t.Fatalf("members %v", next.Snapshot(now))
	}
	if got := byName(t, next, n[0], now); got.EWMA != before[0].EWMA || got.EWMA == 0 || got.Successes != 1 || got.Picks != 1 {
		t.Errorf("r0 in the next generation %+v, want its latency %v and counts kept", got, before[0].EWMA)
	}
	if got := byName(t, next, n[1], now); got.Breaker != Open || got.Available || got.Generation != before[1].Generation || got.Failures != 1 {
		t.Errorf("r1 in the next generation %+v, want its open breaker kept", got)
	}
	if got := byName(t, next, "http://new.test", now); got.EWMA != 0 || got.Breaker != Closed || got.Picks != 0 || !got.Available {
		t.Errorf("new replica %+v, want cold", got)
	}
	// Outcomes reach the shared replica through either generation.
	s.Done(held, Success, now.Add(3*time.Millisecond))
	if st := s.Snapshot(now)[2]; st.InFlight != 0 || st.Successes != 1 {
		t.Errorf("r2, left out, after its attempt ended: %+v", st)
	}
	i, tk, ok := next.Pick(now, Attempt{})
	if !ok || next.Name(i) == n[1] {
		t.Fatalf("pick %d (%v), r1's breaker is open", i, ok)
	}
	next.Done(tk, Success, now.Add(time.Millisecond))
	if got := s.Snapshot(now); next.Name(i) == n[0] && got[0].Successes != 2 {
		t.Errorf("r0 seen from the older generation: %+v", got[0])
	}
}

// A replica left out is drained: an attempt in flight to it ends normally
// through the generation it came from, and the next generation never
// picks it, for a primary, a hedge or a retry.
func TestNextDrainsARemovedReplica(t *testing.T) {
	n := names(3)
	s := mustNew(t, 3, Config{})
	now := t0
	tk := pickAt(t, s, 2, now)
	next, err := s.Next(n[:2], Config{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range 200 {
		for _, pick := range []func() (int, Ticket, bool){
			func() (int, Ticket, bool) { return next.Pick(now, Attempt{}) },
			func() (int, Ticket, bool) { return next.Pick(now, Attempt{Role: Hedge, Exclude: []int{k % 2}}) },
			func() (int, Ticket, bool) { return next.Pick(now, Attempt{Role: Retry, Exclude: nil}) },
		} {
			i, t2, ok := pick()
			if !ok || next.Name(i) == n[2] {
				t.Fatalf("pick %d (%v) in the generation without %s", i, ok, n[2])
			}
			next.Done(t2, Success, now.Add(time.Millisecond))
		}
	}
	if st := s.Snapshot(now)[2]; st.InFlight != 1 {
		t.Fatalf("removed replica in flight %d, want its one attempt", st.InFlight)
	}
	s.Done(tk, Success, now.Add(time.Second))
	if st := s.Snapshot(now)[2]; st.InFlight != 0 || st.Successes != 1 || st.EWMA != time.Second {
		t.Errorf("removed replica after its attempt ended: %+v", st)
	}
}

// A ticket goes back to the generation that handed it out: given to
// another, whose indexes may name other replicas, Done panics.
func TestNextTicketOfAnotherGenerationPanics(t *testing.T) {
	s := mustNew(t, 2, Config{})
	tk := pickAt(t, s, 0, t0)
	next, err := s.Next(names(2), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("Done with a ticket of the previous generation did not panic")
		}
		s.Done(tk, Canceled, t0)
	}()
	next.Done(tk, Canceled, t0)
}

// Membership changes in a line: only the newest generation has a next,
// and of two concurrent calls on it exactly one succeeds.
func TestNextOnlyFromTheNewest(t *testing.T) {
	s := mustNew(t, 2, Config{})
	if _, err := s.Next(names(3), Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(names(1), Config{}); !errors.Is(err, ErrSuperseded) {
		t.Errorf("Next of a superseded generation: %v, want ErrSuperseded", err)
	}
	for range 50 {
		cur := mustNew(t, 2, Config{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for range 4 {
			wg.Go(func() {
				if _, err := cur.Next(names(3), Config{}); err == nil {
					mu.Lock()
					won++
					mu.Unlock()
				} else if !errors.Is(err, ErrSuperseded) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d of 4 concurrent Next calls succeeded, want 1", won)
		}
	}
}

// An invalid next generation is refused, and the Set stays the newest.
func TestNextRefusesInvalid(t *testing.T) {
	s := mustNew(t, 2, Config{})
	for _, tc := range []struct {
		names []string
		cfg   Config
	}{
		{nil, Config{}},
		{[]string{"a", "a"}, Config{}},
		{[]string{"a", ""}, Config{}},
		{[]string{"a"}, Config{Cooldown: -1}},
		{[]string{"a"}, Config{Probation: Probation{Enabled: true, Factor: 0.5}}},
	} {
		if _, err := s.Next(tc.names, tc.cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("Next(%q, %+v): %v, want ErrInvalid", tc.names, tc.cfg, err)
		}
	}
	if _, err := s.Next(names(1), Config{}); err != nil {
		t.Errorf("after refusals: %v", err)
	}
}

// Picks on a later generation stay allocation-free.
func TestNextPicksDoNotAllocate(t *testing.T) {
	s := mustNew(t, 3, Config{Probation: Probation{Enabled: true}})
	next, err := s.Next(append(names(3), "http://r3.test"), Config{Probation: Probation{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	next.Pick(now, Attempt{}) // fixes the epoch, once
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Microsecond)
		i, tk, _ := next.Pick(now, Attempt{})
		_, h, _ := next.Pick(now, Attempt{Role: Hedge, Exclude: []int{i}})
		next.Done(h, Success, now.Add(time.Millisecond))
		next.Done(tk, Canceled, now.Add(time.Millisecond))
		next.Pick(now, Attempt{Role: Shadow})
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request on a later generation", allocs)
	}
}

// Probation carries over with a kept replica; a replica left out comes off
// it; turning probation off takes every replica off, and on again starts
// afresh. The judge judges the newest generation, whichever generation's
// Done calls it.
func TestNextProbation(t *testing.T) {
	cfg := Config{Probation: quick}
	cfg.Probation.Enabled = true
	c := onProbation(t, cfg, 50*time.Millisecond)
	s, now := c.s, c.now
	n := names(3)

	kept, err := s.Next(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if kept.OnProbation() != 1 || !byName(t, kept, n[2], now).Probation.Status.OnProbation() {
		t.Fatalf("kept replica's probation: %d on, %+v", kept.OnProbation(), byName(t, kept, n[2], now).Probation)
	}
	if i, _, ok := kept.Pick(now.Add(time.Second), Attempt{Role: Shadow}); !ok || kept.Name(i) != n[2] {
		t.Errorf("no shadow due for the replica on probation in the next generation")
	}

	without, err := kept.Next(n[:2], cfg)
	if err != nil {
		t.Fatal(err)
	}
	if without.OnProbation() != 0 || kept.reps[2].probation.Load() {
		t.Errorf("after its removal: %d on probation, flag %v", without.OnProbation(), kept.reps[2].probation.Load())
	}

	// A slow newcomer goes on probation with traffic through the newest
	// generation (and some through the oldest, whose Done judges too).
	slow := "http://slow.test"
	newest, err := without.Next([]string{n[0], n[1], slow}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 2000 && newest.OnProbation() == 0; k++ {
		now = now.Add(20 * time.Millisecond)
		for i := range newest.Len() {
			tk, ok := newest.admit(i, newest.offset(now))
			if !ok {
				continue
			}
			lat := 5 * time.Millisecond
			if newest.Name(i) == slow {
				lat = 60 * time.Millisecond
			}
			newest.Done(tk, Success, now.Add(lat))
		}
		s.Done(pickAt(t, s, 0, now), Success, now.Add(5*time.Millisecond)) // the oldest generation
	}
	if st := byName(t, newest, slow, now); !st.Probation.Status.OnProbation() || newest.OnProbation() != 1 {
		t.Fatalf("slow newcomer: %+v", st.Probation)
	}

	off := cfg
	off.Probation = Probation{}
	disabled, err := newest.Next(newest.names(), off)
	if err != nil {
		t.Fatal(err)
	}
	if disabled.OnProbation() != 0 || disabled.Snapshot(now)[2].Probation != nil || disabled.reps[2].probation.Load() {
		t.Errorf("probation turned off: %d on, %+v", disabled.OnProbation(), disabled.Snapshot(now)[2])
	}
	again, err := disabled.Next(disabled.names(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st := again.Snapshot(now)[2].Probation; st == nil || st.Status != Serving || st.Entries != 1 {
		t.Errorf("probation on again: %+v, want serving with its one entry counted", st)
	}
}

// names lists the Set's replicas, in order.
func (s *Set) names() []string {
	out := make([]string, s.Len())
	for i := range out {
		out[i] = s.Name(i)
	}
	return out
}

// Generations used at once, and changed, from many goroutines: the race
// detector watches, and every attempt is accounted for in the end.
func TestNextConcurrentWithTraffic(t *testing.T) {
	all := names(4)
	s := mustNew(t, 3, Config{Probation: Probation{Enabled: true, Window: 100 * time.Millisecond, MinSamples: 1}})
	var cur sync.Mutex
	newest := s
	every := map[*replica]bool{}
	for _, r := range s.reps {
		every[r] = true
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			now := t0
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				cur.Lock()
				g := newest
				cur.Unlock()
				now = now.Add(time.Millisecond)
				i, tk, ok := g.Pick(now, Attempt{})
				if !ok {
					continue
				}
				_, h, hok := g.Pick(now, Attempt{Role: Hedge, Exclude: []int{i}})
				g.Done(tk, Success, now.Add(time.Duration(w+1)*time.Millisecond))
				if hok {
					g.Done(h, Canceled, now)
				}
				if _, sh, ok := g.Pick(now, Attempt{Role: Shadow}); ok {
					g.Done(sh, Success, now)
				}
				g.Snapshot(now)
			}
		})
	}
	for k := range 200 {
		members := all[k%2 : k%2+3]
		cur.Lock()
		next, err := newest.Next(members, newest.cfg)
		if err != nil {
			cur.Unlock()
			t.Fatal(err)
		}
		newest = next
		cur.Unlock()
		for _, r := range next.reps {
			every[r] = true
		}
	}
	close(stop)
	wg.Wait()
	// r1 and r2 are in every generation: one replica each, all along (r0
	// and r3 come and go, cold each time they come back).
	perName := map[string]int{}
	for r := range every {
		perName[r.name]++
	}
	if perName[all[1]] != 1 || perName[all[2]] != 1 {
		t.Errorf("replicas made per name %v: the kept ones were not kept", perName)
	}
	for r := range every {
		if n := r.inflight.Load(); n != 0 {
			t.Errorf("%s: %d in flight after every attempt ended", r.name, n)
		}
	}
}
