package bigtable

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/tailgate-dev/tailgate/fanout"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	fanoutexp "github.com/tailgate-dev/tailgate/lab/exp/fanout"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/sim"
)

// Config configures the bigtable experiment. Zero fields take the
// defaults shown.
type Config struct {
	// Servers is how many fixtures hold the table. Default 100.
	Servers int
	// Keys read per operation, a multiple of Servers: each server holds
	// Keys/Servers of them, which an operation reads in one request (a
	// batch that takes as long as its slowest key). Default 1000.
	Keys int
	// KeyModel is the time to read one key. Default
	// spikes:frac=0.000005,slow=1800ms,base=lognormal:p50=1ms,p99=6ms:
	// quick reads with rare stalls of 1.8 s (a compaction, a collection),
	// which hold up 0.5% of operations.
	KeyModel fixture.Model
	// HedgeAfter is the hedge delay. Default 10ms, as in the paper.
	HedgeAfter time.Duration
	// Operations per run. Default 300 (2 minutes at the default rate):
	// with the default key model about 0.5% of operations meet a stall.
	// p99.9 of fewer than 1,000 operations is their slowest (nearest
	// rank), which is a stall for most seeds but not all (about one in
	// five shows none); 1,000 or more make p99.9 a stall for nearly every
	// seed.
	Operations int
	// Rate of operations per second (open loop). Default 5: each
	// operation is a burst of Servers requests, which on a 2-core machine
	// takes about 10 ms of CPU by itself; faster, the bursts overlap, most
	// server requests come back later than HedgeAfter, and the budget,
	// not the stalls, decides which are hedged.
	Rate float64
	// BudgetFraction bounds the hedges to this share of server requests
	// (burst: one operation's worth). Default 0.1.
	BudgetFraction float64
	// SimOperations is the number of operations Simulate
	// simulates per run. Default 100000.
	SimOperations int
	// Seed makes arrivals, fixtures and the simulation reproducible.
	// Default 1.
	Seed uint64
	// Progress, when non-nil, is told as each run completes.
	Progress func(done, total int)
}

// Defaults returns the configuration a zero Config runs with.
func Defaults() Config {
	return Config{Servers: 100, Keys: 1000, KeyModel: fixture.Spikes{Fraction: 0.000005, Slow: 1800 * time.Millisecond,
		Base: fixture.Lognormal{P50: time.Millisecond, P99: 6 * time.Millisecond}}, HedgeAfter: 10 * time.Millisecond, Operations: 300,
		Rate: 5, BudgetFraction: 0.1, SimOperations: 100_000, Seed: 1}
}

func (cfg Config) withDefaults() Config {
	d := Defaults()
	exp.Default(&cfg.Servers, d.Servers)
	exp.Default(&cfg.Keys, d.Keys)
	exp.Default(&cfg.HedgeAfter, d.HedgeAfter)
	exp.Default(&cfg.Operations, d.Operations)
	exp.Default(&cfg.Rate, d.Rate)
	exp.Default(&cfg.BudgetFraction, d.BudgetFraction)
	exp.Default(&cfg.SimOperations, d.SimOperations)
	exp.Default(&cfg.Seed, d.Seed)
	if cfg.KeyModel == nil {
		cfg.KeyModel = d.KeyModel
	}
	return cfg
}

// Limits of a bigtable run; on loopback, the servers take at most
// fanout's MaxShardRate requests per second.
const (
	MaxServers    = 200
	MaxKeys       = 100_000
	MaxOperations = 10_000
)

// Validate checks cfg for a loopback run (Run) as given, with its
// defaults filled in (Run fills them first): a zero where a default goes
// is an error here. Its errors wrap exp.ErrConfig or fixture.ErrModel.
func (cfg Config) Validate() error {
	c := cfg.check()
	exp.Within(c, "operations", cfg.Operations, 1, MaxOperations)
	c.Check(cfg.Rate > 0 && cfg.Rate*float64(cfg.Servers) <= fanoutexp.MaxShardRate, "rate", cfg.Rate,
		"must be above 0, with servers x rate at most %d server requests/s", fanoutexp.MaxShardRate)
	return c.Err()
}

