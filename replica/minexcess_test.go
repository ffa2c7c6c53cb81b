package replica

import (
	"testing"
	"time"
)

// fastPeers makes replica 2 answer in lat(now) and the others in 440µs:
// the case of a python http.server (1.4ms) behind two nginx instances.
func fastPeers(lat func(now time.Time) time.Duration) func(int, time.Time) time.Duration {
	return func(i int, now time.Time) time.Duration {
		if i == 2 {
			return lat(now)
		}
		return 440 * time.Microsecond
	}
}

func constant(d time.Duration) func(time.Time) time.Duration {
	return func(time.Time) time.Duration { return d }
}

// A replica 3.2x slower than its peers, but only 0.96ms behind them, is
// healthy: with the default floor of 2ms it never even diverges; without
// a floor (the ratio alone, as before MinExcess) it goes on probation.
func TestProbationNeedsAnAbsoluteExcess(t *testing.T) {
	c := newCluster(t, 3, Config{Probation: quick}, fastPeers(constant(1400*time.Microsecond)))
	c.run(10*time.Second, func() bool { return c.state(2).Status != Serving })
	if st := c.state(2); st.Status != Serving || st.P50Ms != 1.4 || st.PeersP50Ms != 0.44 {
		t.Errorf("1.4ms against peers' 0.44ms, default floor: %+v", st)
	}

	noFloor := quick
	noFloor.MinExcess = -1
	c = newCluster(t, 3, Config{Probation: noFloor}, fastPeers(constant(1400*time.Microsecond)))
	c.run(10*time.Second, c.on(2))
	if st := c.state(2); st.Status != OnProbation {
		t.Errorf("1.4ms against peers' 0.44ms, no floor: %+v", st)
	}

	// Past the floor, the ratio decides as before: 2.5ms is 2.06ms
	// behind but only 5.7x, which is enough; 1.3ms behind a 10ms
	// floor is not.
	c = newCluster(t, 3, Config{Probation: quick}, fastPeers(constant(2500*time.Microsecond)))
	c.run(10*time.Second, c.on(2))
	if st := c.state(2); st.Status != OnProbation {
		t.Errorf("2.5ms against peers' 0.44ms, default floor: %+v", st)
	}
	high := quick
	high.MinExcess = 10 * time.Millisecond
	c = newCluster(t, 3, Config{Probation: high}, fastPeers(constant(9*time.Millisecond)))
	c.run(10*time.Second, func() bool { return c.state(2).Status != Serving })
	if st := c.state(2); st.Status != Serving {
		t.Errorf("9ms against 0.44ms, floor 10ms: %+v", st)
	}
}

// A replica on probation comes back once it is within the exit excess of
// its peers, though still above ExitFactor times them: otherwise a
// replica that went on probation at 50ms and recovered to a healthy
// 1.4ms would stay there for good, 3.2x its fast peers.
func TestProbationExitsWithinTheExitExcess(t *testing.T) {
	var recovered time.Time
	slow := func(now time.Time) time.Duration {
		if recovered.IsZero() || now.Before(recovered) {
			return 50 * time.Millisecond
		}
		return 1400 * time.Microsecond
	}
	// Factor 3, ExitFactor 2, MinExcess 3ms: the exit excess is 1.5ms,
	// and 1.4ms is 0.96ms behind.
	p := quick
	p.MinExcess = 3 * time.Millisecond
	c := newCluster(t, 3, Config{Probation: p}, fastPeers(slow))
	c.run(10*time.Second, c.on(2))
	if !c.s.reps[2].probation.Load() {
		t.Fatalf("50ms against 0.44ms: %+v", c.state(2))
	}
	recovered = c.now
	c.run(30*time.Second, func() bool { return !c.s.reps[2].probation.Load() })
	if st := c.state(2); st.Status != Serving || st.Exits != 1 {
		t.Errorf("recovered to 1.4ms against 0.44ms (exit excess 1.5ms): %+v", st)
	}

	// The exit excess holds it back while it is still further behind:
	// 2ms is 1.56ms behind, 4.5x its peers.
	recovered = time.Time{}
	stuck := func(now time.Time) time.Duration {
		if recovered.IsZero() || now.Before(recovered) {
			return 50 * time.Millisecond
		}
		return 2 * time.Millisecond
	}
	c = newCluster(t, 3, Config{Probation: p}, fastPeers(stuck))
	c.run(10*time.Second, c.on(2))
	recovered = c.now
	c.run(30*time.Second, func() bool { return !c.s.reps[2].probation.Load() })
	if st := c.state(2); st.Status != OnProbation || st.Exits != 0 {
		t.Errorf("at 2ms against 0.44ms (exit excess 1.5ms): %+v", st)
	}
}

func TestProbationExcessLines(t *testing.T) {
	for _, tc := range []struct {
		p           Probation
		enter, exit time.Duration
	}{
		{Probation{}, 2 * time.Millisecond, time.Millisecond}, // the defaults: 3, 2
		{Probation{Factor: 4, ExitFactor: 2.5, MinExcess: 3 * time.Millisecond}, 3 * time.Millisecond, 1500 * time.Microsecond},
		{Probation{Factor: 3, ExitFactor: 1, MinExcess: 5 * time.Millisecond}, 5 * time.Millisecond, 0}, // exit by the ratio alone
		{Probation{Factor: 3, ExitFactor: 3, MinExcess: 5 * time.Millisecond}, 5 * time.Millisecond, 5 * time.Millisecond},
		{Probation{MinExcess: -1}, 0, 0}, // no floor
	} {
		p, err := tc.p.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		enter, exit := p.excess()
		if time.Duration(enter) != tc.enter || time.Duration(exit) != tc.exit {
			t.Errorf("%+v: enter %v exit %v, want %v %v", tc.p, time.Duration(enter), time.Duration(exit), tc.enter, tc.exit)
		}
	}
}
