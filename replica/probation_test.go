package replica

import (
	"encoding/json"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cluster drives synthetic traffic through a Set: every step, each serving
// replica answers one attempt, after lat(i, now), and a shadow is sent
// whenever one is due, answered the same way.
type cluster struct {
	t       *testing.T
	s       *Set
	now     time.Time
	step    time.Duration
	lat     func(i int, now time.Time) time.Duration
	outcome Outcome // of the serving replicas' attempts; Success unless set
	shadows []int   // shadows sent, per replica
}

func newCluster(t *testing.T, n int, cfg Config, lat func(i int, now time.Time) time.Duration) *cluster {
	t.Helper()
	cfg.Probation.Enabled = true
	return &cluster{t: t, s: mustNew(t, n, cfg), now: t0, step: 20 * time.Millisecond, lat: lat, shadows: make([]int, n)}
}

// tick runs one step.
func (c *cluster) tick() {
	c.t.Helper()
	s := c.s
	for i := range s.Len() {
		if s.reps[i].probation.Load() {
			continue
		}
		tk, ok := s.admit(i, s.offset(c.now))
		if !ok {
			continue // breaker open
		}
		s.Done(tk, c.outcome, c.now.Add(c.lat(i, c.now)))
	}
	if i, tk, ok := s.Pick(c.now, Attempt{Role: Shadow}); ok {
		if !tk.shadow() || tk.Replica() != i || !s.reps[i].probation.Load() {
			c.t.Fatalf("shadow ticket %+v for replica %d, not on probation", tk, i)
		}
		c.shadows[i]++
		s.Done(tk, Success, c.now.Add(c.lat(i, c.now)))
	}
	c.now = c.now.Add(c.step)
}

// run ticks for d, or until stop returns true; it returns the time then.
func (c *cluster) run(d time.Duration, stop func() bool) time.Time {
	c.t.Helper()
	for end := c.now.Add(d); c.now.Before(end); {
		c.tick()
		if stop != nil && stop() {
			break
		}
	}
	return c.now
}

func (c *cluster) state(i int) ProbationState {
	c.t.Helper()
	p := c.s.Snapshot(c.now)[i].Probation
	if p == nil {
		c.t.Fatal("no probation state with probation on")
	}
	return *p
}

func (c *cluster) on(i int) func() bool { return func() bool { return c.s.reps[i].probation.Load() } }

// slowFrom makes replica slow answer in slow from start on (and until end,
// if not zero); everyone else in 5ms.
func slowFrom(slow int, d time.Duration, start, end time.Time) func(int, time.Time) time.Duration {
	return func(i int, now time.Time) time.Duration {
		if i == slow && !now.Before(start) && (end.IsZero() || now.Before(end)) {
			return d
		}
		return 5 * time.Millisecond
	}
}

var quick = Probation{Window: time.Second, MinSamples: 5, ShadowRate: 10}

func TestProbationEntersAfterSustainedDivergence(t *testing.T) {
	start := t0.Add(2 * time.Second)
	c := newCluster(t, 3, Config{Probation: quick}, slowFrom(2, 50*time.Millisecond, start, time.Time{}))
	c.run(2*time.Second, nil)
	for i := range 3 {
		// 50 samples in the window, less the one still to come when the
		// last judgement was made.
		if st := c.state(i); st.Status != Serving || st.P50Ms != 5 || st.PeersP50Ms != 5 || st.Samples < 49 || st.Samples > 50 {
			t.Fatalf("replica %d before the slowdown: %+v", i, st)
		}
	}
	var diverging ProbationState
	entered := c.run(10*time.Second, func() bool {
		if st := c.state(2); st.Status == Diverging && diverging.Status != Diverging {
			diverging = st
		}
		return c.s.reps[2].probation.Load()
	})
	if !c.s.reps[2].probation.Load() {
		t.Fatalf("replica 2, 10x slower for 10s, not on probation: %+v", c.state(2))
	}
	// The median turns once half of the last second is slow; then the
	// divergence must last the window (judged every window/10).
	// (Samples count from their answers, up to 50ms after the tick.)
	if d := entered.Sub(start); d < 1400*time.Millisecond || d > 1700*time.Millisecond {
		t.Errorf("on probation %v after the slowdown, want 1.4s-1.7s (half a window to turn the median, a window to hold)", d)
	}
	if diverging.Status != Diverging || !strings.HasPrefix(diverging.Reason, "p50 ") || !strings.HasSuffix(diverging.Reason, " peers' 5ms for 0s of 1s") {
		t.Errorf("diverging state first seen: %+v", diverging)
	}
	st := c.state(2)
	if st.Status != OnProbation || st.Entries != 1 || st.Exits != 0 || st.Since.Sub(entered).Abs() > 100*time.Millisecond {
		t.Errorf("on probation: %+v (entered %v)", st, entered)
	}
	if !strings.HasPrefix(st.Reason, "p50 50ms is 10.0x peers' 5ms for 1") {
		t.Errorf("reason %q", st.Reason)
	}
	if c.s.OnProbation() != 1 {
		t.Errorf("OnProbation() = %d", c.s.OnProbation())
	}
	for i := range 2 {
		if st := c.state(i); st.Status != Serving || st.Entries != 0 {
			t.Errorf("replica %d: %+v", i, st)
		}
	}
}

func TestProbationIgnoresSpikesAndShortBursts(t *testing.T) {
	// Every fifth answer of replica 2 takes 500ms: its median is fine.
	n := 0
	spiky := func(i int, now time.Time) time.Duration {
		if i == 2 {
			n++
			if n%5 == 0 {
				return 500 * time.Millisecond
			}
		}
		return 5 * time.Millisecond
	}
	c := newCluster(t, 3, Config{Probation: quick}, spiky)
	c.run(10*time.Second, func() bool { return c.state(2).Status != Serving })
	if st := c.state(2); st.Status != Serving {
		t.Fatalf("spiky replica: %+v", st)
	}

	// A slowdown shorter than the window: it diverges, then serves again.
	start := t0.Add(2 * time.Second)
	c = newCluster(t, 3, Config{Probation: quick}, slowFrom(2, 50*time.Millisecond, start, start.Add(600*time.Millisecond)))
	seen := false
	c.run(6*time.Second, func() bool {
		seen = seen || c.state(2).Status == Diverging
		return c.s.reps[2].probation.Load()
	})
	if st := c.state(2); !seen || st.Status != Serving || st.Entries != 0 {
		t.Errorf("after a 0.6s slowdown (window 1s): diverged %v, %+v", seen, st)
	}
}

// onProbation returns a 3-replica cluster whose replica 2 went on
// probation for answering in slow.
func onProbation(t *testing.T, cfg Config, slow time.Duration) *cluster {
	t.Helper()
	if cfg.Probation == (Probation{}) {
		cfg.Probation = quick
	}
	lat := slow
	c := newCluster(t, 3, cfg, func(i int, _ time.Time) time.Duration {
		if i == 2 {
			return lat
		}
		return 5 * time.Millisecond
	})
	c.run(10*time.Second, c.on(2))
	if !c.s.reps[2].probation.Load() {
		t.Fatalf("replica 2 not on probation: %+v", c.state(2))
	}
	return c
}

func TestProbationGetsNoPrimariesNorHedges(t *testing.T) {
	c := onProbation(t, Config{FailureThreshold: 1}, 50*time.Millisecond)
	s, now := c.s, c.now
	for range 1000 {
		i, tk, ok := s.Pick(now, Attempt{})
		if !ok || i == 2 {
			t.Fatalf("PickPrimary = %d, %v with replica 2 on probation", i, ok)
		}
		s.Done(tk, Canceled, now)
	}
	if i, _, ok := s.Pick(now, Attempt{Role: Hedge, Exclude: []int{0, 1}}); ok {
		t.Errorf("PickAlternate excluding the others = %d: a hedge went to a replica on probation", i)
	}
	for _, ex := range [][]int{nil, {0}, {1}} {
		if i, tk, ok := s.Pick(now, Attempt{Role: Hedge, Exclude: ex}); !ok || i == 2 {
			t.Errorf("PickAlternate(%v) = %d, %v", ex, i, ok)
		} else {
			s.Done(tk, Canceled, now)
		}
	}
	// A retry after a failure takes it when nothing else is left: a slow
	// answer beats an error.
	i, tk, ok := s.Pick(now, Attempt{Role: Retry, Exclude: []int{0, 1}})
	if !ok || i != 2 {
		t.Fatalf("PickRetry excluding the others = %d, %v", i, ok)
	}
	s.Done(tk, Canceled, now)
	if i, tk, ok := s.Pick(now, Attempt{Role: Retry, Exclude: []int{0}}); !ok || i != 1 {
		t.Errorf("PickRetry(0) = %d, %v; want the serving replica 1", i, ok)
	} else {
		s.Done(tk, Canceled, now)
	}

	// With the serving replicas' breakers open, the one on probation is
	// all that is left: PickPrimary falls back to it.
	trip(t, s, 0, now)
	trip(t, s, 1, now)
	for range 10 {
		i, tk, ok := s.Pick(now, Attempt{})
		if !ok || i != 2 {
			t.Fatalf("PickPrimary with only replica 2 available = %d, %v", i, ok)
		}
		s.Done(tk, Success, now.Add(50*time.Millisecond))
	}
	// Replica 0's breaker waits for a probe: PickPrimary takes it (it is
	// serving) before falling back.
	later := now.Add(time.Minute)
	if i, tk, ok := s.Pick(later, Attempt{}); !ok || i != 0 || !tk.probe() {
		t.Errorf("PickPrimary after the cooldown = %d, %v, probe %v; want replica 0's probe", i, ok, tk.probe())
	}
	if n := s.Available(later); n != 2 {
		t.Errorf("Available = %d, want 2 (replica 1's probe slot is free, replica 2 counts)", n)
	}
}

func TestShadowsAtTheConfiguredRate(t *testing.T) {
	c := onProbation(t, Config{}, 50*time.Millisecond)
	s := c.s
	// Nothing else is on probation, nothing else is due shadows.
	before := c.state(2).Shadows
	if uint64(c.shadows[2]) != before || c.shadows[0]+c.shadows[1] != 0 {
		t.Fatalf("shadows %v, state %d", c.shadows, before)
	}
	// Asked every millisecond for 2s: one every 1/ShadowRate = 100ms.
	got := 0
	now := c.now
	for end := now.Add(2 * time.Second); now.Before(end); now = now.Add(time.Millisecond) {
		if i, tk, ok := s.Pick(now, Attempt{Role: Shadow}); ok {
			if i != 2 || !tk.shadow() || tk.probe() {
				t.Fatalf("PickShadow = %d, %+v", i, tk)
			}
			got++
			s.Done(tk, Success, now.Add(50*time.Millisecond))
		}
	}
	if got != 20 {
		t.Errorf("%d shadows in 2s at 10/s", got)
	}
	if st := c.state(2); st.Shadows != before+20 {
		t.Errorf("state counts %d shadows, want %d", st.Shadows, before+20)
	}
	// Asked every 250ms: one each time, never two at once after a pause.
	for range 8 {
		now = now.Add(250 * time.Millisecond)
		if _, tk, ok := s.Pick(now, Attempt{Role: Shadow}); !ok {
			t.Fatal("no shadow due 250ms after the last")
		} else {
			s.Done(tk, Success, now.Add(50*time.Millisecond))
		}
		if _, _, ok := s.Pick(now, Attempt{Role: Shadow}); ok {
			t.Fatal("two shadows at once")
		}
	}
}

func TestNoShadowsWithoutProbation(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		s := mustNew(t, 3, Config{Probation: Probation{Enabled: enabled}})
		for k := range 100 {
			if i, _, ok := s.Pick(t0.Add(time.Duration(k)*time.Second), Attempt{Role: Shadow}); ok {
				t.Fatalf("enabled %v: a shadow for %d with nothing on probation", enabled, i)
			}
		}
		if p := s.Snapshot(t0)[0].Probation; enabled != (p != nil) {
			t.Errorf("enabled %v: probation state %+v", enabled, p)
		}
	}
}

