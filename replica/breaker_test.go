package replica

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestBreakerOpensAtThresholdConsecutiveFailures(t *testing.T) {
	s := mustNew(t, 1, Config{FailureThreshold: 3, Cooldown: time.Second})
	fail := func() { s.Done(pickAt(t, s, 0, t0), Failure, t0) }
	fail()
	fail()
	s.Done(pickAt(t, s, 0, t0), Success, t0) // resets the count
	fail()
	fail()
	st := stateOfReplica(s, 0, t0)
	if st.Breaker != Closed || st.Generation != 0 || st.ConsecutiveFailures != 2 || !st.Available {
		t.Fatalf("after 2 consecutive failures: %+v", st)
	}
	fail()
	st = stateOfReplica(s, 0, t0)
	if st.Breaker != Open || st.Generation != 1 || st.Available || !st.OpenUntil.Equal(t0.Add(time.Second)) {
		t.Fatalf("after 3 consecutive failures: %+v", st)
	}
	if st.Failures != 5 || st.Successes != 1 || st.Picks != 6 || st.InFlight != 0 {
		t.Errorf("counters: %+v", st)
	}
}

func TestCanceledDoesNotCountTowardThreshold(t *testing.T) {
	s := mustNew(t, 1, Config{FailureThreshold: 2})
	s.Done(pickAt(t, s, 0, t0), Failure, t0)
	s.Done(pickAt(t, s, 0, t0), Canceled, t0)
	st := stateOfReplica(s, 0, t0)
	if st.Breaker != Closed || st.ConsecutiveFailures != 1 || st.Canceled != 1 {
		t.Fatalf("%+v", st)
	}
	s.Done(pickAt(t, s, 0, t0), Failure, t0)
	if st := stateOfReplica(s, 0, t0); st.Breaker != Open {
		t.Fatalf("%+v", st)
	}
}

func TestOpenBreakerRejectsUntilCooldownThenAdmitsOneProbe(t *testing.T) {
	s := mustNew(t, 2, Config{FailureThreshold: 1, Cooldown: time.Second})
	trip(t, s, 0, t0)
	open := t0.Add(time.Second)
	for _, now := range []time.Time{t0, t0.Add(time.Second - 1)} {
		if s.Available(now) != 1 {
			t.Fatalf("Available(%v) = %d, want 1", now.Sub(t0), s.Available(now))
		}
		for range 20 {
			if i, tk, ok := s.Pick(now, Attempt{}); !ok || i != 1 {
				t.Fatalf("PickPrimary while 0 is open = %d, %v", i, ok)
			} else {
				s.Done(tk, Canceled, now)
			}
		}
		if _, _, ok := s.Pick(now, Attempt{Role: Hedge, Exclude: []int{1}}); ok {
			t.Fatal("PickAlternate chose the open replica")
		}
	}
	// The cooldown is over: the replica counts as available again, and the
	// next pick probes it even though replica 1 looks cheaper.
	setEWMA(s, 0, time.Second, open)
	if n := s.Available(open); n != 2 {
		t.Fatalf("Available = %d after the cooldown, want 2", n)
	}
	if st := stateOfReplica(s, 0, open); st.Breaker != Open || !st.Available {
		t.Fatalf("before the probe: %+v", st)
	}
	i, probe, ok := s.Pick(open, Attempt{})
	if !ok || i != 0 || !probe.probe() || probe.generation() != 2 {
		t.Fatalf("first pick after cooldown = %d, %+v, %v; want the probe of replica 0", i, probe, ok)
	}
	st := stateOfReplica(s, 0, open)
	if st.Breaker != HalfOpen || st.Generation != 2 || st.Available || st.InFlight != 1 || !st.OpenUntil.IsZero() {
		t.Fatalf("probe out: %+v", st)
	}
	// While the probe is out, other picks skip the replica.
	for range 20 {
		if i, tk, ok := s.Pick(open, Attempt{}); !ok || i != 1 {
			t.Fatalf("pick with the probe out = %d, %v", i, ok)
		} else {
			s.Done(tk, Canceled, open)
		}
	}
	if _, _, ok := s.Pick(open, Attempt{Role: Hedge, Exclude: []int{1}}); ok {
		t.Fatal("PickAlternate took a second probe")
	}
	s.Done(probe, Success, open.Add(time.Millisecond))
	st = stateOfReplica(s, 0, open)
	if st.Breaker != Closed || st.Generation != 3 || !st.Available || st.ConsecutiveFailures != 0 {
		t.Fatalf("after the probe succeeded: %+v", st)
	}
}

func TestProbeSuccessResetsCooldown(t *testing.T) {
	s := mustNew(t, 1, Config{FailureThreshold: 1, Cooldown: time.Second, MaxCooldown: 10 * time.Second})
	now := t0
	trip(t, s, 0, now)
	for range 3 { // fail three probes: the cooldown grows to 8s
		now = stateOfReplica(s, 0, now).OpenUntil
		s.Done(pickAt(t, s, 0, now), Failure, now)
	}
	now = stateOfReplica(s, 0, now).OpenUntil
	s.Done(pickAt(t, s, 0, now), Success, now)
	trip(t, s, 0, now)
	if st := stateOfReplica(s, 0, now); !st.OpenUntil.Equal(now.Add(time.Second)) {
		t.Errorf("reopened after a successful probe until +%v, want +1s", st.OpenUntil.Sub(now))
	}
}

