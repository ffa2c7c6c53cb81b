package lab

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/fanout"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/lab/report"
	"github.com/tailgate-dev/tailgate/internal/lab/sim"
)

// FanoutConfig configures the fanout experiment. Zero fields take the
// defaults shown.
type FanoutConfig struct {
	// Shards per request. Default 60.
	Shards int
	// Need is the good-enough policies' k. Default Shards - Shards/20 (57
	// of 60).
	Need int
	// Model is each shard replica's latency. Default lognormal, p50 8ms,
	// p99 90ms (the seed's worked example).
	Model Model
	// HedgeDelay is the per-shard hedge delay. Default: the model's p95.
	HedgeDelay time.Duration
	// Requests per policy. Default 300.
	Requests int
	// Rate of requests per second (open loop). Default 15.
	Rate float64
	// SimRequests is the number of simulated requests per policy, for
	// the cross-check of a loopback run and for SimulateFanout. Default
	// DefaultSimRequests.
	SimRequests int
	// Seed makes arrivals, fixtures and the simulation reproducible.
	// Default 1.
	Seed uint64
	// Progress, when non-nil, is told as each policy completes.
	Progress func(done, total int)
}

// FanoutPolicy is one completion and hedging policy's result.
type FanoutPolicy struct {
	Policy string `json:"policy"`
	Summary
	// ExtraAttemptsPct is the hedges the shard replicas received, by their
	// own counters, in % of shard requests.
	ExtraAttemptsPct float64 `json:"extraAttemptsPct"`
	// PartialShare is the share of requests answered without every shard.
	PartialShare float64 `json:"partialShare"`
	Work         Work    `json:"work"`
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

// FanoutSetup is what a fanout report, loopback or simulated, says about
// its run before its results.
type FanoutSetup struct {
	Version      int     `json:"version"`
	Experiment   string  `json:"experiment"`
	Shards       int     `json:"shards"`
	Need         int     `json:"need"`
	Model        string  `json:"model"`
	HedgeDelayMs float64 `json:"hedgeDelayMs"`
	// Requests per policy; Rate their arrival rate (loopback only).
	Requests    int         `json:"requests"`
	Rate        float64     `json:"rate,omitempty"`
	Environment Environment `json:"environment"`
	PerShard    Prediction  `json:"perShard"`
	WaitForAll  Prediction  `json:"predictedWaitForAll"`
}

// newFanoutSetup describes a run of cfg (with its defaults) whose model
// has the sorted sample.
func newFanoutSetup(experiment string, cfg FanoutConfig, sample []float64, requests int, rate float64) FanoutSetup {
	return FanoutSetup{Version: ReportVersion, Experiment: experiment, Shards: cfg.Shards, Need: cfg.Need,
		Model: cfg.Model.String(), HedgeDelayMs: ms(cfg.HedgeDelay), Requests: requests, Rate: rate,
		Environment: newEnvironment(cfg.Seed),
		PerShard:    Prediction{P50Ms: rankF(sample, 0.5), P99Ms: rankF(sample, 0.99), P999Ms: rankF(sample, 0.999)},
		WaitForAll:  predictMax(sample, cfg.Shards)}
}

// FanoutReport is the fanout experiment's report.
type FanoutReport struct {
	FanoutSetup
	Policies []FanoutPolicy `json:"policies"`
	// Simulated are the same policies in the simulator (lab/sim), and
	// CrossCheck says, quantile by quantile, whether they agree with the
	// loopback run within the stated tolerance.
	Simulated  []SimulatedPolicy `json:"simulated"`
	CrossCheck []CrossCheck      `json:"crossCheck"`
}

// modelQuantiles samples m to estimate its quantiles (n draws, sorted),
// drawing requests as the simulator does: no id, arriving at a random time
// (so a Stalls model is met at a random phase, not always inside a stall).
func modelQuantiles(m Model, n int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0x71756e74))
	x := make([]float64, n)
	for i := range x {
		x[i] = ms(m.Sample(rng, simRequest(rng)))
	}
	slices.Sort(x)
	return x
}

