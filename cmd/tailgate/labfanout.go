package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tailgate-dev/tailgate/internal/lab"
)

// Limits of the fan-out experiments. On loopback every shard replica is a
// fixture with its own listener, and each request is a burst of shard
// requests; simulated runs cost time in proportion to their requests.
const (
	maxLoopbackShards     = 200
	maxLoopbackRequests   = 10_000
	maxShardRequestsPerS  = 5_000
	maxSimulatedShards    = 1_000_000
	maxSimulatedRequests  = 10_000_000
	maxBigtableServers    = 200
	maxBigtableKeys       = 100_000
	maxBigtableOperations = 10_000
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
	shards := fs.Int("shards", 60, fmt.Sprintf("shards per request (loopback: 1 to %d; -simulate: up to %d)", maxLoopbackShards, maxSimulatedShards))
	need := fs.Int("need", 0, "shards a good-enough answer needs (default shards - shards/20: 57 of 60)")
	model := fs.String("model", "lognormal:p50=8ms,p99=90ms", "latency model of every shard replica; see tailgate fixture -h")
	delay := fs.Duration("hedge-delay", 0, "per-shard hedge delay (default: the model's p95)")
	requests := fs.Int("requests", 300, fmt.Sprintf("loopback requests per policy (1 to %d)", maxLoopbackRequests))
	rate := fs.Float64("rate", 15, fmt.Sprintf("loopback requests per second (open loop; > 0; shards x rate at most %d)", maxShardRequestsPerS))
	simulate := fs.Bool("simulate", false, "simulate instead of running loopback fixtures (-requests and -rate are then not used)")
	simRequests := fs.Int("sim-requests", lab.DefaultSimRequests, fmt.Sprintf("simulated requests per policy (1 to %d; a million take about a second)", maxSimulatedRequests))
	table1 := fs.Int("table1-fanout", lab.DefaultTable1Fanout, "with -simulate: fan-out of the Table 1 rows")
	spread := fs.Float64("shared-spread", lab.DefaultSharedSpread, "with -simulate: sigma of a per-request latency factor all leaves share, for the second Table 1 (0 skips it; at most 3)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	limit := maxLoopbackShards
	if *simulate {
		limit = maxSimulatedShards
	}
	switch {
	case *shards < 1 || *shards > limit:
		return usageError(stderr, "lab fanout", fmt.Errorf("-shards %d must be within [1, %d]", *shards, limit))
	case *need < 0 || *need > *shards:
		return usageError(stderr, "lab fanout", fmt.Errorf("-need %d must be within [1, -shards] (0: the default)", *need))
	case *delay < 0 || *delay > time.Minute:
		return usageError(stderr, "lab fanout", fmt.Errorf("-hedge-delay %v must be within [0, 1m]", *delay))
	case *simRequests < 1 || *simRequests > maxSimulatedRequests:
		return usageError(stderr, "lab fanout", fmt.Errorf("-sim-requests %d must be within [1, %d]", *simRequests, maxSimulatedRequests))
	case *table1 < 1 || *table1 > maxSimulatedShards:
		return usageError(stderr, "lab fanout", fmt.Errorf("-table1-fanout %d must be within [1, %d]", *table1, maxSimulatedShards))
	case !(*spread >= 0 && *spread <= 3):
		return usageError(stderr, "lab fanout", fmt.Errorf("-shared-spread %v must be within [0, 3]", *spread))
	}
	if !*simulate {
		switch {
		case *requests < 1 || *requests > maxLoopbackRequests:
			return usageError(stderr, "lab fanout", fmt.Errorf("-requests %d must be within [1, %d]", *requests, maxLoopbackRequests))
		case !(*rate > 0) || *rate*float64(*shards) > maxShardRequestsPerS:
			return usageError(stderr, "lab fanout", fmt.Errorf("-rate %v must be above 0, with -shards x -rate at most %d shard requests/s", *rate, maxShardRequestsPerS))
		}
	}
	m, err := lab.ParseModel(*model)
	if err != nil {
		return usageError(stderr, "lab fanout", err)
	}
	if err := o.check(); err != nil {
		return usageError(stderr, "lab fanout", err)
	}
	cfg := lab.FanoutConfig{Shards: *shards, Need: *need, Model: m, HedgeDelay: *delay, Requests: *requests, Rate: *rate,
		SimRequests: *simRequests, Seed: o.seed, Progress: progress(stderr, "fanout")}
	if *simulate {
		opts := lab.SimulateOptions{Table1Fanout: *table1, SharedSpread: *spread}
		if *spread == 0 {
			opts.SharedSpread = -1
		}
		return simulatedFanout(ctx, cfg, opts, &o, stdout, stderr)
	}
	rep, err := lab.RunFanout(ctx, cfg)
	if err != nil {
		return failed(stderr, "fanout", err)
	}
	type line struct {
		Experiment string `json:"experiment"`
		lab.FanoutPolicy
		// Predicted is the arithmetic's, on the line that waits for all.
		Predicted *lab.Prediction `json:"predicted,omitempty"`
		// Simulated is the same policy in the simulator; AgreesWithSim
		// says whether its p50, p90 and p99 agree with this run's.
		Simulated     lab.SimulatedPolicy `json:"simulated"`
		AgreesWithSim bool                `json:"agreesWithSimulation"`
	}
	var lines []any
	for i, p := range rep.Policies {
		l := line{Experiment: "fanout", FanoutPolicy: p, Simulated: rep.Simulated[i], AgreesWithSim: true}
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
	return o.write("fanout", stdout, stderr, rep, rep.Environment, fanoutConfig(rep.Shards, rep.Need, rep.Model, rep.HedgeDelayMs, rep.Requests, rep.Rate, rep.PerShard), lines...)
}

type fanoutLineConfig struct {
	Shards       int            `json:"shards"`
	Need         int            `json:"need"`
	Model        string         `json:"model"`
	HedgeDelayMs float64        `json:"hedgeDelayMs"`
	Requests     int            `json:"requests"`
	Rate         float64        `json:"rate,omitempty"`
	PerShard     lab.Prediction `json:"perShard"`
}

func fanoutConfig(shards, need int, model string, delayMs float64, requests int, rate float64, perShard lab.Prediction) fanoutLineConfig {
	return fanoutLineConfig{shards, need, model, delayMs, requests, rate, perShard}
}

func simulatedFanout(ctx context.Context, cfg lab.FanoutConfig, opts lab.SimulateOptions, o *outputs, stdout, stderr io.Writer) int {
	rep, err := lab.SimulateFanout(ctx, cfg, opts)
	if err != nil {
		return failed(stderr, "fanout", err)
	}
	type policyLine struct {
		Experiment string `json:"experiment"`
		lab.SimulatedPolicy
	}
	type arithmeticLine struct {
		Experiment string `json:"experiment"`
		lab.ArithmeticCheck
	}
	type table1Line struct {
		Experiment   string  `json:"experiment"`
		Fanout       int     `json:"fanout"`
		SharedSpread float64 `json:"sharedSpread"`
		lab.Table1Row
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
	return o.write("fanout", stdout, stderr, rep, rep.Environment, fanoutConfig(rep.Shards, rep.Need, rep.Model, rep.HedgeDelayMs, rep.Requests, 0, rep.PerShard), lines...)
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
	servers := fs.Int("servers", 100, fmt.Sprintf("servers holding the table (2 to %d)", maxBigtableServers))
	keys := fs.Int("keys", 1000, fmt.Sprintf("keys read per operation, a multiple of -servers (up to %d)", maxBigtableKeys))
	model := fs.String("key-model", lab.DefaultBigtableKeyModel.String(), "time to read one key; see tailgate fixture -h")
	after := fs.Duration("hedge-after", 10*time.Millisecond, "hedge delay")
	ops := fs.Int("operations", 300, fmt.Sprintf("loopback operations per run (1 to %d; below 1000, p99.9 is the slowest operation)", maxBigtableOperations))
	rate := fs.Float64("rate", 5, fmt.Sprintf("loopback operations per second (open loop; > 0; servers x rate at most %d)", maxShardRequestsPerS))
	budget := fs.Float64("budget", 0.1, "hedges allowed per server request, in (0, 1]")
	simulate := fs.Bool("simulate", false, "simulate instead of running loopback fixtures (-operations and -rate are then not used)")
	simOps := fs.Int("sim-operations", 100_000, fmt.Sprintf("simulated operations per run (1 to %d)", maxSimulatedRequests))
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	switch {
	case *servers < 2 || *servers > maxBigtableServers:
		return usageError(stderr, "lab bigtable", fmt.Errorf("-servers %d must be within [2, %d]", *servers, maxBigtableServers))
	case *keys < *servers || *keys > maxBigtableKeys || *keys%*servers != 0:
		return usageError(stderr, "lab bigtable", fmt.Errorf("-keys %d must be a multiple of -servers %d, at most %d", *keys, *servers, maxBigtableKeys))
	case *after <= 0 || *after > time.Minute:
		return usageError(stderr, "lab bigtable", fmt.Errorf("-hedge-after %v must be within (0, 1m]", *after))
	case !(*budget > 0 && *budget <= 1):
		return usageError(stderr, "lab bigtable", fmt.Errorf("-budget %v must be within (0, 1]", *budget))
	case *simOps < 1 || *simOps > maxSimulatedRequests:
		return usageError(stderr, "lab bigtable", fmt.Errorf("-sim-operations %d must be within [1, %d]", *simOps, maxSimulatedRequests))
	}
	if !*simulate {
		switch {
		case *ops < 1 || *ops > maxBigtableOperations:
			return usageError(stderr, "lab bigtable", fmt.Errorf("-operations %d must be within [1, %d]", *ops, maxBigtableOperations))
		case !(*rate > 0) || *rate*float64(*servers) > maxShardRequestsPerS:
			return usageError(stderr, "lab bigtable", fmt.Errorf("-rate %v must be above 0, with -servers x -rate at most %d server requests/s", *rate, maxShardRequestsPerS))
		}
	}
	m, err := lab.ParseModel(*model)
	if err != nil {
		return usageError(stderr, "lab bigtable", err)
	}
	if err := o.check(); err != nil {
		return usageError(stderr, "lab bigtable", err)
	}
	cfg := lab.BigtableConfig{Servers: *servers, Keys: *keys, KeyModel: m, HedgeAfter: *after, Operations: *ops, Rate: *rate,
		BudgetFraction: *budget, SimOperations: *simOps, Seed: o.seed, Progress: progress(stderr, "bigtable")}
	type config struct {
		Servers        int               `json:"servers"`
		Keys           int               `json:"keys"`
		KeyModel       string            `json:"keyModel"`
		HedgeAfterMs   float64           `json:"hedgeAfterMs"`
		BudgetFraction float64           `json:"budgetFraction"`
		Operations     int               `json:"operations"`
		Rate           float64           `json:"rate,omitempty"`
		Paper          lab.BigtablePaper `json:"paper"`
	}
	if *simulate {
		rep, err := lab.SimulateBigtable(ctx, cfg)
		if err != nil {
			return failed(stderr, "bigtable", err)
		}
		type line struct {
			Experiment string `json:"experiment"`
			lab.SimulatedPolicy
		}
		c := config{rep.Servers, rep.Keys, rep.KeyModel, rep.HedgeAfterMs, rep.BudgetFraction, rep.Operations, 0, rep.Paper}
		return o.write("bigtable", stdout, stderr, rep, rep.Environment, c,
			line{"bigtable-simulated", rep.Baseline}, line{"bigtable-simulated", rep.Hedged})
	}
	rep, err := lab.RunBigtable(ctx, cfg)
	if err != nil {
		return failed(stderr, "bigtable", err)
	}
	type line struct {
		Experiment string `json:"experiment"`
		lab.BigtableRun
	}
	c := config{rep.Servers, rep.Keys, rep.KeyModel, rep.HedgeAfterMs, rep.BudgetFraction, rep.Operations, rep.Rate, rep.Paper}
	return o.write("bigtable", stdout, stderr, rep, rep.Environment, c, line{"bigtable", rep.Baseline}, line{"bigtable", rep.Hedged})
}