func TestProbationExitsOnRecovery(t *testing.T) {
	c := onProbation(t, Config{}, 50*time.Millisecond)
	// Still slow: it stays, judged from its shadows.
	c.run(5*time.Second, nil)
	if st := c.state(2); st.Status != OnProbation || st.P50Ms != 50 || st.Samples < quick.MinSamples {
		t.Fatalf("still slow: %+v", st)
	}
	healed := c.now
	c.lat = slowFrom(-1, 0, t0, time.Time{})
	var recovering ProbationState
	back := c.run(10*time.Second, func() bool {
		if st := c.state(2); st.Status == Recovering && recovering.Status != Recovering {
			recovering = st
		}
		return !c.s.reps[2].probation.Load()
	})
	if c.s.reps[2].probation.Load() {
		t.Fatalf("recovered replica still on probation: %+v", c.state(2))
	}
	// Shadows at 10/s over a 1s span: the median turns after half a
	// second; then the recovery must last the window.
	if d := back.Sub(healed); d < 1500*time.Millisecond || d > 1800*time.Millisecond {
		t.Errorf("back %v after recovering, want 1.5s-1.8s", d)
	}
	if !strings.Contains(recovering.Reason, "; recovering: p50 5ms is 1.0x peers' 5ms for 0s of 1s") {
		t.Errorf("recovering: %+v", recovering)
	}
	st := c.state(2)
	if st.Status != Serving || st.Entries != 1 || st.Exits != 1 || !st.Since.Equal(back.Add(-c.step)) && !st.Since.Before(back) ||
		!strings.HasPrefix(st.Reason, "came off probation: p50 5ms is 1.0x peers' 5ms for 1") {
		t.Errorf("after recovery: %+v", st)
	}
	// It takes hedges again, and primaries: with its peers busy, its cost
	// (a peak-EWMA still high from its slow days) is the lowest.
	if i, tk, ok := c.s.Pick(c.now, Attempt{Role: Hedge, Exclude: []int{0, 1}}); !ok || i != 2 {
		t.Errorf("PickAlternate excluding the others = %d, %v", i, ok)
	} else {
		c.s.Done(tk, Canceled, c.now)
	}
	var held []Ticket
	for range 100 {
		i, tk, _ := c.s.Pick(c.now, Attempt{})
		if i == 2 {
			break
		}
		held = append(held, tk)
	}
	if len(held) == 100 {
		t.Error("no primary for the recovered replica in 100 picks")
	}
	for _, tk := range held {
		c.s.Done(tk, Canceled, c.now)
	}
}

