package lab

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestQuantileRanksCoverAtTheirLevel(t *testing.T) {
	for _, c := range []struct {
		n int
		q float64
	}{{300, 0.5}, {300, 0.9}, {300, 0.99}, {1000, 0.999}, {20, 0.5}, {5, 0.5}} {
		lo, hi := quantileRanks(c.n, c.q, 0.01)
		cdf := binomialCDF(c.n, c.q)
		at := func(k int) float64 { // P(B <= k)
			if k < 0 {
				return 0
			}
			return cdf[min(k, c.n)]
		}
		// The interval [x(lo), x(hi)] misses the quantile when fewer than
		// lo or at least hi samples lie below it.
		miss := at(lo-1) + (1 - at(hi-1))
		if miss > 0.01+1e-9 {
			t.Errorf("n=%d q=%v: ranks %d..%d miss with probability %v", c.n, c.q, lo, hi, miss)
		}
		// And they are the tightest: one rank closer on either side
		// would miss more than alpha/2 on that side.
		if lo >= 0 && lo < c.n && at(lo) <= 0.005 {
			t.Errorf("n=%d q=%v: lo %d could be %d", c.n, c.q, lo, lo+1)
		}
		if hi <= c.n && hi > 1 && 1-at(hi-2) <= 0.005 {
			t.Errorf("n=%d q=%v: hi %d could be %d", c.n, c.q, hi, hi-1)
		}
	}
	// 300 samples cannot bound a p99 from above at 99%.
	if _, hi := quantileRanks(300, 0.99, 0.01); hi != 301 {
		t.Errorf("p99 of 300: hi %d, want unbounded", hi)
	}
	// Nor 5 samples a median from either side.
	if lo, hi := quantileRanks(5, 0.5, 0.01); lo != 0 || hi != 6 {
		t.Errorf("median of 5: %d..%d, want unbounded both ways", lo, hi)
	}
}

func TestCrossCheckBounds(t *testing.T) {
	x := make([]float64, 300)
	for i := range x {
		x[i] = float64(i + 1) // 1..300 ms
	}
	lo, hi := quantileRanks(300, 0.5, 0.01)
	low, high := x[lo-1]*0.9-2, x[hi-1]*1.1+2
	for _, c := range []struct {
		sim  float64
		want bool
	}{{150, true}, {low, true}, {high, true}, {low - 0.5, false}, {high + 0.5, false}} {
		got := crossCheck("p", 0.5, x, c.sim, 0.01)
		if got.Agrees != c.want || got.LoopbackMs != 150 || got.LowMs == nil || got.HighMs == nil {
			t.Errorf("sim %v: %+v, want agrees=%v", c.sim, got, c.want)
		}
	}
	// An upper bound that a failure (+Inf) would set is unbounded.
	y := append(append([]float64(nil), x[:290]...), make([]float64, 10)...)
	for i := 290; i < 300; i++ {
		y[i] = math.Inf(1)
	}
	if c := crossCheck("p", 0.95, y, 1e6, 0.01); c.HighMs != nil || !c.Agrees {
		t.Errorf("upper bound at a failure: %+v", c)
	}
	// A quantile that is a failure never agrees.
	if c := crossCheck("p", 0.99, y, 290, 0.01); c.Agrees || c.LoopbackMs != -1 {
		t.Errorf("failed quantile: %+v", c)
	}
}

func TestSimulatedModelsRefuseRequestIDs(t *testing.T) {
	for _, m := range []Model{SlowIDs{IDs: []uint64{1}, Fast: time.Millisecond, Slow: 2 * time.Millisecond},
		Batch{Keys: 2, Base: Spikes{Fraction: 0.1, Slow: time.Second, Base: SlowIDs{IDs: []uint64{1}, Slow: time.Millisecond}}}} {
		if _, err := simLatency(m); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "request ids") {
			t.Errorf("%v: %v", m, err)
		}
	}
	// Stalls are simulated at a random phase: a stall of a tenth of the
	// period meets about a tenth of the requests.
	lat, err := simLatency(Stalls{Every: time.Second, For: 100 * time.Millisecond, Base: Constant(0)})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	stalled := 0
	for range 10_000 {
		if lat(rng) > 0 {
			stalled++
		}
	}
	if stalled < 900 || stalled > 1100 {
		t.Errorf("%d of 10000 draws stalled, want about 1000", stalled)
	}
}

