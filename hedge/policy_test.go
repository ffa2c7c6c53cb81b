package hedge

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/internal/latency"
)

func TestPolicyDefaults(t *testing.T) {
	h := mustNew(t, Policy{})
	p := h.Policy()
	if p.MaxAttempts != 2 || p.ObserveWindow != 100*time.Millisecond || p.Adaptive.Quantile != 0 ||
		p.Adaptive.Floor != time.Millisecond || p.Adaptive.Ceiling != time.Second || p.Adaptive.MinSamples != 50 ||
		p.Adaptive.Warmup != 10*time.Millisecond || p.Gate.Window != 10*time.Second ||
		p.Gate.MinWinRate != 0.2 || p.Gate.Slowdown != 2 || p.Gate.Disabled || p.Gate.Load != nil ||
		p.Budget == nil || p.Budget.Fraction() != 0.1 || p.Budget.Burst() != 10 {
		t.Errorf("defaults: %+v", p)
	}
	// Probes of a shut gate: a second apart, backing off to half the window.
	if g := h.cur.Load().gate; g.probeFirst != int64(time.Second) || g.probeMost != int64(5*time.Second) || g.hold != time.Second || g.turnMost != int64(time.Second) {
		t.Errorf("probes every %v to %v, hold %v, unproven turns %v; want 1s, 5s, 1s and 1s",
			time.Duration(g.probeFirst), time.Duration(g.probeMost), g.hold, time.Duration(g.turnMost))
	}
	// The warm-up delay is clamped into [Floor, Ceiling].
	if got := mustNew(t, Policy{Adaptive: Adaptive{Floor: 20 * time.Millisecond, Ceiling: 30 * time.Millisecond}}).Stats().Delay; got != 20*time.Millisecond {
		t.Errorf("warm-up not clamped: %v", got)
	}
}

func TestPolicyRejects(t *testing.T) {
	cases := map[string]Policy{
		"negative delay":       {Delay: -1},
		"too many attempts":    {MaxAttempts: 6},
		"negative attempts":    {MaxAttempts: -1},
		"negative window":      {ObserveWindow: -1},
		"huge window":          {ObserveWindow: time.Hour},
		"quantile 1":           {Adaptive: Adaptive{Quantile: 1}},
		"quantile NaN":         {Adaptive: Adaptive{Quantile: math.NaN()}},
		"floor above ceiling":  {Adaptive: Adaptive{Floor: time.Second, Ceiling: time.Millisecond}},
		"negative floor":       {Adaptive: Adaptive{Floor: -1}},
		"negative min samples": {Adaptive: Adaptive{MinSamples: -1}},
		"negative warmup":      {Adaptive: Adaptive{Warmup: -1}},
		"negative lat window":  {Adaptive: Adaptive{Window: -1}},
		"negative gate window": {Gate: Gate{Window: -1}},
		"win rate above half":  {Gate: Gate{MinWinRate: 0.6}},
		"negative win rate":    {Gate: Gate{MinWinRate: -0.1}},
		"win rate NaN":         {Gate: Gate{MinWinRate: math.NaN()}},
		"slowdown below 1":     {Gate: Gate{Slowdown: 0.5}},
		"slowdown NaN":         {Gate: Gate{Slowdown: math.NaN()}},
	}
	for name, p := range cases {
		if _, err := New(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestParseDelay(t *testing.T) {
	good := []struct {
		in    string
		fixed time.Duration
		q     float64
	}{
		{"25ms", 25 * time.Millisecond, 0},
		{" 1.5s ", 1500 * time.Millisecond, 0},
		{"auto", 0, 0},
		{"p99", 0, 0.99},
		{"p99.9", 0, 0.999},
		{"p50", 0, 0.5},
	}
	for _, c := range good {
		fixed, q, err := ParseDelay(c.in)
		if err != nil || fixed != c.fixed || math.Abs(q-c.q) > 1e-12 {
			t.Errorf("ParseDelay(%q) = %v, %v, %v", c.in, fixed, q, err)
		}
	}
	for _, in := range []string{"", "0", "-5ms", "p0", "p100", "p-1", "pNaN", "p1e1", "fast", "25", "p", "p+5", "pInf"} {
		if _, _, err := ParseDelay(in); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "delay") {
			t.Errorf("ParseDelay(%q): err %v", in, err)
		}
	}
}

func FuzzParseDelay(f *testing.F) {
	for _, s := range []string{"25ms", "auto", "p95", "p99.99", "1h", "p0.001", "-1s", "p", "1e3ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fixed, q, err := ParseDelay(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		if fixed > 0 && q > 0 || (strings.TrimSpace(s) == "auto") != (fixed == 0 && q == 0) {
			t.Fatalf("ParseDelay(%q) = %v, %v: want at most one of fixed and quantile, none for auto", s, fixed, q)
		}
		if q != 0 && !(q > 0 && q < 1) {
			t.Fatalf("quantile %v outside (0,1)", q)
		}
		// Whatever parses must make a valid policy.
		p := Policy{Delay: fixed}
		if q > 0 {
			p.Adaptive.Quantile = q
		}
		if _, err := New(p); err != nil {
			t.Fatalf("ParseDelay(%q) accepted, New rejected: %v", s, err)
		}
	})
}