// ValidateSim is Validate for a simulated run (Simulate), which does not
// use Operations and Rate.
func (cfg Config) ValidateSim() error { return cfg.check().Err() }

func (cfg Config) check() *exp.Checker {
	c := exp.NewChecker("bigtable")
	exp.Within(c, "servers", cfg.Servers, 2, MaxServers)
	c.Check(cfg.Keys >= cfg.Servers && cfg.Keys <= MaxKeys && cfg.Keys%cfg.Servers == 0, "keys", cfg.Keys,
		"must be a multiple of servers %d, at most %d", cfg.Servers, MaxKeys)
	exp.Above(c, "hedge-after", cfg.HedgeAfter, 0, time.Minute)
	exp.Above(c, "budget", cfg.BudgetFraction, 0, 1)
	exp.Within(c, "sim-operations", cfg.SimOperations, 1, fanoutexp.MaxSimRequests)
	c.Check(cfg.KeyModel != nil, "key-model", nil, "must be given")
	if cfg.KeyModel != nil && c.Err() == nil {
		c.Fail(fixture.ValidateModel(cfg.model()))
	}
	return c
}

// model is the model of one server request: a batch of Keys/Servers keys.
func (cfg Config) model() fixture.Model {
	return fixture.Batch{Keys: cfg.Keys / cfg.Servers, Base: cfg.KeyModel}
}

// The paper's figures for its Bigtable benchmark (The Tail at Scale, p. 79).
const (
	paperP999BeforeMs = 1800
	paperP999AfterMs  = 74
	paperExtraPct     = 2
)

// Result is one run of the bigtable experiment.
type Result struct {
	Label string `json:"label"`
	load.Summary
	// ExtraRequestsPct is server requests beyond one per server and
	// operation, in %, by the servers' own counters.
	ExtraRequestsPct float64  `json:"extraRequestsPct"`
	Work             exp.Work `json:"work"`
	latencies        []float64
}

// Setup is what a bigtable report, loopback or simulated, says
// about its run before its results.
type Setup struct {
	exp.Header
	Servers        int     `json:"servers"`
	Keys           int     `json:"keys"`
	KeyModel       string  `json:"keyModel"`
	Model          string  `json:"model"`
	HedgeAfterMs   float64 `json:"hedgeAfterMs"`
	BudgetFraction float64 `json:"budgetFraction"`
	// Operations per run; Rate their arrival rate (loopback only).
	Operations int     `json:"operations"`
	Rate       float64 `json:"rate,omitempty"`
	Paper      Paper   `json:"paper"`
}

func newSetup(experiment string, cfg Config, model fixture.Model, operations int, rate float64) Setup {
	return Setup{Header: exp.Start(experiment, cfg.Seed), Servers: cfg.Servers, Keys: cfg.Keys,
		KeyModel: cfg.KeyModel.String(), Model: model.String(), HedgeAfterMs: load.Ms(cfg.HedgeAfter), BudgetFraction: cfg.BudgetFraction,
		Operations: operations, Rate: rate,
		Paper: Paper{P999BeforeMs: paperP999BeforeMs, P999AfterMs: paperP999AfterMs, ExtraPct: paperExtraPct}}
}

// Report is the bigtable experiment's report.
type Report struct {
	Setup
	Baseline Result `json:"baseline"`
	Hedged   Result `json:"hedged"`
}

// Paper holds the paper's figures, for comparison only: the
// loopback run's are our own.
type Paper struct {
	P999BeforeMs float64 `json:"p999BeforeMs"`
	P999AfterMs  float64 `json:"p999AfterMs"`
	ExtraPct     float64 `json:"extraPct"`
}