// Between ExitFactor and Factor nothing moves: a serving replica 2.5x
// slower than its peers stays, one on probation stays on.
func TestProbationHysteresis(t *testing.T) {
	c := newCluster(t, 3, Config{Probation: quick}, func(i int, _ time.Time) time.Duration {
		if i == 2 {
			return 10 * time.Millisecond
		}
		return 4 * time.Millisecond
	})
	c.run(10*time.Second, func() bool { return c.state(2).Status != Serving })
	if st := c.state(2); st.Status != Serving {
		t.Errorf("2.5x slower, never on probation: %+v", st)
	}
	c = onProbation(t, Config{}, 50*time.Millisecond)
	c.lat = func(i int, _ time.Time) time.Duration {
		if i == 2 {
			return 12500 * time.Microsecond
		}
		return 5 * time.Millisecond
	}
	c.run(10*time.Second, func() bool { return c.state(2).Status != OnProbation })
	if st := c.state(2); st.Status != OnProbation || st.P50Ms != 12.5 {
		t.Errorf("on probation and 2.5x slower: %+v", st)
	}
}

func TestMaxOnProbation(t *testing.T) {
	for _, tc := range []struct {
		share float64
		n     []int
		want  []int
	}{
		{0, []int{1, 2, 3, 9, 10, 19, 20, 29, 30, 100}, []int{0, 1, 1, 1, 1, 1, 2, 2, 3, 10}},
		{0.3, []int{1, 2, 3, 10, 11}, []int{0, 1, 1, 3, 3}},
		{0.5, []int{2, 3, 4, 5}, []int{1, 1, 2, 2}},
		{1, []int{1, 2, 3, 10}, []int{0, 1, 2, 9}},
	} {
		for k, n := range tc.n {
			if got := (Probation{MaxShare: tc.share}).MaxOnProbation(n); got != tc.want[k] {
				t.Errorf("share %v, %d replicas: %d on probation at most, want %d", tc.share, n, got, tc.want[k])
			}
		}
	}
}