func TestFailedProbeReopensWithDoubledCappedCooldown(t *testing.T) {
	s := mustNew(t, 1, Config{FailureThreshold: 2, Cooldown: time.Second, MaxCooldown: 5 * time.Second})
	now := t0
	trip(t, s, 0, now)
	gen := uint64(1)
	for _, want := range []time.Duration{2, 4, 5, 5} {
		now = stateOfReplica(s, 0, now).OpenUntil
		tk := pickAt(t, s, 0, now)
		if !tk.probe() || tk.generation() != gen+1 {
			t.Fatalf("ticket %+v, want the probe of generation %d", tk, gen+1)
		}
		now = now.Add(10 * time.Millisecond)
		s.Done(tk, Failure, now)
		gen += 2
		st := stateOfReplica(s, 0, now)
		if st.Breaker != Open || st.Generation != gen || !st.OpenUntil.Equal(now.Add(want*time.Second)) {
			t.Fatalf("after a failed probe: %+v, want open (generation %d) for %ds", st, gen, want)
		}
	}
}

func TestHugeCooldownsSaturate(t *testing.T) {
	huge := time.Duration(1 << 62) // 146 years
	s := mustNew(t, 1, Config{FailureThreshold: 1, Cooldown: huge, MaxCooldown: huge + huge/2})
	trip(t, s, 0, t0)
	if s.Available(t0.Add(huge-1)) != 0 {
		t.Fatal("breaker admits before its cooldown is over")
	}
	// The probe fails: doubling the cooldown overflows, and so would the
	// reopening time; both saturate instead of wrapping into the past.
	now := t0.Add(huge)
	s.Done(pickAt(t, s, 0, now), Failure, now)
	r := s.reps[0]
	r.mu.Lock()
	cd := r.cooldown
	r.mu.Unlock()
	if cd != huge+huge/2 {
		t.Errorf("cooldown %v after doubling %v, want the cap %v", cd, huge, huge+huge/2)
	}
	if s.Available(now.Add(huge/2)) != 0 {
		t.Error("breaker admits after a wrapped cooldown")
	}
}

func TestCanceledProbeFreesTheSlot(t *testing.T) {
	s := mustNew(t, 1, Config{FailureThreshold: 1, Cooldown: time.Second})
	trip(t, s, 0, t0)
	now := t0.Add(time.Second)
	_, probe, _ := s.Pick(now, Attempt{})
	if _, _, ok := s.Pick(now, Attempt{}); ok {
		t.Fatal("second probe admitted")
	}
	s.Done(probe, Canceled, now)
	st := stateOfReplica(s, 0, now)
	if st.Breaker != HalfOpen || st.Generation != 2 || !st.Available || st.Stale != 0 {
		t.Fatalf("after a cancelled probe: %+v", st)
	}
	if s.Available(now) != 1 {
		t.Fatal("not available after a cancelled probe")
	}
	i, again, ok := s.Pick(now, Attempt{Role: Hedge, Exclude: nil})
	if !ok || i != 0 || !again.probe() || again.generation() != 2 {
		t.Fatalf("pick after cancelled probe = %d, %+v, %v", i, again, ok)
	}
	s.Done(again, Success, now)
	if st := stateOfReplica(s, 0, now); st.Breaker != Closed || st.Generation != 3 {
		t.Fatalf("after the second probe: %+v", st)
	}
}

