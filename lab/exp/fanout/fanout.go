package fanout

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/fanout"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/sim"
)

// Policy is one completion and hedging policy's result.
type Policy struct {
	Policy string `json:"policy"`
	load.Summary
	// ExtraAttemptsPct is the hedges the shard replicas received, by their
	// own counters, in % of shard requests.
	ExtraAttemptsPct float64 `json:"extraAttemptsPct"`
	// PartialShare is the share of requests answered without every shard.
	PartialShare float64  `json:"partialShare"`
	Work         exp.Work `json:"work"`
	latencies    []float64
}

// Prediction is what the arithmetic says about waiting for every shard,
// from the per-shard latency model alone: the q-quantile of the slowest of
// N independent shards is the model's q^(1/N)-quantile.
type Prediction struct {
	P50Ms  float64 `json:"p50Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
}

// Setup is what a fanout report, loopback or simulated, says about
// its run before its results.
type Setup struct {
	exp.Header
	Shards       int     `json:"shards"`
	Need         int     `json:"need"`
	Model        string  `json:"model"`
	HedgeDelayMs float64 `json:"hedgeDelayMs"`
	// Requests per policy; Rate their arrival rate (loopback only).
	Requests   int        `json:"requests"`
	Rate       float64    `json:"rate,omitempty"`
	PerShard   Prediction `json:"perShard"`
	WaitForAll Prediction `json:"predictedWaitForAll"`
}

// newSetup describes a run of cfg (with its defaults) whose model
// has the sorted sample.
func newSetup(experiment string, cfg Config, sample []float64, requests int, rate float64) Setup {
	return Setup{Header: exp.Start(experiment, cfg.Seed), Shards: cfg.Shards, Need: cfg.Need,
		Model: cfg.Model.String(), HedgeDelayMs: load.Ms(cfg.HedgeDelay), Requests: requests, Rate: rate,
		PerShard:   Prediction{P50Ms: load.Rank(sample, 0.5), P99Ms: load.Rank(sample, 0.99), P999Ms: load.Rank(sample, 0.999)},
		WaitForAll: predictMax(sample, cfg.Shards)}
}

// Report is the fanout experiment's report.
type Report struct {
	Setup
	Policies []Policy `json:"policies"`
	// Simulated are the same policies in the simulator (lab/sim), and
	// CrossCheck says, quantile by quantile, whether they agree with the
	// loopback run within the stated tolerance.
	Simulated  []Simulated  `json:"simulated"`
	CrossCheck []CrossCheck `json:"crossCheck"`
}

// predictMax returns the quantiles of the slowest of n shards whose
// latencies have the sorted sample x.
func predictMax(x []float64, n int) Prediction {
	q := func(p float64) float64 { return load.Rank(x, pow(p, 1/float64(n))) }
	return Prediction{P50Ms: q(0.5), P99Ms: q(0.99), P999Ms: q(0.999)}
}

// Run runs the fanout experiment: requests fanned out to Shards
// shards of two replicas each (fixtures on 127.0.0.1), waiting for all of
// them without hedging, with per-shard hedging, waiting for Need of them
// (good enough), and both; next to what the arithmetic predicts, and to the
// same policies simulated (see CrossCheck).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg, sample := cfg.sampled()
	lat, err := fixture.SimLatency(cfg.Model)
	if err != nil {
		return nil, err
	}
	rep := &Report{Setup: newSetup("fanout", cfg, sample, cfg.Requests, cfg.Rate)}

	var rig exp.Rig
	defer rig.Close()
	urls, fixtures, err := rig.StartShards(cfg.Shards, 2, cfg.Model, cfg.Seed)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: rig.Transport(), Timeout: 10 * time.Second}
	// A step per policy, then one for the simulation and the cross-check.
	specs := cfg.specs()
	err = exp.Run(ctx, &rep.Header, len(specs)+1, cfg.Progress, func(i int) error {
		if i == len(specs) {
			return rep.crossCheck(cfg, lat)
		}
		p := specs[i]
		pol := hedge.Policy{MaxAttempts: 1}
		if p.hedge {
			pol = hedge.Policy{Delay: cfg.HedgeDelay}
		}
		f, err := fanout.New(fanout.Config{Shards: cfg.Shards, Replicas: 2, Completion: fanout.Completion{Need: p.need}, Policy: pol})
		if err != nil {
			return err
		}
		fp, err := RunPolicy(ctx, f, client, urls, fixtures, load.Config{Requests: cfg.Requests, Rate: cfg.Rate, Seed: cfg.Seed + uint64(i)})
		if err != nil {
			return fmt.Errorf("lab: fanout %s: %w", p.name, err)
		}
		fp.Policy = p.name
		rep.Policies = append(rep.Policies, fp)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// crossCheck simulates the policies and checks each against its loopback
// run.
func (rep *Report) crossCheck(cfg Config, lat sim.Latency) (err error) {
	if rep.Simulated, err = simulatePolicies(cfg, lat, cfg.SimRequests); err != nil {
		return err
	}
	// Bonferroni: each of the checks at 1 - alpha/checks, so that an
	// honest run passes all of them with probability crossCheckConfidence.
	alpha := (1 - crossCheckConfidence) / float64(3*len(rep.Policies))
	for i, p := range rep.Policies {
		sorted := p.sortedWithFailures()
		s := rep.Simulated[i]
		rep.CrossCheck = append(rep.CrossCheck,
			crossCheck(p.Policy, 0.5, sorted, s.P50Ms, alpha),
			crossCheck(p.Policy, 0.9, sorted, s.P90Ms, alpha),
			crossCheck(p.Policy, 0.99, sorted, s.P99Ms, alpha))
	}
	return nil
}

// sortedWithFailures returns the policy's latencies, sorted, with a +Inf
// for every request that got no answer: a quantile that a failure reaches
// is unbounded, never the quantile of the successes.
func (p Policy) sortedWithFailures() []float64 {
	x := append([]float64(nil), p.latencies...)
	slices.Sort(x)
	for range p.Requests - len(p.latencies) {
		x = append(x, math.Inf(1))
	}
	return x
}

// RunPolicy sends load through f; each shard attempt GETs its
// replica's fixture.
func RunPolicy(ctx context.Context, f *fanout.Fanout, client *http.Client, urls [][]string, fixtures []*fixture.Fixture, offer load.Config) (Policy, error) {
	before := fixture.Sum(fixtures)
	partial := make([]bool, offer.Requests)
	var attempts atomic.Int64
	start := time.Now()
	outs := load.Generate(ctx, offer, func(ctx context.Context, i int) error {
		res, err := fanout.Do(ctx, f, func(ctx context.Context, shard int, a hedge.Attempt) (struct{}, error) {
			attempts.Add(1)
			// The id names the request and the shard, so that two shards
			// whose replicas share a server draw independently there.
			return struct{}{}, exp.Read(ctx, client, urls[shard][a.Target]+"/item?id="+strconv.Itoa(i*len(urls)+shard))
		})
		if res != nil {
			partial[i] = res.Partial
		}
		return err
	})
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return Policy{}, err
	}
	// The policies share the fixtures: what a policy's cancelled shards
	// wrote must be counted as its, not the next one's.
	if err := fixture.QuiesceAll(ctx, fixtures, client.CloseIdleConnections); err != nil {
		return Policy{}, err
	}
	fp := Policy{Summary: load.Summarize(outs, elapsed), latencies: load.LatenciesMs(outs)}
	shardRequests := offer.Requests * len(urls)
	after := fixture.Sum(fixtures)
	fp.Work = exp.WorkBetween(before, after, attempts.Load(), shardRequests)
	// Hedges the fixtures received, per shard request. Not Started - 1:
	// a good-enough answer cancels the shards it no longer needs, some
	// before they reach a fixture, which would net out against hedges.
	fp.ExtraAttemptsPct = exp.Round2(100 * float64(after.Hedges-before.Hedges) / float64(shardRequests))
	n := 0
	for i, p := range partial {
		if p && outs[i].Err == nil {
			n++
		}
	}
	if fp.Succeeded > 0 {
		fp.PartialShare = exp.Round2(float64(n) / float64(fp.Succeeded))
	}
	return fp, nil
}

func pow(x, y float64) float64 {
	if x <= 0 {
		return 0
	}
	return math.Pow(x, y)
}

// Latencies returns the policy's successful latencies in ms (nil for a
// report read back from JSON).
func (p Policy) Latencies() []float64 { return p.latencies }
