package hedge

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/internal/latency"
)

// gateRig drives a gate directly, in virtual time: outcomes, latencies and
// evaluations, without operations.
type gateRig struct {
	g   *gate
	lat *latency.Window
}

func newGateRig(cfg Gate) *gateRig {
	p, err := Policy{Gate: cfg}.withDefaults()
	if err != nil {
		panic(err)
	}
	lat := latency.NewWindow(10*time.Second, 10)
	return &gateRig{g: newGate(p.Gate, lat, nil), lat: lat}
}

// outcomes settles n hedged operations, wins of them won by a hedge that
// took took.
func (r *gateRig) outcomes(n, wins int, took time.Duration) {
	now := time.Now()
	for i := range n {
		r.g.settle(now, gatePass{}, true, i < wins, took)
	}
}

// latencies records n accepted attempts of latency l, spread over d, and
// evaluates the gate as time passes.
func (r *gateRig) latencies(n int, l, d time.Duration) {
	for range n {
		now := time.Now()
		r.lat.RecordAt(now, l)
		r.g.record(now, l)
		r.g.tick(now)
		time.Sleep(d / time.Duration(n))
	}
}

func (r *gateRig) state() GateState {
	time.Sleep(25 * time.Millisecond) // past the next evaluation and look at the medians
	r.g.tick(time.Now())
	return r.g.snapshot(time.Now())
}

func TestWilsonUpper(t *testing.T) {
	for _, tc := range []struct {
		wins, n int64
		want    float64
	}{
		{0, 0, 1},
		{0, 11, 0.1975}, // eleven lost: below 0.2
		{0, 10, 0.2130}, // ten: not yet
		{2, 30, 0.1827},
		{5, 10, 0.7307},
	} {
		if got := wilsonUpper(tc.wins, tc.n, wilsonZ); math.Abs(got-tc.want) > 1e-3 {
			t.Errorf("wilsonUpper(%d, %d) = %.4f, want %.4f", tc.wins, tc.n, got, tc.want)
		}
	}
}

// GateNoHelp shuts on the Wilson bound, not on a bare share, and reopens
// only at 1.5 times MinWinRate: a workload whose hedges win 25% of the time
// stays open, and once shut stays shut at 25%.
func TestGateNoHelpThresholdAndHysteresis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(Gate{})
		r.outcomes(10, 0, time.Millisecond)
		if st := r.state(); !st.Open() {
			t.Fatalf("ten lost: %v; want open (not yet 95%% sure)", st)
		}
		r.outcomes(1, 0, time.Millisecond)
		if st := r.state(); st.Shut != GateNoHelp {
			t.Fatalf("eleven lost: %v; want shut", st)
		}
		// 25 wins and 64 losses more: 25 of 100 won, a quarter, below the
		// 30% that reopens it.
		r.outcomes(25, 25, time.Millisecond)
		r.outcomes(64, 0, time.Millisecond)
		if st := r.state(); st.Shut != GateNoHelp || st.Hedged != 100 || st.HedgeWins != 25 {
			t.Errorf("shut, then 25 of 100 won: %v (%d of %d); want still shut", st, st.HedgeWins, st.Hedged)
		}
		r.outcomes(7, 7, time.Millisecond) // 32 of 107: still below 30%
		if st := r.state(); st.Shut != GateNoHelp {
			t.Errorf("32 of 107 won: %v; want shut", st)
		}
		r.outcomes(1, 1, time.Millisecond) // 33 of 108: above
		if st := r.state(); !st.Open() {
			t.Errorf("33 of 108 won: %v; want open", st)
		}

		// A fresh gate at the same 25% never shuts: the bound stays above 20%.
		time.Sleep(11 * time.Second) // all of the above ages out
		if st := r.state(); !st.Open() || st.Hedged != 0 {
			t.Fatalf("a window later: %v, %d outcomes", st, st.Hedged)
		}
		for range 40 {
			r.outcomes(3, 0, time.Millisecond)
			r.outcomes(1, 1, time.Millisecond)
			if st := r.state(); !st.Open() {
				t.Fatalf("a quarter won, %d outcomes: %v; want open", st.Hedged, st)
			}
		}
	})
}