// Run reproduces the shape of the paper's Bigtable benchmark on
// loopback: each operation reads Keys keys spread over Servers fixtures,
// one batched request per server; every key is also held by the server
// half way round the ring, which a request is hedged to after HedgeAfter.
// It runs without hedging, then with (within a budget of BudgetFraction
// extra requests, burst one operation's worth, and no overload gate: the
// paper hedged every late request), and reports p99.9 and the extra
// requests.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	model := cfg.model()
	rep := &Report{Setup: newSetup("bigtable", cfg, model, cfg.Operations, cfg.Rate)}

	shards := cfg.Servers
	var rig exp.Rig
	defer rig.Close()
	servers, fixtures, err := rig.StartShards(cfg.Servers, 1, model, cfg.Seed)
	if err != nil {
		return nil, err
	}
	// Shard s lives on server s and on the server half way round the ring.
	urls := make([][]string, shards)
	for s := range urls {
		urls[s] = []string{servers[s][0], servers[(s+cfg.Servers/2)%cfg.Servers][0]}
	}
	base := rig.Transport()
	base.MaxIdleConns = 0 // no overall cap: every server keeps its own pool
	base.MaxIdleConnsPerHost = 256
	client := &http.Client{Transport: base, Timeout: 10 * time.Second}

	budget, err := hedge.NewBudget(cfg.BudgetFraction, float64(shards))
	if err != nil {
		return nil, err
	}
	runs := []struct {
		label  string
		policy hedge.Policy
	}{
		{"no hedging", hedge.Policy{MaxAttempts: 1}},
		{"hedge after " + cfg.HedgeAfter.String(), hedge.Policy{Delay: cfg.HedgeAfter, Budget: budget, Gate: hedge.Gate{Disabled: true}}},
	}
	out := []*Result{&rep.Baseline, &rep.Hedged}
	err = exp.Run(ctx, &rep.Header, len(runs), cfg.Progress, func(i int) error {
		r := runs[i]
		f, err := fanout.New(fanout.Config{Shards: shards, Replicas: 2, Policy: r.policy})
		if err != nil {
			return err
		}
		fp, err := fanoutexp.RunPolicy(ctx, f, client, urls, fixtures, load.Config{Requests: cfg.Operations, Rate: cfg.Rate, Seed: cfg.Seed + uint64(i)})
		if err != nil {
			return fmt.Errorf("lab: bigtable %s: %w", r.label, err)
		}
		*out[i] = Result{Label: r.label, Summary: fp.Summary, ExtraRequestsPct: fp.ExtraAttemptsPct, Work: fp.Work, latencies: fp.Latencies()}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// SimReport is the simulated bigtable experiment's report.
type SimReport struct {
	Setup
	Baseline fanoutexp.Simulated `json:"baseline"`
	Hedged   fanoutexp.Simulated `json:"hedged"`
}

// Simulate runs the bigtable experiment's two runs in the
// simulator, cfg.SimOperations operations each: every server request is a
// batch of Keys/Servers key reads, hedged after HedgeAfter within the same
// budget (the simulator has no overload gate, and the loopback run
// disables it). Operations and Rate are the loopback run's and not used.
func Simulate(ctx context.Context, cfg Config) (*SimReport, error) {
	cfg = cfg.withDefaults()
	if err := cfg.ValidateSim(); err != nil {
		return nil, err
	}
	model := cfg.model()
	lat, err := fixture.SimLatency(model)
	if err != nil {
		return nil, err
	}
	rep := &SimReport{Setup: newSetup("bigtable-simulated", cfg, model, cfg.SimOperations, 0)}
	runs := []sim.Policy{
		{Name: "no hedging", Fanout: cfg.Servers},
		{Name: "hedge after " + cfg.HedgeAfter.String(), Fanout: cfg.Servers, HedgeAfter: cfg.HedgeAfter,
			BudgetFraction: cfg.BudgetFraction, BudgetBurst: float64(cfg.Servers)},
	}
	out := []*fanoutexp.Simulated{&rep.Baseline, &rep.Hedged}
	err = exp.Run(ctx, &rep.Header, len(runs), cfg.Progress, func(i int) error {
		r, err := sim.Run(runs[i], lat, sim.Options{Requests: cfg.SimOperations, Seed: cfg.Seed*1_000_003 + uint64(i)})
		*out[i] = fanoutexp.FromSim(r, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}
