package fanout

// Fleet-scale counterparts of the fanout and bigtable experiments: the same
// latency models and the same policies against virtual servers in lab/sim,
// with no sockets, so a fan-out of 2,000 and a million requests take
// seconds. The loopback runs cross-check themselves against the simulation
// (CrossCheck); the simulated runs check the simulation against the
// arithmetic (ArithmeticCheck) and reproduce the shape of Table 1.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/sim"
)

// Simulated is one policy's result in the simulator.
type Simulated struct {
	Policy string `json:"policy"`
	// Method is how the simulator drew requests: "exact" (every shard) or
	// "order-statistics" (see package lab/sim).
	Method   string  `json:"method"`
	Requests int     `json:"requests"`
	MeanMs   float64 `json:"meanMs"`
	P50Ms    float64 `json:"p50Ms"`
	P90Ms    float64 `json:"p90Ms"`
	P99Ms    float64 `json:"p99Ms"`
	P999Ms   float64 `json:"p999Ms"`
	MaxMs    float64 `json:"maxMs"`
	// ExtraAttemptsPct is hedges per shard request, in %.
	ExtraAttemptsPct float64 `json:"extraAttemptsPct"`
	// PartialShare is the share of requests answered without every shard.
	PartialShare float64 `json:"partialShare"`
}

func FromSim(r sim.Result, partial bool) Simulated {
	p := Simulated{Policy: r.Policy, Method: r.Method.String(), Requests: r.Requests,
		MeanMs: load.Ms(r.Mean), P50Ms: load.Ms(r.P50), P90Ms: load.Ms(r.P90), P99Ms: load.Ms(r.P99), P999Ms: load.Ms(r.P999), MaxMs: load.Ms(r.Max),
		ExtraAttemptsPct: exp.Round2(r.ExtraAttemptsPct)}
	if partial {
		// Without a deadline the simulator reports no partial results; a
		// good-enough policy answers with Need of N shards, which is
		// partial whenever Need < N, as the loopback run counts it.
		p.PartialShare = 1
	}
	p.PartialShare = max(p.PartialShare, r.PartialShare)
	return p
}

// spec is one of the fanout experiment's policies, shared by the
// loopback and simulated runs so their names match.
type spec struct {
	name  string
	need  int
	hedge bool
}

func (cfg Config) specs() []spec {
	return []spec{
		{"wait for all", cfg.Shards, false},
		{"per-shard hedging", cfg.Shards, true},
		{fmt.Sprintf("good enough (%d of %d)", cfg.Need, cfg.Shards), cfg.Need, false},
		{fmt.Sprintf("both (hedging, %d of %d)", cfg.Need, cfg.Shards), cfg.Need, true},
	}
}

// simulatePolicies runs cfg's four policies in the simulator.
func simulatePolicies(cfg Config, lat sim.Latency, requests int) ([]Simulated, error) {
	var out []Simulated
	for i, s := range cfg.specs() {
		p := sim.Policy{Name: s.name, Fanout: cfg.Shards, Need: s.need}
		if s.hedge {
			p.HedgeAfter = cfg.HedgeDelay
		}
		r, err := sim.Run(p, lat, sim.Options{Requests: requests, Seed: cfg.Seed*1_000_003 + uint64(i)})
		if err != nil {
			return nil, err
		}
		out = append(out, FromSim(r, s.need < cfg.Shards))
	}
	return out, nil
}

// The cross-check's tolerance: a simulated quantile agrees with a loopback
// run when it lies within the loopback sample's distribution-free
// confidence interval for that quantile, widened by crossCheckSlackMs plus
// crossCheckSlackFraction of its bounds. The intervals of a run's checks
// hold together with probability crossCheckConfidence (each at
// 1 - (1 - crossCheckConfidence)/checks, Bonferroni), so an honest run
// shows a disagreement at most 1% of the time. The slack
// is for what loopback adds and the simulator does not model: HTTP and
// scheduling on a shared machine, a few ms per burst of shard requests.
const (
	crossCheckConfidence    = 0.99
	crossCheckSlackMs       = 2
	crossCheckSlackFraction = 0.10
)

// CrossCheck compares one quantile of a loopback policy with the
// simulation of the same policy.
type CrossCheck struct {
	Policy      string  `json:"policy"`
	Quantile    float64 `json:"quantile"`
	LoopbackMs  float64 `json:"loopbackMs"`
	SimulatedMs float64 `json:"simulatedMs"`
	// LowMs and HighMs bound the agreement: the confidence interval with
	// its slack. null means unbounded (too few requests to bound it).
	LowMs  *float64 `json:"lowMs"`
	HighMs *float64 `json:"highMs"`
	Agrees bool     `json:"agrees"`
}

