package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/exp/bigtable"
	fanoutexp "github.com/tailgate-dev/tailgate/lab/exp/fanout"
	"github.com/tailgate-dev/tailgate/lab/fixture"
)

func runLabFanout(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lab fanout", `Requests fanned out to -shards shards of two replicas each: waiting for all
of them (measured next to the arithmetic's prediction), then the remedies one
by one: per-shard hedging, good enough (-need of -shards, marked partial), and
both. On loopback fixtures by default, cross-checked against the same policies
simulated; with -simulate, in the simulator only (no sockets, any fan-out),
with a check of the arithmetic 1 - (1 - p)^N and the shape of Table 1 of The
Tail at Scale.`, stderr)
	var o outputs
	o.register(fs)
	d := fanoutexp.Defaults()
	shards := fs.Int("shards", d.Shards, fmt.Sprintf("shards per request (loopback: 1 to %d; -simulate: up to %d)", fanoutexp.MaxLoopbackShards, fanoutexp.MaxSimShards))
	need := fs.Int("need", 0, "shards a good-enough answer needs (default shards - shards/20: 57 of 60)")
	model := fs.String("model", d.Model.String(), "latency model of every shard replica; see tailgate fixture -h")
	delay := fs.Duration("hedge-delay", 0, "per-shard hedge delay (default: the model's p95)")
	requests := fs.Int("requests", d.Requests, fmt.Sprintf("loopback requests per policy (1 to %d)", fanoutexp.MaxLoopbackRequests))
	rate := fs.Float64("rate", d.Rate, fmt.Sprintf("loopback requests per second (open loop; > 0; shards x rate at most %d)", fanoutexp.MaxShardRate))
	simulate := fs.Bool("simulate", false, "simulate instead of running loopback fixtures (-requests and -rate are then not used)")
	simRequests := fs.Int("sim-requests", d.SimRequests, fmt.Sprintf("simulated requests per policy (1 to %d; a million take about a second)", fanoutexp.MaxSimRequests))
	table1 := fs.Int("table1-fanout", fanoutexp.DefaultTable1Fanout, "with -simulate: fan-out of the Table 1 rows")
	spread := fs.Float64("shared-spread", fanoutexp.DefaultSharedSpread, fmt.Sprintf("with -simulate: sigma of a per-request latency factor all leaves share, for the second Table 1 (0 skips it; at most %d)", fanoutexp.MaxSharedSpread))
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	m, err := fixture.ParseModel(*model)
	if err != nil {
		return usageError(stderr, "lab fanout", err)
	}
	cfg := fanoutexp.Config{Shards: *shards, Need: *need, Model: m, HedgeDelay: *delay, Requests: *requests, Rate: *rate,
		SimRequests: *simRequests, Seed: o.seed, Progress: progress(stderr, "fanout")}
	if *simulate {
		opts := fanoutexp.SimOptions{Table1Fanout: *table1, SharedSpread: *spread}
		if *spread == 0 {
			opts.SharedSpread = -1
		}
		return o.run(ctx, "fanout", stdout, stderr, func() error { return cfg.ValidateSim(opts) }, func(ctx context.Context) (exp.Report, any, []any, error) {
			return simulatedFanout(ctx, cfg, opts)
		})
	}
	return o.run(ctx, "fanout", stdout, stderr, cfg.Validate, func(ctx context.Context) (exp.Report, any, []any, error) {
		rep, err := fanoutexp.Run(ctx, cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		type line struct {
			Experiment string `json:"experiment"`
			fanoutexp.Policy
			// Predicted is the arithmetic's, on the line that waits for all.
			Predicted *fanoutexp.Prediction `json:"predicted,omitempty"`
			// Simulated is the same policy in the simulator; AgreesWithSim
			// says whether its p50, p90 and p99 agree with this run's.
			Simulated     fanoutexp.Simulated `json:"simulated"`
			AgreesWithSim bool                `json:"agreesWithSimulation"`
		}
		var lines []any
		for i, p := range rep.Policies {
			l := line{Experiment: "fanout", Policy: p, Simulated: rep.Simulated[i], AgreesWithSim: true}
			if i == 0 {
				l.Predicted = &rep.WaitForAll
			}
			for _, c := range rep.CrossCheck {
				if c.Policy == p.Policy {
					l.AgreesWithSim = l.AgreesWithSim && c.Agrees
				}
			}
			lines = append(lines, l)
		}
		return rep, fanoutConfig(rep.Setup), lines, nil
	})
}

type fanoutLineConfig struct {
	Shards       int                  `json:"shards"`
	Need         int                  `json:"need"`
	Model        string               `json:"model"`
	HedgeDelayMs float64              `json:"hedgeDelayMs"`
	Requests     int                  `json:"requests"`
	Rate         float64              `json:"rate,omitempty"`
	PerShard     fanoutexp.Prediction `json:"perShard"`
}

func fanoutConfig(s fanoutexp.Setup) fanoutLineConfig {
	return fanoutLineConfig{s.Shards, s.Need, s.Model, s.HedgeDelayMs, s.Requests, s.Rate, s.PerShard}
}

func simulatedFanout(ctx context.Context, cfg fanoutexp.Config, opts fanoutexp.SimOptions) (exp.Report, any, []any, error) {
	rep, err := fanoutexp.Simulate(ctx, cfg, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	type policyLine struct {
		Experiment string `json:"experiment"`
		fanoutexp.Simulated
	}
	type arithmeticLine struct {
		Experiment string `json:"experiment"`
		fanoutexp.ArithmeticCheck
	}
	type table1Line struct {
		Experiment   string  `json:"experiment"`
		Fanout       int     `json:"fanout"`
		SharedSpread float64 `json:"sharedSpread"`
		fanoutexp.Table1Row
	}
	var lines []any
	for _, p := range rep.Policies {
		lines = append(lines, policyLine{"fanout-simulated", p})
	}
	for _, a := range rep.Arithmetic {
		lines = append(lines, arithmeticLine{"fanout-arithmetic", a})
	}
	for _, t := range rep.Table1 {
		for _, r := range t.Rows {
			lines = append(lines, table1Line{"fanout-table1", t.Fanout, t.SharedSpread, r})
		}
	}
	return rep, fanoutConfig(rep.Setup), lines, nil
}

func runLabBigtable(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lab bigtable", `The shape of the Bigtable benchmark of The Tail at Scale: each operation
reads -keys keys spread over -servers loopback fixtures, one batched request
per server; every key is also on the server half way round the ring, which a
request is hedged to after -hedge-after, within a budget of -budget extra
requests. p99.9 without and with hedging, and the extra requests. The paper
measured 1,800 ms -> 74 ms for 2% more requests; these figures are this
machine's own. With -simulate, the same against virtual servers.`, stderr)
	var o outputs
	o.register(fs)
	d := bigtable.Defaults()
	servers := fs.Int("servers", d.Servers, fmt.Sprintf("servers holding the table (2 to %d)", bigtable.MaxServers))
	keys := fs.Int("keys", d.Keys, fmt.Sprintf("keys read per operation, a multiple of -servers (up to %d)", bigtable.MaxKeys))
	model := fs.String("key-model", d.KeyModel.String(), "time to read one key; see tailgate fixture -h")
	after := fs.Duration("hedge-after", d.HedgeAfter, "hedge delay")
	ops := fs.Int("operations", d.Operations, fmt.Sprintf("loopback operations per run (1 to %d; below 1000, p99.9 is the slowest operation)", bigtable.MaxOperations))
	rate := fs.Float64("rate", d.Rate, fmt.Sprintf("loopback operations per second (open loop; > 0; servers x rate at most %d)", fanoutexp.MaxShardRate))
	budget := fs.Float64("budget", d.BudgetFraction, "hedges allowed per server request, in (0, 1]")
	simulate := fs.Bool("simulate", false, "simulate instead of running loopback fixtures (-operations and -rate are then not used)")
	simOps := fs.Int("sim-operations", d.SimOperations, fmt.Sprintf("simulated operations per run (1 to %d)", fanoutexp.MaxSimRequests))
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	m, err := fixture.ParseModel(*model)
	if err != nil {
		return usageError(stderr, "lab bigtable", err)
	}
	cfg := bigtable.Config{Servers: *servers, Keys: *keys, KeyModel: m, HedgeAfter: *after, Operations: *ops, Rate: *rate,
		BudgetFraction: *budget, SimOperations: *simOps, Seed: o.seed, Progress: progress(stderr, "bigtable")}
	type config struct {
		Servers        int            `json:"servers"`
		Keys           int            `json:"keys"`
		KeyModel       string         `json:"keyModel"`
		HedgeAfterMs   float64        `json:"hedgeAfterMs"`
		BudgetFraction float64        `json:"budgetFraction"`
		Operations     int            `json:"operations"`
		Rate           float64        `json:"rate,omitempty"`
		Paper          bigtable.Paper `json:"paper"`
	}
	configOf := func(s bigtable.Setup) config {
		return config{s.Servers, s.Keys, s.KeyModel, s.HedgeAfterMs, s.BudgetFraction, s.Operations, s.Rate, s.Paper}
	}
	if *simulate {
		return o.run(ctx, "bigtable", stdout, stderr, cfg.ValidateSim, func(ctx context.Context) (exp.Report, any, []any, error) {
			rep, err := bigtable.Simulate(ctx, cfg)
			if err != nil {
				return nil, nil, nil, err
			}
			type line struct {
				Experiment string `json:"experiment"`
				fanoutexp.Simulated
			}
			return rep, configOf(rep.Setup), []any{line{"bigtable-simulated", rep.Baseline}, line{"bigtable-simulated", rep.Hedged}}, nil
		})
	}
	return o.run(ctx, "bigtable", stdout, stderr, cfg.Validate, func(ctx context.Context) (exp.Report, any, []any, error) {
		rep, err := bigtable.Run(ctx, cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		type line struct {
			Experiment string `json:"experiment"`
			bigtable.Result
		}
		return rep, configOf(rep.Setup), []any{line{"bigtable", rep.Baseline}, line{"bigtable", rep.Hedged}}, nil
	})
}