func TestSimulateFanoutReproducesTheArithmetic(t *testing.T) {
	rep, err := SimulateFanout(context.Background(), FanoutConfig{SimRequests: 20_000, Seed: 3},
		SimulateOptions{ArithmeticFanouts: []int{1, 10, 100}, Table1Fanout: 100})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Shards != 60 || rep.Need != 57 || len(rep.Policies) != 4 {
		t.Fatalf("report %+v", rep)
	}
	if len(rep.Arithmetic) != 4 || rep.Arithmetic[2].Fanout != 60 {
		t.Fatalf("arithmetic fan-outs %+v", rep.Arithmetic)
	}
	for _, a := range rep.Arithmetic {
		if !a.Agrees || a.StdErr <= 0 || math.Abs(a.ShardSlowShare-0.01) > 0.001 {
			t.Errorf("fan-out %d: %+v", a.Fanout, a)
		}
	}
	if a := rep.Arithmetic[3]; a.Fanout != 100 || math.Abs(a.SimulatedSlowShare-0.634) > 0.02 {
		t.Errorf("100 shards slow 1%% of the time: %+v, want 63%% of requests slow", a)
	}
	all, hedged, enough, both := rep.Policies[0], rep.Policies[1], rep.Policies[2], rep.Policies[3]
	if math.Abs(all.P50Ms-rep.WaitForAll.P50Ms) > 0.05*rep.WaitForAll.P50Ms || math.Abs(all.P99Ms-rep.WaitForAll.P99Ms) > 0.1*rep.WaitForAll.P99Ms {
		t.Errorf("wait for all %+v against the prediction %+v", all, rep.WaitForAll)
	}
	// Hedging at the shard's p95 sends about 5% more shard requests.
	if hedged.ExtraAttemptsPct < 4 || hedged.ExtraAttemptsPct > 6 || all.ExtraAttemptsPct != 0 {
		t.Errorf("extra attempts: hedged %v, none %v", hedged.ExtraAttemptsPct, all.ExtraAttemptsPct)
	}
	if !(hedged.P99Ms < all.P99Ms/2 && enough.P50Ms < all.P50Ms/1.5 && both.P99Ms < hedged.P99Ms && both.P99Ms < enough.P99Ms) {
		t.Errorf("remedies: all %+v hedged %+v enough %+v both %+v", all, hedged, enough, both)
	}
	if all.PartialShare != 0 || hedged.PartialShare != 0 || enough.PartialShare != 1 || both.PartialShare != 1 {
		t.Errorf("partial shares %v %v %v %v", all.PartialShare, hedged.PartialShare, enough.PartialShare, both.PartialShare)
	}
	if len(rep.Table1) != 2 || rep.Table1[1].SharedSpread != DefaultSharedSpread {
		t.Fatalf("table 1: %+v", rep.Table1)
	}
	for _, tab := range rep.Table1 {
		one, ninety5, every := tab.Rows[0], tab.Rows[1], tab.Rows[2]
		if !(one.P50Ms < ninety5.P50Ms && ninety5.P50Ms < every.P50Ms && ninety5.P99Ms < every.P99Ms) {
			t.Errorf("table 1 (spread %v) not rising: %+v", tab.SharedSpread, tab.Rows)
		}
	}
	if shared := rep.Table1[1].Rows; shared[1].P99Ms <= shared[0].P99Ms {
		t.Errorf("a shared cause should lift the 95%% row's p99 above one leaf's: %+v", shared)
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, "t", rep.Environment, rep); err != nil || !bytes.Contains(buf.Bytes(), []byte("<svg")) || !bytes.Contains(buf.Bytes(), []byte("Table 1 of the paper")) {
		t.Errorf("HTML: %v", err)
	}
}

