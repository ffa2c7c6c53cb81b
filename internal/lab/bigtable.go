package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tailgate-dev/tailgate/fanout"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/lab/report"
	"github.com/tailgate-dev/tailgate/internal/lab/sim"
)

// BigtableConfig configures the bigtable experiment. Zero fields take the
// defaults shown.
type BigtableConfig struct {
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
	KeyModel Model
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
	// SimOperations is the number of operations SimulateBigtable
	// simulates per run. Default 100000.
	SimOperations int
	// Seed makes arrivals, fixtures and the simulation reproducible.
	// Default 1.
	Seed uint64
	// Progress, when non-nil, is told as each run completes.
	Progress func(done, total int)
}

// DefaultBigtableKeyModel is BigtableConfig.KeyModel's default.
var DefaultBigtableKeyModel Model = Spikes{Fraction: 0.000005, Slow: 1800 * time.Millisecond,
	Base: Lognormal{P50: time.Millisecond, P99: 6 * time.Millisecond}}

// The paper's figures for its Bigtable benchmark (The Tail at Scale, p. 79).
const (
	PaperBigtableP999BeforeMs = 1800
	PaperBigtableP999AfterMs  = 74
	PaperBigtableExtraPct     = 2
)

// BigtableRun is one run of the bigtable experiment.
type BigtableRun struct {
	Label string `json:"label"`
	Summary
	// ExtraRequestsPct is server requests beyond one per server and
	// operation, in %, by the servers' own counters.
	ExtraRequestsPct float64 `json:"extraRequestsPct"`
	Work             Work    `json:"work"`
	latencies        []float64
}

// BigtableSetup is what a bigtable report, loopback or simulated, says
// about its run before its results.
type BigtableSetup struct {
	Version        int     `json:"version"`
	Experiment     string  `json:"experiment"`
	Servers        int     `json:"servers"`
	Keys           int     `json:"keys"`
	KeyModel       string  `json:"keyModel"`
	Model          string  `json:"model"`
	HedgeAfterMs   float64 `json:"hedgeAfterMs"`
	BudgetFraction float64 `json:"budgetFraction"`
	// Operations per run; Rate their arrival rate (loopback only).
	Operations  int           `json:"operations"`
	Rate        float64       `json:"rate,omitempty"`
	Environment Environment   `json:"environment"`
	Paper       BigtablePaper `json:"paper"`
}

func newBigtableSetup(experiment string, cfg BigtableConfig, model Model, operations int, rate float64) BigtableSetup {
	return BigtableSetup{Version: ReportVersion, Experiment: experiment, Servers: cfg.Servers, Keys: cfg.Keys,
		KeyModel: cfg.KeyModel.String(), Model: model.String(), HedgeAfterMs: ms(cfg.HedgeAfter), BudgetFraction: cfg.BudgetFraction,
		Operations: operations, Rate: rate, Environment: newEnvironment(cfg.Seed),
		Paper: BigtablePaper{P999BeforeMs: PaperBigtableP999BeforeMs, P999AfterMs: PaperBigtableP999AfterMs, ExtraPct: PaperBigtableExtraPct}}
}

// BigtableReport is the bigtable experiment's report.
type BigtableReport struct {
	BigtableSetup
	Baseline BigtableRun `json:"baseline"`
	Hedged   BigtableRun `json:"hedged"`
}

// BigtablePaper holds the paper's figures, for comparison only: the
// loopback run's are our own.
type BigtablePaper struct {
	P999BeforeMs float64 `json:"p999BeforeMs"`
	P999AfterMs  float64 `json:"p999AfterMs"`
	ExtraPct     float64 `json:"extraPct"`
}