// predictMax returns the quantiles of the slowest of n shards whose
// latencies have the sorted sample x.
func predictMax(x []float64, n int) Prediction {
	q := func(p float64) float64 { return rankF(x, pow(p, 1/float64(n))) }
	return Prediction{P50Ms: q(0.5), P99Ms: q(0.99), P999Ms: q(0.999)}
}

// withDefaults fills in cfg's defaults and checks it; it returns a sorted
// sample of the model's latencies (ms), which the defaults and the
// predictions need.
func (cfg FanoutConfig) withDefaults() (FanoutConfig, []float64, error) {
	if cfg.Shards == 0 {
		cfg.Shards = 60
	}
	if cfg.Need == 0 {
		cfg.Need = cfg.Shards - cfg.Shards/20
	}
	if cfg.Model == nil {
		cfg.Model = Lognormal{P50: 8 * time.Millisecond, P99: 90 * time.Millisecond}
	}
	if cfg.Requests == 0 {
		cfg.Requests = 300
	}
	if cfg.Rate == 0 {
		cfg.Rate = 15
	}
	if cfg.SimRequests == 0 {
		cfg.SimRequests = DefaultSimRequests
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Shards < 1 || cfg.Shards > sim.MaxFanout || cfg.Need < 1 || cfg.Need > cfg.Shards || cfg.Requests < 1 ||
		!(cfg.Rate >= 0) || cfg.HedgeDelay < 0 || cfg.SimRequests < 1 || cfg.SimRequests > sim.MaxRequests {
		return cfg, nil, fmt.Errorf("lab: fanout needs 1 <= shards <= %d, 1 <= need <= shards, requests >= 1, a non-negative rate and hedge delay, and 1 <= simulated requests <= %d",
			sim.MaxFanout, sim.MaxRequests)
	}
	if err := validateModel(cfg.Model); err != nil {
		return cfg, nil, err
	}
	sample := modelQuantiles(cfg.Model, modelSample, cfg.Seed)
	if cfg.HedgeDelay == 0 {
		cfg.HedgeDelay = time.Duration(rankF(sample, 0.95) * float64(time.Millisecond))
	}
	return cfg, sample, nil
}

// Limits of a loopback fanout run: every shard replica is a fixture with
// its own listener.
const (
	MaxLoopbackShards   = 1000
	MaxLoopbackRequests = 100_000
)

// modelSample is the number of draws behind a model's quantiles.
const modelSample = 1_000_000

// DefaultSimRequests is the default number of simulated requests per
// policy.
const DefaultSimRequests = 1_000_000

// RunFanout runs the fanout experiment: requests fanned out to Shards
// shards of two replicas each (fixtures on 127.0.0.1), waiting for all of
// them without hedging, with per-shard hedging, waiting for Need of them
// (good enough), and both; next to what the arithmetic predicts, and to the
// same policies simulated (see CrossCheck).
func RunFanout(ctx context.Context, cfg FanoutConfig) (*FanoutReport, error) {
	cfg, sample, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Shards > MaxLoopbackShards || cfg.Requests > MaxLoopbackRequests {
		return nil, fmt.Errorf("lab: fanout on loopback takes at most %d shards (two fixtures each) and %d requests per policy; simulate larger runs",
			MaxLoopbackShards, MaxLoopbackRequests)
	}
	lat, err := simLatency(cfg.Model)
	if err != nil {
		return nil, err
	}
	rep := &FanoutReport{FanoutSetup: newFanoutSetup("fanout", cfg, sample, cfg.Requests, cfg.Rate)}

	urls, fixtures, err := startShards(cfg.Shards, 2, cfg.Model, cfg.Seed)
	defer closeAll(fixtures)
	if err != nil {
		return nil, err
	}
	base := hedge.NewBaseTransport()
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: base, Timeout: 10 * time.Second}
	specs := cfg.specs()
	for i, p := range specs {
		pol := hedge.Policy{MaxAttempts: 1}
		if p.hedge {
			pol = hedge.Policy{Delay: cfg.HedgeDelay}
		}
		f, err := fanout.New(fanout.Config{Shards: cfg.Shards, Replicas: 2, Completion: fanout.Completion{Need: p.need}, Policy: pol})
		if err != nil {
			return nil, err
		}
		fp, err := runFanoutPolicy(ctx, f, client, urls, fixtures, Load{Requests: cfg.Requests, Rate: cfg.Rate, Seed: cfg.Seed + uint64(i)})
		if err != nil {
			return nil, fmt.Errorf("lab: fanout %s: %w", p.name, err)
		}
		fp.Policy = p.name
		rep.Policies = append(rep.Policies, fp)
		if cfg.Progress != nil {
			cfg.Progress(i+1, len(specs)+1)
		}
	}
	if rep.Simulated, err = simulatePolicies(cfg, lat, cfg.SimRequests); err != nil {
		return nil, err
	}
	// Bonferroni: each of the checks at 1 - alpha/checks, so that an
	// honest run passes all of them with probability CrossCheckConfidence.
	alpha := (1 - CrossCheckConfidence) / float64(3*len(rep.Policies))
	for i, p := range rep.Policies {
		sorted := p.sortedWithFailures()
		s := rep.Simulated[i]
		rep.CrossCheck = append(rep.CrossCheck,
			crossCheck(p.Policy, 0.5, sorted, s.P50Ms, alpha),
			crossCheck(p.Policy, 0.9, sorted, s.P90Ms, alpha),
			crossCheck(p.Policy, 0.99, sorted, s.P99Ms, alpha))
	}
	if cfg.Progress != nil {
		cfg.Progress(len(specs)+1, len(specs)+1)
	}
	rep.Environment.finish()
	return rep, nil
}