func TestConcurrentPicksTakeOneProbe(t *testing.T) {
	const workers = 16
	for round := range 20 {
		s := mustNew(t, 1, Config{FailureThreshold: 1, Cooldown: time.Second, Seed: uint64(round + 1)})
		trip(t, s, 0, t0)
		now := t0.Add(time.Second)
		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			mu     sync.Mutex
			probes []Ticket
		)
		for w := range workers {
			wg.Go(func() {
				<-start
				var (
					tk Ticket
					ok bool
				)
				if w%2 == 0 {
					_, tk, ok = s.Pick(now, Attempt{})
				} else {
					_, tk, ok = s.Pick(now, Attempt{Role: Hedge, Exclude: nil})
				}
				if ok {
					mu.Lock()
					probes = append(probes, tk)
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if len(probes) != 1 || !probes[0].probe() {
			t.Fatalf("round %d: %d tickets admitted (%+v), want one probe", round, len(probes), probes)
		}
		if st := stateOfReplica(s, 0, now); st.Breaker != HalfOpen || st.Generation != 2 || st.InFlight != 1 {
			t.Fatalf("round %d: %+v", round, st)
		}
	}
}

func TestGenerationCountsEveryTransition(t *testing.T) {
	s := mustNew(t, 1, Config{FailureThreshold: 1, Cooldown: time.Second})
	now := t0
	var seen []uint64
	step := func(want BreakerState) {
		t.Helper()
		st := stateOfReplica(s, 0, now)
		if st.Breaker != want {
			t.Fatalf("breaker %v, want %v", st.Breaker, want)
		}
		seen = append(seen, st.Generation)
	}
	step(Closed)
	s.Done(pickAt(t, s, 0, now), Failure, now) // closed -> open
	step(Open)
	now = now.Add(time.Second)
	probe := pickAt(t, s, 0, now) // open -> half-open
	step(HalfOpen)
	s.Done(probe, Failure, now) // half-open -> open
	step(Open)
	now = now.Add(2 * time.Second)
	probe = pickAt(t, s, 0, now) // open -> half-open
	step(HalfOpen)
	s.Done(probe, Success, now) // half-open -> closed
	step(Closed)
	for i, g := range seen {
		if g != uint64(i) {
			t.Fatalf("generations %v, want 0, 1, 2, ...", seen)
		}
	}
}

func TestStaleSuccessDoesNotCloseOpenBreaker(t *testing.T) {
	s := mustNew(t, 2, Config{FailureThreshold: 3, Cooldown: time.Second})
	old := pickAt(t, s, 0, t0) // a hedge attempt that will finish late
	trip(t, s, 0, t0.Add(time.Millisecond))
	before := stateOfReplica(s, 0, t0)
	late := t0.Add(300 * time.Millisecond)
	s.Done(old, Success, late)
	st := stateOfReplica(s, 0, late)
	if st.Breaker != Open || st.Generation != before.Generation || !st.OpenUntil.Equal(before.OpenUntil) ||
		st.ConsecutiveFailures != before.ConsecutiveFailures {
		t.Fatalf("stale success moved the breaker: before %+v, after %+v", before, st)
	}
	if st.Stale != 1 || st.Successes != 1 || st.InFlight != 0 {
		t.Errorf("stale success not counted: %+v", st)
	}
	// Its latency is real and counts.
	if st.EWMA != 300*time.Millisecond {
		t.Errorf("EWMA %v after a stale 300ms success, want 300ms", st.EWMA)
	}
}

func TestStaleFailureDoesNotReopenClosedBreaker(t *testing.T) {
	// Threshold 1: a single failure that counted would reopen the breaker.
	s := mustNew(t, 1, Config{FailureThreshold: 1, Cooldown: time.Second})
	old := pickAt(t, s, 0, t0) // generation 0
	trip(t, s, 0, t0)          // generation 1
	now := t0.Add(time.Second)
	probe := pickAt(t, s, 0, now) // generation 2
	s.Done(probe, Success, now)   // generation 3: closed
	s.Done(old, Failure, now.Add(time.Millisecond))
	st := stateOfReplica(s, 0, now)
	if st.Breaker != Closed || st.Generation != 3 || st.ConsecutiveFailures != 0 || !st.Available {
		t.Fatalf("stale failure moved the breaker: %+v", st)
	}
	if st.Stale != 1 || st.Failures != 2 {
		t.Errorf("stale failure not counted: %+v", st)
	}
	// A stale failure does not count toward the threshold either: a current
	// one still opens.
	s.Done(pickAt(t, s, 0, now), Failure, now)
	if st := stateOfReplica(s, 0, now); st.Breaker != Open || st.Generation != 4 {
		t.Fatalf("current failure: %+v", st)
	}
}

func TestStaleCanceledIsCountedStale(t *testing.T) {
	s := mustNew(t, 1, Config{FailureThreshold: 1})
	old := pickAt(t, s, 0, t0)
	trip(t, s, 0, t0)
	s.Done(old, Canceled, t0)
	if st := stateOfReplica(s, 0, t0); st.Stale != 1 || st.Canceled != 1 || st.Breaker != Open {
		t.Fatalf("%+v", st)
	}
}

func TestDoneWithZeroTicketIsNoop(t *testing.T) {
	s := mustNew(t, 1, Config{})
	s.Done(Ticket{}, Failure, t0)
	if st := stateOfReplica(s, 0, t0); st.Failures != 0 || st.InFlight != 0 || st.ConsecutiveFailures != 0 {
		t.Fatalf("%+v", st)
	}
	if (Ticket{}).Replica() != -1 {
		t.Error("zero Ticket's Replica is not -1")
	}
}

func TestDonePanicsOnMisuse(t *testing.T) {
	s := mustNew(t, 1, Config{})
	big := mustNew(t, 3, Config{})
	for name, f := range map[string]func(){
		"unknown outcome": func() { s.Done(pickAt(t, s, 0, t0), Outcome(9), t0) },
		"foreign ticket":  func() { s.Done(pickAt(t, big, 2, t0), Success, t0) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		})
	}
}

// decay is exp(-x): its series where x is small, math.Exp elsewhere, equal
// to within float64's rounding either way.
func TestDecayIsExp(t *testing.T) {
	for _, x := range []float64{0, 1e-12, 1e-9, 1e-6, 1e-4, 5e-4, 0.000999, 0.001, 0.01, 0.5, 1, 3, 50} {
		if got, want := decay(x), math.Exp(-x); math.Abs(got-want) > 1e-13*want {
			t.Errorf("decay(%g) = %.17g, want %.17g", x, got, want)
		}
	}
}
