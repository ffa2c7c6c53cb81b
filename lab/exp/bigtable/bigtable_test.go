package bigtable

import (
	"context"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/lab/fixture"
)

func TestSimulateBigtableHedgesWithinItsBudget(t *testing.T) {
	cfg := Config{Servers: 20, Keys: 100, SimOperations: 5_000, BudgetFraction: 0.05,
		KeyModel: fixture.Spikes{Fraction: 0.0002, Slow: time.Second, Base: fixture.Lognormal{P50: time.Millisecond, P99: 6 * time.Millisecond}}}
	rep, err := Simulate(context.Background(), cfg)
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

func TestRunBigtableSmall(t *testing.T) {
	cfg := Config{Servers: 4, Keys: 8, Operations: 30, Rate: 200, BudgetFraction: 0.1,
		KeyModel: fixture.Lognormal{P50: time.Millisecond, P99: 20 * time.Millisecond}, HedgeAfter: 5 * time.Millisecond}
	rep, err := Run(context.Background(), cfg)
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

func TestSimulateRefusesKeysNotAMultipleOfServers(t *testing.T) {
	if _, err := Simulate(context.Background(), Config{Servers: 10, Keys: 15}); err == nil {
		t.Error("keys not a multiple of servers: no error")
	}
}