// The slowdown signal: the median must reach Slowdown times its baseline
// and 1ms more; once up, it stays up until below three quarters of that,
// whatever the gate decides meanwhile. Fewer than five hedged operations
// since the rise leave the gate unproven, not shut; slow wins then shut it.
func TestGateSlowdownThresholds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(Gate{})
		r.latencies(600, 400*time.Microsecond, 3*time.Second) // baseline 0.4ms
		if st := r.state(); st.BaselineMedian < 390*time.Microsecond || st.BaselineMedian > 410*time.Microsecond {
			t.Fatalf("baseline %v, want 0.4ms", st.BaselineMedian)
		}
		r.latencies(200, 900*time.Microsecond, time.Second) // 2.25x, but only 0.5ms more
		if st := r.state(); r.g.risen {
			t.Fatalf("a rise of 0.5ms: %v (risen %v); want no slowdown", st, r.g.risen)
		}
		r.latencies(200, 2*time.Millisecond, time.Second) // 5x, 1.6ms more
		if st := r.state(); !r.g.risen || !st.Open() || !st.Unproven {
			t.Fatalf("5x: %v (risen %v); want risen, unproven, open", st, r.g.risen)
		}

		// Hysteresis, on a baseline of 4ms.
		r = newGateRig(Gate{})
		r.latencies(600, 4*time.Millisecond, 3*time.Second)
		r.latencies(200, 10*time.Millisecond, time.Second) // 2.5x
		if st := r.state(); !r.g.risen || !st.Open() || !st.Unproven {
			t.Fatalf("2.5x: %v (risen %v); want risen, unproven, open", st, r.g.risen)
		}
		r.outcomes(5, 1, 12*time.Millisecond) // the one win slow: 12ms is beyond 2x the baseline
		if st := r.state(); st.Shut != GateSlowdown {
			t.Fatalf("5 hedged since the rise, 0 won at the old speed: %v; want shut", st)
		}
		r.latencies(200, 7*time.Millisecond, time.Second) // 1.75x: above 3/4 of 2x
		if st := r.state(); st.Shut != GateSlowdown || !r.g.risen {
			t.Errorf("down to 1.75x: %v (risen %v); want still shut", st, r.g.risen)
		}
		r.latencies(200, 5*time.Millisecond, time.Second) // 1.25x
		if st := r.state(); !st.Open() || r.g.risen {
			t.Errorf("down to 1.25x: %v (risen %v); want open", st, r.g.risen)
		}
	})
}

// The baseline is the lower quartile of the slot medians, not their least:
// one unusually fast second does not lower it.
func TestGateBaselineIsLowerQuartile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(Gate{})
		r.latencies(50, 200*time.Microsecond, time.Second)
		r.latencies(400, time.Millisecond, 8*time.Second)
		if st := r.state(); st.BaselineMedian < 990*time.Microsecond {
			t.Errorf("baseline %v after one fast second and eight at 1ms; want 1ms", st.BaselineMedian)
		}
	})
}

// A slowdown that lasts four minutes is the new normal: the baseline
// adopts it and the signal clears.
func TestGateAdoptsALastingSlowdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(Gate{})
		r.latencies(300, time.Millisecond, 3*time.Second)
		for range 230 { // 40 a second: the recent median needs 64 in two seconds
			r.latencies(40, 5*time.Millisecond, time.Second)
		}
		if st := r.state(); !r.g.risen || st.BaselineMedian > 1100*time.Microsecond {
			t.Fatalf("230s slower: risen %v, baseline %v; want still risen against 1ms", r.g.risen, st.BaselineMedian)
		}
		for range 20 {
			r.latencies(40, 5*time.Millisecond, time.Second)
		}
		if st := r.state(); r.g.risen || st.BaselineMedian < 4900*time.Microsecond {
			t.Errorf("250s slower: risen %v, baseline %v; want the new normal, 5ms", r.g.risen, st.BaselineMedian)
		}
	})
}