// crossCheck compares the q-quantile of the loopback latencies (sorted,
// failures as +Inf at the end) with the simulated value, using a
// confidence interval at level 1-alpha.
func crossCheck(policy string, q float64, sorted []float64, simulated, alpha float64) CrossCheck {
	c := CrossCheck{Policy: policy, Quantile: q, SimulatedMs: simulated}
	n := len(sorted)
	if n == 0 {
		return c
	}
	c.LoopbackMs = load.Rank(sorted, q)
	if math.IsInf(c.LoopbackMs, 1) {
		c.LoopbackMs = -1 // JSON has no infinity; a failed quantile never agrees
		return c
	}
	lo, hi := load.QuantileRanks(n, q, alpha)
	c.Agrees = true
	if lo >= 1 {
		v := exp.Round2(sorted[lo-1]*(1-crossCheckSlackFraction) - crossCheckSlackMs)
		c.LowMs = &v
		c.Agrees = simulated >= v
	}
	if hi <= n && !math.IsInf(sorted[hi-1], 1) {
		v := exp.Round2(sorted[hi-1]*(1+crossCheckSlackFraction) + crossCheckSlackMs)
		c.HighMs = &v
		c.Agrees = c.Agrees && simulated <= v
	}
	return c
}

// ArithmeticCheck compares the simulator with the arithmetic of fan-out:
// a request that waits for N shards, each slower than ShardSlowMs with
// probability p, meets at least one slow shard with probability
// 1 - (1 - p)^N.
type ArithmeticCheck struct {
	Fanout             int     `json:"fanout"`
	ShardSlowMs        float64 `json:"shardSlowMs"`
	ShardSlowShare     float64 `json:"shardSlowShare"`
	PredictedSlowShare float64 `json:"predictedSlowShare"`
	SimulatedSlowShare float64 `json:"simulatedSlowShare"`
	// StdErr is the standard error of the difference: the simulated
	// requests' binomial error, and the error in p (estimated from a
	// sample of the model, as is the simulator's own shard distribution
	// when it uses order statistics) carried through the formula.
	StdErr float64 `json:"stdErr"`
	// Agrees is |simulated - predicted| <= arithmeticSigmas × StdErr.
	Agrees bool `json:"agrees"`
}

// arithmeticSigmas is how many standard errors an ArithmeticCheck allows.
const arithmeticSigmas = 4

// checkArithmetic simulates waiting for all of n shards whose latency has
// the sorted sample x (ms), with the sample's p99 as the slow threshold.
func checkArithmetic(lat sim.Latency, x []float64, n, requests int, seed uint64) (ArithmeticCheck, error) {
	slow := load.Rank(x, 0.99)
	above := 0
	for i := len(x) - 1; i >= 0 && x[i] > slow; i-- {
		above++
	}
	p := float64(above) / float64(len(x))
	r, err := sim.Run(sim.Policy{Name: "wait for all", Fanout: n}, lat,
		sim.Options{Requests: requests, Seed: seed, SlowThreshold: time.Duration(slow * float64(time.Millisecond))})
	if err != nil {
		return ArithmeticCheck{}, err
	}
	pred := 1 - math.Pow(1-p, float64(n))
	varP := p * (1 - p) / float64(len(x))
	if r.Method == sim.MethodOrderStats {
		varP += p * (1 - p) / sim.DefaultSampleSize
	}
	slope := float64(n) * math.Pow(1-p, float64(n-1))
	se := math.Sqrt(pred*(1-pred)/float64(requests) + slope*slope*varP)
	return ArithmeticCheck{Fanout: n, ShardSlowMs: slow, ShardSlowShare: p, PredictedSlowShare: pred,
		SimulatedSlowShare: r.SlowShare, StdErr: se,
		Agrees: math.Abs(r.SlowShare-pred) <= arithmeticSigmas*se}, nil
}

// Table1 is the simulated counterpart of Table 1 of The Tail at Scale: the
// latency until one random leaf, 95% of the leaves, and all of them finish.
type Table1 struct {
	Fanout int `json:"fanout"`
	// SharedSpread is the sigma of a lognormal factor, drawn once per
	// request, that multiplies the latency of all its leaves (a cause they
	// share); 0 means independent leaves.
	SharedSpread float64     `json:"sharedSpread"`
	Rows         []Table1Row `json:"rows"`
}

// Table1Row is one row of a Table1.
type Table1Row struct {
	Name  string  `json:"name"`
	P50Ms float64 `json:"p50Ms"`
	P95Ms float64 `json:"p95Ms"`
	P99Ms float64 `json:"p99Ms"`
}

// paperTable1 is Table 1 of The Tail at Scale (a large fan-out service,
// measured at the root), for comparison of shape only.
var paperTable1 = []Table1Row{
	{Name: "one random leaf", P50Ms: 1, P95Ms: 5, P99Ms: 10},
	{Name: "95% of leaves", P50Ms: 12, P95Ms: 32, P99Ms: 70},
	{Name: "100% of leaves", P50Ms: 40, P95Ms: 87, P99Ms: 140},
}

func simulateTable1(lat sim.Latency, n, requests int, spread float64, seed uint64) (Table1, error) {
	opts := sim.Options{Requests: requests, Seed: seed}
	if spread > 0 {
		opts.RequestFactor = func(rng *rand.Rand) float64 { return math.Exp(spread * rng.NormFloat64()) }
	}
	rows, err := sim.Table1(n, lat, opts)
	if err != nil {
		return Table1{}, err
	}
	t := Table1{Fanout: n, SharedSpread: spread}
	for _, r := range rows {
		t.Rows = append(t.Rows, Table1Row{Name: r.Name, P50Ms: load.Ms(r.P50), P95Ms: load.Ms(r.P95), P99Ms: load.Ms(r.P99)})
	}
	return t, nil
}