// RunBigtable reproduces the shape of the paper's Bigtable benchmark on
// loopback: each operation reads Keys keys spread over Servers fixtures,
// one batched request per server; every key is also held by the server
// half way round the ring, which a request is hedged to after HedgeAfter.
// It runs without hedging, then with (within a budget of BudgetFraction
// extra requests, burst one operation's worth, and no overload gate: the
// paper hedged every late request), and reports p99.9 and the extra
// requests.
func RunBigtable(ctx context.Context, cfg BigtableConfig) (*BigtableReport, error) {
	cfg, model, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rep := &BigtableReport{BigtableSetup: newBigtableSetup("bigtable", cfg, model, cfg.Operations, cfg.Rate)}

	shards := cfg.Servers
	servers, fixtures, err := startShards(cfg.Servers, 1, model, cfg.Seed)
	defer closeAll(fixtures)
	if err != nil {
		return nil, err
	}
	// Shard s lives on server s and on the server half way round the ring.
	urls := make([][]string, shards)
	for s := range urls {
		urls[s] = []string{servers[s][0], servers[(s+cfg.Servers/2)%cfg.Servers][0]}
	}
	base := hedge.NewBaseTransport()
	base.MaxIdleConns = 0 // no overall cap: every server keeps its own pool
	base.MaxIdleConnsPerHost = 256
	defer base.CloseIdleConnections()
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
	for i, r := range runs {
		f, err := fanout.New(fanout.Config{Shards: shards, Replicas: 2, Policy: r.policy})
		if err != nil {
			return nil, err
		}
		fp, err := runFanoutPolicy(ctx, f, client, urls, fixtures, Load{Requests: cfg.Operations, Rate: cfg.Rate, Seed: cfg.Seed + uint64(i)})
		if err != nil {
			return nil, fmt.Errorf("lab: bigtable %s: %w", r.label, err)
		}
		run := BigtableRun{Label: r.label, Summary: fp.Summary, ExtraRequestsPct: fp.ExtraAttemptsPct, Work: fp.Work, latencies: fp.latencies}
		if i == 0 {
			rep.Baseline = run
		} else {
			rep.Hedged = run
		}
		if cfg.Progress != nil {
			cfg.Progress(i+1, len(runs))
		}
	}
	rep.Environment.finish()
	return rep, nil
}