// sortedWithFailures returns the policy's latencies, sorted, with a +Inf
// for every request that got no answer: a quantile that a failure reaches
// is unbounded, never the quantile of the successes.
func (p FanoutPolicy) sortedWithFailures() []float64 {
	x := append([]float64(nil), p.latencies...)
	slices.Sort(x)
	for range p.Requests - len(p.latencies) {
		x = append(x, math.Inf(1))
	}
	return x
}

// startShards starts shards × replicas fixtures and returns their URLs by
// shard and replica.
func startShards(shards, replicas int, m Model, seed uint64) ([][]string, []*Fixture, error) {
	var fixtures []*Fixture
	urls := make([][]string, shards)
	for s := range shards {
		for r := range replicas {
			f, err := StartFixture(FixtureConfig{Name: "s" + strconv.Itoa(s) + "r" + strconv.Itoa(r), Model: m,
				Seed: seed*1_000_003 + uint64(s*replicas+r)})
			if err != nil {
				return nil, fixtures, err
			}
			fixtures = append(fixtures, f)
			urls[s] = append(urls[s], f.URL())
		}
	}
	return urls, fixtures, nil
}

// runFanoutPolicy sends load through f; each shard attempt GETs its
// replica's fixture.
func runFanoutPolicy(ctx context.Context, f *fanout.Fanout, client *http.Client, urls [][]string, fixtures []*Fixture, load Load) (FanoutPolicy, error) {
	before := sumStats(fixtures)
	partial := make([]bool, load.Requests)
	var attempts atomic.Int64
	start := time.Now()
	outs := Generate(ctx, load, func(ctx context.Context, i int) error {
		res, err := fanout.Do(ctx, f, func(ctx context.Context, shard int, a hedge.Attempt) (struct{}, error) {
			attempts.Add(1)
			// The id names the request and the shard, so that two shards
			// whose replicas share a server draw independently there.
			return struct{}{}, readValue(ctx, client, urls[shard][a.Target]+"/item?id="+strconv.Itoa(i*len(urls)+shard))
		})
		if res != nil {
			partial[i] = res.Partial
		}
		return err
	})
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return FanoutPolicy{}, err
	}
	if err := settleAll(ctx, fixtures); err != nil {
		return FanoutPolicy{}, err
	}
	fp := FanoutPolicy{Summary: Summarize(outs, elapsed), latencies: LatenciesMs(outs)}
	shardRequests := load.Requests * len(urls)
	after := sumStats(fixtures)
	fp.Work = workBetween(before, after, attempts.Load(), shardRequests)
	// Hedges the fixtures received, per shard request. Not Started - 1:
	// a good-enough answer cancels the shards it no longer needs, some
	// before they reach a fixture, which would net out against hedges.
	fp.ExtraAttemptsPct = round2(100 * float64(after.Hedges-before.Hedges) / float64(shardRequests))
	n := 0
	for i, p := range partial {
		if p && outs[i].Err == nil {
			n++
		}
	}
	if fp.Succeeded > 0 {
		fp.PartialShare = round2(float64(n) / float64(fp.Succeeded))
	}
	return fp, nil
}