func TestProbationCap(t *testing.T) {
	slow := map[int]time.Duration{7: 40 * time.Millisecond, 8: 60 * time.Millisecond, 9: 50 * time.Millisecond}
	lat := func(i int, _ time.Time) time.Duration {
		if d, ok := slow[i]; ok {
			return d
		}
		return 5 * time.Millisecond
	}
	// Default share: 1 of 10, the worst.
	c := newCluster(t, 10, Config{Probation: quick}, lat)
	c.run(10*time.Second, nil)
	if n := c.s.OnProbation(); n != 1 || !c.s.reps[8].probation.Load() {
		t.Fatalf("%d on probation; replica 8 (the worst): %+v", n, c.state(8))
	}
	for _, i := range []int{7, 9} {
		if st := c.state(i); st.Status != Diverging || !strings.HasSuffix(st.Reason, "; held back: 1 of at most 1 replicas on probation already") {
			t.Errorf("replica %d: %+v", i, st)
		}
	}
	// The worst recovers: its place goes to the next worst (9) as it
	// leaves, in the same judgement.
	slow[8] = 5 * time.Millisecond
	c.run(10*time.Second, func() bool { return !c.s.reps[8].probation.Load() })
	if n := c.s.OnProbation(); n != 1 || !c.s.reps[9].probation.Load() || c.s.reps[7].probation.Load() {
		t.Errorf("after replica 8 recovered: %d on probation, 9: %+v, 7: %+v", n, c.state(9), c.state(7))
	}
	for k := 0; k < 100; k++ {
		c.tick()
		if n := c.s.OnProbation(); n > 1 {
			t.Fatalf("%d on probation, cap 1", n)
		}
	}

	// A share of 0.3: all three.
	slow[8] = 60 * time.Millisecond
	p := quick
	p.MaxShare = 0.3
	c = newCluster(t, 10, Config{Probation: p}, lat)
	c.run(10*time.Second, nil)
	if n := c.s.OnProbation(); n != 3 {
		t.Errorf("share 0.3: %d on probation, want 3", n)
	}

	// Two replicas, both share settings: one may go, never both, whatever
	// their latencies do.
	for _, share := range []float64{0.1, 1} {
		p.MaxShare = share
		flip := false
		c = newCluster(t, 2, Config{Probation: p}, func(i int, _ time.Time) time.Duration {
			if (i == 1) != flip {
				return 50 * time.Millisecond
			}
			return 5 * time.Millisecond
		})
		c.run(5*time.Second, nil)
		if !c.s.reps[1].probation.Load() {
			t.Fatalf("share %v: the slow one of two not on probation", share)
		}
		flip = true // now replica 0 is the slow one, and 1 (on probation) fast
		for range 1000 {
			c.tick()
			if c.s.OnProbation() > 1 {
				t.Fatalf("share %v: both replicas on probation", share)
			}
		}
	}

	// A lone replica has no peers: never on probation.
	c = newCluster(t, 1, Config{Probation: quick}, func(int, time.Time) time.Duration { return time.Second })
	c.run(10*time.Second, nil)
	if st := c.state(0); st.Status != Serving || st.PeersP50Ms != 0 {
		t.Errorf("lone replica: %+v", st)
	}
}