// withDefaults fills in cfg's defaults, checks it, and returns the model
// of one server request: a batch of Keys/Servers keys.
func (cfg BigtableConfig) withDefaults() (BigtableConfig, Model, error) {
	if cfg.Servers == 0 {
		cfg.Servers = 100
	}
	if cfg.Keys == 0 {
		cfg.Keys = 1000
	}
	if cfg.KeyModel == nil {
		cfg.KeyModel = DefaultBigtableKeyModel
	}
	if cfg.HedgeAfter == 0 {
		cfg.HedgeAfter = 10 * time.Millisecond
	}
	if cfg.Operations == 0 {
		cfg.Operations = 300
	}
	if cfg.Rate == 0 {
		cfg.Rate = 5
	}
	if cfg.BudgetFraction == 0 {
		cfg.BudgetFraction = 0.1
	}
	if cfg.SimOperations == 0 {
		cfg.SimOperations = 100_000
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Servers < 2 || cfg.Keys < 1 || cfg.Keys%cfg.Servers != 0 || cfg.Operations < 1 || cfg.SimOperations < 1 || cfg.SimOperations > sim.MaxRequests || cfg.Rate < 0 || cfg.HedgeAfter < 0 || !(cfg.BudgetFraction > 0 && cfg.BudgetFraction <= 1) {
		return cfg, nil, errors.New("lab: bigtable needs at least 2 servers, keys a multiple of servers, 1 operation, a non-negative rate and hedge delay, and a budget fraction in (0, 1]")
	}
	model := Batch{Keys: cfg.Keys / cfg.Servers, Base: cfg.KeyModel}
	if err := validateModel(model); err != nil {
		return cfg, nil, err
	}
	return cfg, model, nil
}

// Section implements Sectioner.
func (r *BigtableReport) Section() report.Section {
	b := latencyCDF(r.Baseline.Label, r.Baseline.latencies, r.Baseline.Requests, true)
	h := latencyCDF(r.Hedged.Label, r.Hedged.latencies, r.Hedged.Requests, false)
	rank := ""
	if r.Operations < 1000 {
		rank = fmt.Sprintf(" With %d operations, p99.9 is the slowest of them (nearest rank): whether it is a stall depends on the seed; run 1,000 or more for a p99.9 that is one.", r.Operations)
	}
	return report.Section{
		Heading: fmt.Sprintf("bigtable: %d keys from %d servers", r.Keys, r.Servers),
		Text: fmt.Sprintf("The shape of the paper's Bigtable benchmark, on loopback: %d operations at %.0f/s, each reading %d keys spread over %d servers, one request of %d keys per server (%s per key). "+
			"Each key is also on the server half way round the ring, which a request is hedged to after %.0f ms, within a budget of %.0f%% extra requests. "+
			"The paper measured p99.9 %d ms without hedging and %d ms with, for %d%% more requests; these figures are this machine's own.%s",
			r.Operations, r.Rate, r.Keys, r.Servers, r.Keys/r.Servers, r.KeyModel, r.HedgeAfterMs, 100*r.BudgetFraction,
			PaperBigtableP999BeforeMs, PaperBigtableP999AfterMs, PaperBigtableExtraPct, rank),
		Plots: []report.Plot{{
			Title: "Operation latency CDF", XLabel: "latency (ms, log scale)", YLabel: "fraction of operations", LogX: true,
			Series:  []report.Series{b, h},
			Caption: "Without hedging, the operations that meet a stalled server wait for it; with hedging, the replica answers instead.",
		}},
		Tables: []report.Table{{
			Title:   "Latency and extra requests",
			Columns: append(append([]string{}, latencyColumns...), "extra requests %"),
			Rows: [][]string{
				append(latencyRow(r.Baseline.Label, r.Baseline.Summary), f2(r.Baseline.ExtraRequestsPct)),
				append(latencyRow(r.Hedged.Label, r.Hedged.Summary), f2(r.Hedged.ExtraRequestsPct)),
				{"paper: no hedging", "", "", "", strconv.Itoa(PaperBigtableP999BeforeMs), "", ""},
				{"paper: hedge after 10ms", "", "", "", strconv.Itoa(PaperBigtableP999AfterMs), "", strconv.Itoa(PaperBigtableExtraPct)},
			},
		}},
	}
}

// BigtableSimReport is the simulated bigtable experiment's report.
type BigtableSimReport struct {
	BigtableSetup
	Baseline SimulatedPolicy `json:"baseline"`
	Hedged   SimulatedPolicy `json:"hedged"`
}

// SimulateBigtable runs the bigtable experiment's two runs in the
// simulator, cfg.SimOperations operations each: every server request is a
// batch of Keys/Servers key reads, hedged after HedgeAfter within the same
// budget (the simulator has no overload gate, and the loopback run
// disables it). Operations and Rate are the loopback run's and not used.
func SimulateBigtable(ctx context.Context, cfg BigtableConfig) (*BigtableSimReport, error) {
	cfg, model, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	lat, err := simLatency(model)
	if err != nil {
		return nil, err
	}
	rep := &BigtableSimReport{BigtableSetup: newBigtableSetup("bigtable-simulated", cfg, model, cfg.SimOperations, 0)}
	runs := []sim.Policy{
		{Name: "no hedging", Fanout: cfg.Servers},
		{Name: "hedge after " + cfg.HedgeAfter.String(), Fanout: cfg.Servers, HedgeAfter: cfg.HedgeAfter,
			BudgetFraction: cfg.BudgetFraction, BudgetBurst: float64(cfg.Servers)},
	}
	for i, p := range runs {
		r, err := sim.Run(p, lat, sim.Options{Requests: cfg.SimOperations, Seed: cfg.Seed*1_000_003 + uint64(i)})
		if err != nil {
			return nil, err
		}
		if i == 0 {
			rep.Baseline = simulatedPolicy(r, false)
		} else {
			rep.Hedged = simulatedPolicy(r, false)
		}
		if cfg.Progress != nil {
			cfg.Progress(i+1, len(runs))
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	rep.Environment.finish()
	return rep, nil
}

// Section implements Sectioner.
func (r *BigtableSimReport) Section() report.Section {
	row := func(p SimulatedPolicy) []string {
		return []string{p.Policy, f1(p.P50Ms), f1(p.P90Ms), f1(p.P99Ms), f1(p.P999Ms), f1(p.MaxMs), f2(p.ExtraAttemptsPct)}
	}
	return report.Section{
		Heading: fmt.Sprintf("bigtable, simulated: %d keys from %d servers, %d operations", r.Keys, r.Servers, r.Operations),
		Text: fmt.Sprintf("The bigtable experiment against virtual servers: each operation reads %d keys from each of %d servers (%s per key), "+
			"hedged after %.0f ms within a budget of %.0f%% extra requests. The paper measured p99.9 %d ms without hedging and %d ms with, for %d%% more requests.",
			r.Keys/r.Servers, r.Servers, r.KeyModel, r.HedgeAfterMs, 100*r.BudgetFraction, PaperBigtableP999BeforeMs, PaperBigtableP999AfterMs, PaperBigtableExtraPct),
		Tables: []report.Table{{
			Title:   "Latency and extra requests",
			Columns: append(append([]string{}, latencyColumns...), "extra requests %"),
			Rows: [][]string{row(r.Baseline), row(r.Hedged),
				{"paper: no hedging", "", "", "", strconv.Itoa(PaperBigtableP999BeforeMs), "", ""},
				{"paper: hedge after 10ms", "", "", "", strconv.Itoa(PaperBigtableP999AfterMs), "", strconv.Itoa(PaperBigtableExtraPct)}},
		}},
	}
}
