package fanout

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
)

func TestCrossCheckBounds(t *testing.T) {
	x := make([]float64, 300)
	for i := range x {
		x[i] = float64(i + 1) // 1..300 ms
	}
	lo, hi := load.QuantileRanks(300, 0.5, 0.01)
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

func TestSimulateFanoutReproducesTheArithmetic(t *testing.T) {
	rep, err := Simulate(context.Background(), Config{SimRequests: 20_000, Seed: 3},
		SimOptions{ArithmeticFanouts: []int{1, 10, 100}, Table1Fanout: 100})
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
	if err := exp.WriteHTML(&buf, "t", rep.Environment, rep); err != nil || !bytes.Contains(buf.Bytes(), []byte("<svg")) || !bytes.Contains(buf.Bytes(), []byte("Table 1 of the paper")) {
		t.Errorf("HTML: %v", err)
	}
}

func TestSimulateRefusesBadConfigs(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cfg  Config
		opts SimOptions
	}{
		{Config{Shards: 10, Need: 11}, SimOptions{}},
		{Config{SimRequests: -1}, SimOptions{}},
		{Config{HedgeDelay: -time.Millisecond}, SimOptions{}},
		{Config{}, SimOptions{Table1Fanout: MaxSimShards + 1}},
		{Config{}, SimOptions{ArithmeticFanouts: []int{0}}},
		{Config{}, SimOptions{SharedSpread: 10}},
		{Config{}, SimOptions{SharedSpread: math.NaN()}},
		{Config{Model: fixture.SlowIDs{IDs: []uint64{1}}}, SimOptions{}},
	} {
		if _, err := Simulate(ctx, c.cfg, c.opts); err == nil {
			t.Errorf("%+v %+v: no error", c.cfg, c.opts)
		}
	}
}

// The loopback fanout run, small: every policy runs, the client's shard
// attempts reconcile with the fixtures', partial results are counted, and
// every policy is cross-checked with the simulator.
func TestRunFanoutSmall(t *testing.T) {
	cfg := Config{Shards: 4, Need: 3, Requests: 20, Rate: 200, SimRequests: 5_000,
		Model: fixture.Lognormal{P50: time.Millisecond, P99: 5 * time.Millisecond}}
	var progress []int
	cfg.Progress = func(done, total int) { progress = append(progress, done, total) }
	rep, err := Run(context.Background(), cfg)
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
	if err := exp.WriteHTML(&buf, "t", rep.Environment, rep); err != nil || !bytes.Contains(buf.Bytes(), []byte("Cross-check")) {
		t.Errorf("HTML: %v", err)
	}
}

// A good-enough answer cancels shards it no longer needs, some before they
// reach a fixture; the extra attempts count hedges only, never negative.
func TestFanoutExtraAttemptsCountHedges(t *testing.T) {
	rep, err := Run(context.Background(), Config{Shards: 12, Need: 1, Requests: 10, Rate: 200, SimRequests: 1000,
		Model: fixture.Lognormal{P50: time.Millisecond, P99: 20 * time.Millisecond}})
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
	for _, cfg := range []Config{{Shards: MaxLoopbackShards + 1}, {Requests: MaxLoopbackRequests + 1}} {
		if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "simulate") {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// Per-shard hedges are marked on the wire, so the fixtures count them:
// with every shard slower than the hedge delay, the budget's burst alone
// sends some.
func TestFanoutHedgesReachFixturesMarked(t *testing.T) {
	rep, err := Run(context.Background(), Config{Shards: 4, Need: 3, Requests: 5, Rate: 100, SimRequests: 1000,
		Model: fixture.Constant(20 * time.Millisecond), HedgeDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hedged := rep.Policies[1]
	if hedged.ExtraAttemptsPct <= 0 || hedged.Work.ClientAttempts <= 20 {
		t.Errorf("%s: extra %v%%, work %+v", hedged.Policy, hedged.ExtraAttemptsPct, hedged.Work)
	}
}