func TestProbationNeedsEnoughSamples(t *testing.T) {
	// Replica 0 answers once every 500ms: 2 samples per window, below
	// MinSamples, so it is nobody's peer; replica 1 has none to compare
	// with, and replica 0 is not judged.
	c := newCluster(t, 2, Config{Probation: quick}, slowFrom(1, 50*time.Millisecond, t0, time.Time{}))
	k := 0
	for range 1000 {
		k++
		s := c.s
		if k%25 == 0 {
			tk, _ := s.admit(0, s.offset(c.now))
			s.Done(tk, Success, c.now.Add(5*time.Millisecond))
		}
		tk, _ := s.admit(1, s.offset(c.now))
		s.Done(tk, Success, c.now.Add(50*time.Millisecond))
		c.now = c.now.Add(c.step)
	}
	for i := range 2 {
		if st := c.state(i); st.Status != Serving {
			t.Errorf("replica %d: %+v", i, st)
		}
	}
	if st := c.state(0); st.Samples != 2 {
		t.Errorf("replica 0: %d samples in the window, want 2", st.Samples)
	}
}

// Attempts cancelled after a long wait are lower bounds, and count: a
// replica that never answers before a hedge wins goes on probation.
func TestCancelledAttemptsCountAsLowerBounds(t *testing.T) {
	c := newCluster(t, 3, Config{Probation: quick}, slowFrom(2, 80*time.Millisecond, t0, time.Time{}))
	s := c.s
	for range 500 {
		for i := range 3 {
			if s.reps[i].probation.Load() {
				continue
			}
			tk, _ := s.admit(i, s.offset(c.now))
			o := Success
			if i == 2 {
				o = Canceled
			}
			s.Done(tk, o, c.now.Add(c.lat(i, c.now)))
		}
		c.now = c.now.Add(c.step)
	}
	if st := c.state(2); st.Status != OnProbation || st.Entries != 1 {
		t.Errorf("replica whose attempts are all cancelled after 80ms: %+v", st)
	}
	// Failures are the breaker's: fast 500s do not make a replica look fast,
	// nor slow ones slow.
	c = newCluster(t, 3, Config{Probation: quick, FailureThreshold: 1 << 30}, slowFrom(2, 80*time.Millisecond, t0, time.Time{}))
	for range 500 {
		for i := range 3 {
			tk, _ := c.s.admit(i, c.s.offset(c.now))
			o := Success
			if i == 2 {
				o = Failure
			}
			c.s.Done(tk, o, c.now.Add(c.lat(i, c.now)))
		}
		c.now = c.now.Add(c.step)
	}
	if st := c.state(2); st.Status != Serving || st.Samples != 0 {
		t.Errorf("replica whose attempts all fail: %+v", st)
	}
}