func pow(x, y float64) float64 {
	if x <= 0 {
		return 0
	}
	return math.Pow(x, y)
}

// Section implements Sectioner.
func (r *FanoutReport) Section() report.Section {
	var series []report.Series
	rows := [][]string{{"predicted: wait for all", f1(r.WaitForAll.P50Ms), "", f1(r.WaitForAll.P99Ms), f1(r.WaitForAll.P999Ms), "", "0.00", "0.00"}}
	for i, p := range r.Policies {
		series = append(series, latencyCDF(p.Policy, p.latencies, p.Requests, i == 0))
		rows = append(rows, append(latencyRow(p.Policy, p.Summary), f2(p.ExtraAttemptsPct), f2(p.PartialShare)))
	}
	return report.Section{
		Heading: fmt.Sprintf("fanout: one request, %d shards", r.Shards),
		Text: fmt.Sprintf("%d requests at %.0f/s, each sent to %d shards of two replicas (%s; one shard: p50 %.1f ms, p99 %.1f ms). "+
			"Waiting for all of them, a request is as slow as its slowest shard: the arithmetic predicts p50 %.1f ms and p99 %.1f ms. "+
			"Then the remedies one by one: a hedge to the other replica after %.1f ms (the shard's p95), answering with %d of %d shards (good enough, marked partial), and both.",
			r.Requests, r.Rate, r.Shards, r.Model, r.PerShard.P50Ms, r.PerShard.P99Ms, r.WaitForAll.P50Ms, r.WaitForAll.P99Ms, r.HedgeDelayMs, r.Need, r.Shards),
		Plots: []report.Plot{{
			Title: "Request latency CDF", XLabel: "latency (ms, log scale)", YLabel: "fraction of requests", LogX: true,
			Series: series,
			Notes: []report.Note{
				{X: r.WaitForAll.P50Ms, Y: 0.5, Text: "predicted p50"},
				{X: r.WaitForAll.P99Ms, Y: 0.99, Text: "predicted p99"},
			},
			Caption: "The dashed curve waits for every shard; hedging pulls in its tail, good-enough results its body, and both together the two.",
		}},
		Tables: []report.Table{{
			Title:   "Latency, duplicate work and partial results",
			Columns: append(append([]string{}, latencyColumns...), "extra attempts %", "partial share"),
			Rows:    rows,
		}, r.crossCheckTable()},
	}
}

func (r *FanoutReport) crossCheckTable() report.Table {
	t := report.Table{
		Title: fmt.Sprintf("Cross-check with %d simulated requests per policy: agreement means the simulated quantile lies within the loopback sample's distribution-free confidence interval (%.0f%% for all %d checks together), widened by %d ms + %.0f%%",
			r.simRequests(), 100*CrossCheckConfidence, len(r.CrossCheck), CrossCheckSlackMs, 100*CrossCheckSlackFraction),
		Columns: []string{"policy", "quantile", "loopback ms", "simulated ms", "agreement from ms", "to ms", "agrees"},
	}
	bound := func(v *float64) string {
		if v == nil {
			return "unbounded"
		}
		return f1(*v)
	}
	for _, c := range r.CrossCheck {
		loop := f1(c.LoopbackMs)
		if c.LoopbackMs < 0 {
			loop = "failed"
		}
		t.Rows = append(t.Rows, []string{c.Policy, strconv.FormatFloat(c.Quantile, 'g', -1, 64), loop, f1(c.SimulatedMs), bound(c.LowMs), bound(c.HighMs), yesNo(c.Agrees)})
	}
	return t
}

func (r *FanoutReport) simRequests() int {
	if len(r.Simulated) == 0 {
		return 0
	}
	return r.Simulated[0].Requests
}