// The adaptive delay's quantile follows the budget: p(1 − fraction), p90
// by default, p75 at 25%, and a change of the budget's rates moves it.
func TestAdaptiveQuantileFollowsBudget(t *testing.T) {
	budget := mustBudget(t, 0.1, 10)
	h := mustNew(t, Policy{Budget: budget, Adaptive: Adaptive{MinSamples: 1}})
	now := time.Now()
	for i := 1; i <= 100; i++ {
		h.record(now, time.Duration(i)*time.Millisecond)
	}
	h.delays.set(h.Policy(), now)
	within := func(got, want time.Duration) bool { return math.Abs(float64(got-want)) <= float64(want)/32 }
	if d, _, _ := h.delays.current(now); !within(d, 90*time.Millisecond) {
		t.Errorf("delay %v at a 10%% budget, want the p90, 90ms", d)
	}
	budget.SetRates(0.25, 10)
	h.delays.set(h.Policy(), now)
	if d, _, _ := h.delays.current(now); !within(d, 75*time.Millisecond) {
		t.Errorf("delay %v at a 25%% budget, want the p75, 75ms", d)
	}
	budget.SetRates(0, 10)
	h.delays.set(h.Policy(), now)
	if d, _, _ := h.delays.current(now); !within(d, 100*time.Millisecond) {
		t.Errorf("delay %v at a 0%% budget, want the p99.9, 100ms", d)
	}
	fixed := mustNew(t, Policy{Budget: mustBudget(t, 0.1, 10), Adaptive: Adaptive{Quantile: 0.5, MinSamples: 1}})
	for i := 1; i <= 100; i++ {
		fixed.record(now, time.Duration(i)*time.Millisecond)
	}
	fixed.delays.set(fixed.Policy(), now)
	if d, _, _ := fixed.delays.current(now); !within(d, 50*time.Millisecond) {
		t.Errorf("delay %v with Quantile 0.5, want 50ms", d)
	}
}

// The adaptive delay's quantile is interpolated within the histogram's
// bucket: over reads that all take 20 to 21ms, spread evenly, the p90 is
// about 20.9ms, where the bucket's midpoint would say 20.7ms, the class's
// p70, and hedge three times the reads the budget meant.
func TestDelayQuantileInterpolates(t *testing.T) {
	w := latency.NewWindow(10*time.Second, 10)
	now := time.Now()
	for i := range 1000 {
		w.RecordAt(now, 20*time.Millisecond+time.Duration(i)*time.Microsecond)
	}
	s := w.SnapshotAt(now)
	if got := delayQuantile(s, 0.9); got < 20850*time.Microsecond || got > 20950*time.Microsecond {
		t.Errorf("p90 %v; want about 20.9ms (Snapshot.Quantile says %v)", got, s.Quantile(0.9))
	}
	for _, q := range []float64{0, 0.001, 0.5, 0.999, 1} {
		if got := delayQuantile(s, q); got < s.Min() || got > s.Max() {
			t.Errorf("q %v: %v outside [%v, %v]", q, got, s.Min(), s.Max())
		}
	}
}