func TestProbationComposesWithBreaker(t *testing.T) {
	c := onProbation(t, Config{FailureThreshold: 2, Cooldown: time.Second}, 50*time.Millisecond)
	s := c.s
	now := c.now
	// Its shadows fail: the breaker opens, and it is both on probation and
	// open. No shadow is due while the breaker is open.
	for k := 0; k < 2; k++ {
		now = now.Add(time.Second)
		_, tk, ok := s.Pick(now, Attempt{Role: Shadow})
		if !ok {
			t.Fatalf("shadow %d not due", k)
		}
		s.Done(tk, Failure, now)
	}
	st := s.Snapshot(now)[2]
	if st.Breaker != Open || !st.Probation.Status.OnProbation() {
		t.Fatalf("after failed shadows: breaker %v, probation %+v", st.Breaker, st.Probation)
	}
	for k := range 50 {
		if _, _, ok := s.Pick(now.Add(time.Duration(k)*10*time.Millisecond), Attempt{Role: Shadow}); ok {
			t.Fatal("a shadow to an open breaker")
		}
	}
	// After the cooldown, primaries leave its probe alone; the next shadow
	// is the probe, and its success closes the breaker. It stays on
	// probation: probation is about latency.
	now = now.Add(2 * time.Second)
	for range 100 {
		i, tk, _ := s.Pick(now, Attempt{})
		if i == 2 {
			t.Fatal("PickPrimary took the probe of a replica on probation")
		}
		s.Done(tk, Success, now.Add(5*time.Millisecond))
	}
	i, tk, ok := s.Pick(now, Attempt{Role: Shadow})
	if !ok || i != 2 || !tk.probe() || !tk.shadow() {
		t.Fatalf("PickShadow after the cooldown = %d, %v, %+v; want replica 2's probe", i, ok, tk)
	}
	s.Done(tk, Success, now.Add(50*time.Millisecond))
	st = s.Snapshot(now.Add(50 * time.Millisecond))[2]
	if st.Breaker != Closed || !st.Probation.Status.OnProbation() {
		t.Errorf("after the shadow probe: breaker %v, probation %+v", st.Breaker, st.Probation)
	}

	// A serving replica's open breaker is not probation.
	trip(t, s, 0, now)
	s.updateProbation(now.Add(time.Second))
	if st := s.Snapshot(now.Add(time.Second))[0]; st.Breaker != Open || st.Probation.Status != Serving {
		t.Errorf("tripped serving replica: breaker %v, probation %+v", st.Breaker, st.Probation)
	}
}