func TestSimulateRefusesBadConfigs(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cfg  FanoutConfig
		opts SimulateOptions
	}{
		{FanoutConfig{Shards: 10, Need: 11}, SimulateOptions{}},
		{FanoutConfig{SimRequests: -1}, SimulateOptions{}},
		{FanoutConfig{HedgeDelay: -time.Millisecond}, SimulateOptions{}},
		{FanoutConfig{}, SimulateOptions{Table1Fanout: maxSimFanout + 1}},
		{FanoutConfig{}, SimulateOptions{ArithmeticFanouts: []int{0}}},
		{FanoutConfig{}, SimulateOptions{SharedSpread: 10}},
		{FanoutConfig{}, SimulateOptions{SharedSpread: math.NaN()}},
		{FanoutConfig{Model: SlowIDs{IDs: []uint64{1}}}, SimulateOptions{}},
	} {
		if _, err := SimulateFanout(ctx, c.cfg, c.opts); err == nil {
			t.Errorf("%+v %+v: no error", c.cfg, c.opts)
		}
	}
	if _, err := SimulateBigtable(ctx, BigtableConfig{Servers: 10, Keys: 15}); err == nil {
		t.Error("keys not a multiple of servers: no error")
	}
}

func TestSimulateBigtableHedgesWithinItsBudget(t *testing.T) {
	cfg := BigtableConfig{Servers: 20, Keys: 100, SimOperations: 5_000, BudgetFraction: 0.05,
		KeyModel: Spikes{Fraction: 0.0002, Slow: time.Second, Base: Lognormal{P50: time.Millisecond, P99: 6 * time.Millisecond}}}
	rep, err := SimulateBigtable(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// One operation in 50 meets a spike (20 × 5 keys × 0.0002): without
	// hedging its p99.9 is a spike; with, the other server answers.
	if rep.Baseline.P999Ms < 1000 || rep.Hedged.P999Ms > 100 || rep.Baseline.ExtraAttemptsPct != 0 {
		t.Errorf("baseline %+v hedged %+v", rep.Baseline, rep.Hedged)
	}
	// hedges <= burst + fraction × server requests.
	limit := 100 * (float64(cfg.Servers) + cfg.BudgetFraction*float64(cfg.Servers*cfg.SimOperations)) / float64(cfg.Servers*cfg.SimOperations)
	if rep.Hedged.ExtraAttemptsPct <= 0 || rep.Hedged.ExtraAttemptsPct > limit {
		t.Errorf("extra %v%%, want within (0, %v]", rep.Hedged.ExtraAttemptsPct, limit)
	}
	if rep.Operations != 5_000 || rep.Model != "batch:keys=5,base="+cfg.KeyModel.String() {
		t.Errorf("report %+v", rep)
	}
}

// The loopback fanout run, small: every policy runs, the client's shard
// attempts reconcile with the fixtures', partial results are counted, and
// every policy is cross-checked with the simulator.
func TestRunFanoutSmall(t *testing.T) {
	cfg := FanoutConfig{Shards: 4, Need: 3, Requests: 20, Rate: 200, SimRequests: 5_000,
		Model: Lognormal{P50: time.Millisecond, P99: 5 * time.Millisecond}}
	var progress []int
	cfg.Progress = func(done, total int) { progress = append(progress, done, total) }
	rep, err := RunFanout(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Policies) != 4 || len(rep.Simulated) != 4 || len(rep.CrossCheck) != 12 || len(progress) != 10 {
		t.Fatalf("policies %d simulated %d checks %d progress %v", len(rep.Policies), len(rep.Simulated), len(rep.CrossCheck), progress)
	}
	for i, p := range rep.Policies {
		if p.Policy != rep.Simulated[i].Policy || p.Requests != 20 || p.Succeeded != 20 {
			t.Errorf("policy %d: %+v against %+v", i, p, rep.Simulated[i])
		}
		// Waiting for all, every shard request is a client attempt;
		// good enough, at least Need per request. Hedges add more. An
		// attempt cancelled before it was written may not reach a fixture.
		least := int64(80)
		if i >= 2 {
			least = 60
		}
		if w := p.Work; w.ClientAttempts < least || w.Unreconciled < 0 || w.Started > w.ClientAttempts {
			t.Errorf("%s: work %+v", p.Policy, w)
		}
		if p.ExtraAttemptsPct < 0 || (i%2 == 0 && p.ExtraAttemptsPct != 0) {
			t.Errorf("%s: extra attempts %v%%", p.Policy, p.ExtraAttemptsPct)
		}
	}
	if rep.Policies[0].PartialShare != 0 || rep.Policies[0].ExtraAttemptsPct != 0 || rep.Policies[2].PartialShare == 0 {
		t.Errorf("wait for all %+v, good enough %+v", rep.Policies[0], rep.Policies[2])
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, "t", rep.Environment, rep); err != nil || !bytes.Contains(buf.Bytes(), []byte("Cross-check")) {
		t.Errorf("HTML: %v", err)
	}
}

func TestRunBigtableSmall(t *testing.T) {
	cfg := BigtableConfig{Servers: 4, Keys: 8, Operations: 30, Rate: 200, BudgetFraction: 0.1,
		KeyModel: Lognormal{P50: time.Millisecond, P99: 20 * time.Millisecond}, HedgeAfter: 5 * time.Millisecond}
	rep, err := RunBigtable(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Baseline.Succeeded != 30 || rep.Hedged.Succeeded != 30 || rep.Baseline.ExtraRequestsPct != 0 {
		t.Errorf("runs %+v %+v", rep.Baseline, rep.Hedged)
	}
	// The budget: hedges <= burst (one operation: 4) + 10% of 120.
	if w := rep.Hedged.Work; w.Started > 120+4+12 || w.ClientAttempts > 120+4+12 {
		t.Errorf("hedged work beyond the budget: %+v", w)
	}
	if rep.Paper.P999BeforeMs != 1800 {
		t.Errorf("paper %+v", rep.Paper)
	}
}

// The per-shard quantiles meet a stalls model at random phases, as the
// simulator and independent servers do, not always inside a stall.
func TestModelQuantilesAtRandomPhases(t *testing.T) {
	x := modelQuantiles(Stalls{Every: 100 * time.Millisecond, For: 10 * time.Millisecond, Base: Constant(time.Millisecond)}, 10_000, 1)
	if p50 := rankF(x, 0.5); p50 != 1 {
		t.Errorf("p50 %v ms, want 1 (most arrivals miss the stall)", p50)
	}
	if p95 := rankF(x, 0.95); p95 <= 1 || p95 > 11 {
		t.Errorf("p95 %v ms, want within a stall (1, 11]", p95)
	}
}

// A good-enough answer cancels shards it no longer needs, some before they
// reach a fixture; the extra attempts count hedges only, never negative.
func TestFanoutExtraAttemptsCountHedges(t *testing.T) {
	rep, err := RunFanout(context.Background(), FanoutConfig{Shards: 12, Need: 1, Requests: 10, Rate: 200, SimRequests: 1000,
		Model: Lognormal{P50: time.Millisecond, P99: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Policies {
		if p.ExtraAttemptsPct < 0 || (!strings.Contains(p.Policy, "hedging") && p.ExtraAttemptsPct != 0) {
			t.Errorf("%s: extra attempts %v%%, work %+v", p.Policy, p.ExtraAttemptsPct, p.Work)
		}
	}
}

func TestRunFanoutRefusesWhatLoopbackCannotHold(t *testing.T) {
	for _, cfg := range []FanoutConfig{{Shards: MaxLoopbackShards + 1}, {Requests: MaxLoopbackRequests + 1}} {
		if _, err := RunFanout(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "simulate") {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// Per-shard hedges are marked on the wire, so the fixtures count them:
// with every shard slower than the hedge delay, the budget's burst alone
// sends some.
func TestFanoutHedgesReachFixturesMarked(t *testing.T) {
	rep, err := RunFanout(context.Background(), FanoutConfig{Shards: 4, Need: 3, Requests: 5, Rate: 100, SimRequests: 1000,
		Model: Constant(20 * time.Millisecond), HedgeDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hedged := rep.Policies[1]
	if hedged.ExtraAttemptsPct <= 0 || hedged.Work.ClientAttempts <= 20 {
		t.Errorf("%s: extra %v%%, work %+v", hedged.Policy, hedged.ExtraAttemptsPct, hedged.Work)
	}
}