// Probes: the gap doubles while they lose, never beyond half the window,
// and starts over when the gate reopens; a probe that does not go out
// after all gives its slot back.
func TestGateProbeGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(Gate{})
		r.outcomes(11, 0, 0)
		if st := r.state(); st.Shut != GateNoHelp {
			t.Fatal(st)
		}
		gap := func() time.Duration { return time.Duration(r.g.probeGap.Load()) }
		for _, want := range []time.Duration{2, 4, 5, 5} {
			time.Sleep(gap())
			p, ok := r.g.allow(time.Now(), false)
			if !ok || !p.probe {
				t.Fatalf("no probe after the gap")
			}
			r.g.settle(time.Now(), p, true, false, 0)
			if gap() != want*time.Second {
				t.Errorf("gap %v after a lost probe, want %v", gap(), want*time.Second)
			}
		}
		// A probe refused downstream (the budget, say) gives its slot back.
		time.Sleep(gap())
		p, ok := r.g.allow(time.Now(), false)
		if !ok {
			t.Fatal("no probe")
		}
		r.g.refuse(p, time.Now())
		if _, ok := r.g.allow(time.Now(), false); !ok {
			t.Error("the slot of a refused probe was lost")
		}
		// Reopened by winning probes: the next shut probes from a second.
		r.outcomes(30, 30, 0)
		if st := r.state(); !st.Open() || gap() != time.Second {
			t.Errorf("after wins: %v, gap %v; want open, 1s", st, gap())
		}
	})
}

// Unproven turns: one operation at a time, until it settles or a tenth of
// the window passes, so a hung operation cannot stop hedging; a refused
// hedge hands its turn back at once.
func TestGateUnprovenTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGateRig(Gate{})
		now := time.Now()
		hung, ok := r.g.allow(now, false)
		if !ok || hung.turn == 0 {
			t.Fatal("the first unproven hedge was held")
		}
		if _, ok := r.g.allow(now, false); ok {
			t.Error("a second operation hedged while the first holds the turn")
		}
		if _, ok := r.g.allow(now, true); !ok {
			t.Error("the operation holding the turn could not hedge again")
		}
		time.Sleep(time.Second) // the hung operation never settles
		p, ok := r.g.allow(time.Now(), false)
		if !ok {
			t.Fatal("still held a second later: a hung operation stops hedging")
		}
		r.g.refuse(p, time.Now())
		if _, ok := r.g.allow(time.Now(), false); !ok {
			t.Error("a refused hedge kept its turn")
		}
		r.g.settle(time.Now(), hung, true, true, 0) // late, and a win: proven
		if st := r.state(); st.Unproven || !st.Open() {
			t.Errorf("after a win: %v", st)
		}
	})
}

// statsAt evaluates nothing: a time far ahead moves none of the gate's
// clocks. Changes orders states; Since marks opening and shutting only.
func TestGateStatsAtAndChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var load Load
		h := mustNew(t, Policy{Gate: Gate{Load: func() Load { return load }}})
		h.statsAt(time.Now().Add(time.Hour))
		load = Load{InUse: 1}
		time.Sleep(20 * time.Millisecond)
		st := h.Stats().Gate
		if st.Shut != GateCapacity || st.Changes != 1 {
			t.Fatalf("after statsAt an hour ahead, the limit full: %v, %d changes; want shut for capacity", st, st.Changes)
		}
		shutAt := st.Since
		load = Load{InUse: 1, Unavailable: 1}
		time.Sleep(20 * time.Millisecond)
		if st := h.Stats().Gate; st.Shut != GateCapacity|GateUnavailable || st.Changes != 2 || !st.Since.Equal(shutAt) {
			t.Errorf("another signal: %v, %d changes, since %v; want 2 changes, since unchanged", st, st.Changes, st.Since)
		}
	})
}

// A disabled gate is not unproven either: it holds nothing back.
func TestGateDisabledIsNotUnproven(t *testing.T) {
	h := mustNew(t, Policy{Gate: Gate{Disabled: true}})
	if st := h.Stats().Gate; st.Unproven || !st.Open() {
		t.Errorf("disabled: %+v", st)
	}
}