func TestProbationStateJSON(t *testing.T) {
	c := onProbation(t, Config{}, 50*time.Millisecond)
	b, err := json.Marshal(c.s.Snapshot(c.now)[2])
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	p, _ := raw["probation"].(map[string]any)
	if p["status"] != "probation" || p["p50Ms"] != 50.0 || p["peersP50Ms"] != 5.0 || p["entries"] != 1.0 ||
		!strings.HasPrefix(p["reason"].(string), "p50 50ms is 10.0x") || p["since"] == nil {
		t.Errorf("probation JSON: %s", b)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil || back.Probation == nil || back.Probation.Status != OnProbation {
		t.Errorf("decoded %+v, %v", back.Probation, err)
	}
	// Serving and never on probation: no since, no reason.
	b, _ = json.Marshal(c.s.Snapshot(c.now)[0].Probation)
	if strings.Contains(string(b), "since") || strings.Contains(string(b), "reason") || !strings.Contains(string(b), `"status":"serving"`) {
		t.Errorf("serving replica: %s", b)
	}
}

func TestProbationStatusText(t *testing.T) {
	for st, want := range map[ProbationStatus]string{Serving: "serving", Diverging: "diverging", OnProbation: "probation", Recovering: "recovering"} {
		b, err := st.MarshalText()
		if err != nil || string(b) != want || st.String() != want {
			t.Errorf("%d: %q, %v", st, b, err)
		}
		var back ProbationStatus
		if err := back.UnmarshalText(b); err != nil || back != st {
			t.Errorf("UnmarshalText(%q) = %v, %v", b, back, err)
		}
		if st.OnProbation() != (st == OnProbation || st == Recovering) {
			t.Errorf("%v.OnProbation() = %v", st, st.OnProbation())
		}
	}
	if _, err := ProbationStatus(9).MarshalText(); err == nil || ProbationStatus(9).String() != "ProbationStatus(9)" {
		t.Errorf("unknown status: %v", err)
	}
	var back ProbationStatus
	if err := back.UnmarshalText([]byte("sulking")); err == nil || !strings.HasPrefix(err.Error(), "replica: ") {
		t.Errorf("UnmarshalText(sulking): %v", err)
	}
}

func TestShort(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		0: 0, -time.Second: 0, 41234 * time.Microsecond: 41 * time.Millisecond, 5123 * time.Microsecond: 5100 * time.Microsecond,
		1234 * time.Millisecond: 1200 * time.Millisecond, 57: 57, 999: 1000,
	} {
		if got := short(d); got != want {
			t.Errorf("short(%v) = %v, want %v", d, got, want)
		}
	}
	if got := judgement(50e6, 0); got != "p50 50ms against peers' 0s" {
		t.Errorf("judgement without peers' latency: %q", got)
	}
	if r := ratioOf(1, 0); !math.IsInf(r, 1) {
		t.Errorf("ratioOf(1, 0) = %v", r)
	}
}

// TestConcurrentProbation runs picks, shadows, outcomes and snapshots from
// many goroutines while one replica goes slow, onto probation and back,
// and checks that the books balance and the cap held throughout.
func TestConcurrentProbation(t *testing.T) {
	const workers = 8
	s := mustNew(t, 4, Config{FailureThreshold: 1 << 30, Probation: Probation{Enabled: true, Window: 100 * time.Millisecond,
		MinSamples: 5, ShadowRate: 100}})
	var clock atomic.Int64
	now := func() time.Time { return t0.Add(time.Duration(clock.Add(int64(20 * time.Microsecond)))) }
	// Replica 3 is slow for the middle of the run.
	lat := func(i int, at time.Time) time.Duration {
		if d := at.Sub(t0); i == 3 && d > 200*time.Millisecond && d < 600*time.Millisecond {
			return 50 * time.Millisecond
		}
		return time.Millisecond
	}
	var tickets, shadows atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	type pending struct {
		tk Ticket
		at time.Time
	}
	for range workers {
		wg.Go(func() {
			// Each worker keeps 16 attempts in flight, so that the peers'
			// in-flight counts price them up to the slow replica now and
			// then, as under load.
			var queue []pending
			others := [4][]int{{1, 2, 3}, {0, 2, 3}, {0, 1, 3}, {0, 1, 2}}
			for k := range 5000 {
				at := now()
				i, tk, ok := s.Pick(at, Attempt{})
				if !ok {
					t.Error("no primary")
					return
				}
				tickets.Add(1)
				queue = append(queue, pending{tk, at.Add(lat(i, at))})
				// Retries that leave one replica in turn sample every
				// replica, the one on probation included (the fallback).
				if j, tk, ok := s.Pick(at, Attempt{Role: Retry, Exclude: others[k%4]}); ok {
					if j != k%4 {
						t.Errorf("PickRetry leaving only %d = %d", k%4, j)
					}
					tickets.Add(1)
					queue = append(queue, pending{tk, at.Add(lat(j, at))})
				}
				if j, sh, ok := s.Pick(at, Attempt{Role: Shadow}); ok {
					tickets.Add(1)
					shadows.Add(1)
					queue = append(queue, pending{sh, at.Add(lat(j, at))})
				}
				for len(queue) > 16 {
					s.Done(queue[0].tk, Success, queue[0].at)
					queue = queue[1:]
				}
			}
			for _, p := range queue {
				s.Done(p.tk, Success, p.at)
			}
		})
	}
	var maxOn atomic.Int32
	defer func() {
		if t.Failed() {
			for _, st := range s.Snapshot(now()) {
				t.Logf("%s: %d picks, %+v", st.Name, st.Picks, *st.Probation)
			}
		}
	}()
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := int32(0)
			for _, st := range s.Snapshot(now()) {
				if st.Probation.Status.OnProbation() {
					n++
				}
			}
			if n > maxOn.Load() {
				maxOn.Store(n)
			}
		}
	})
	wg.Wait()
	close(stop)
	reader.Wait()
	var picks, outcomes, entries, counted uint64
	for _, st := range s.Snapshot(now()) {
		if st.InFlight != 0 {
			t.Errorf("%s: %d in flight", st.Name, st.InFlight)
		}
		picks += st.Picks
		outcomes += st.Successes + st.Failures + st.Canceled
		entries += st.Probation.Entries
		counted += st.Probation.Shadows
	}
	if picks != outcomes || picks != uint64(tickets.Load()) || counted != uint64(shadows.Load()) {
		t.Errorf("picks %d, outcomes %d, tickets %d, shadows %d counted %d", picks, outcomes, tickets.Load(), shadows.Load(), counted)
	}
	if maxOn.Load() > 1 {
		t.Errorf("%d replicas on probation at once, cap 1", maxOn.Load())
	}
	if entries == 0 || shadows.Load() == 0 {
		t.Errorf("no probation (%d entries) or no shadows (%d): the test exercised nothing", entries, shadows.Load())
	}
	t.Logf("tickets %d, shadows %d, probation entries %d, ran %v", tickets.Load(), shadows.Load(), entries, time.Duration(clock.Load()))
}
