package fanout

import (
	"slices"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
)

// Config configures the fanout experiment. Zero fields take the
// defaults shown.
type Config struct {
	// Shards per request. Default 60; at most MaxLoopbackShards on loopback,
	// MaxSimShards simulated.
	Shards int
	// Need is the good-enough policies' k. Default Shards - Shards/20 (57
	// of 60).
	Need int
	// Model is each shard replica's latency. Default lognormal, p50 8ms,
	// p99 90ms (the seed's worked example).
	Model fixture.Model
	// HedgeDelay is the per-shard hedge delay. Default: the model's p95.
	HedgeDelay time.Duration
	// Requests per policy. Default 300; at most MaxLoopbackRequests.
	Requests int
	// Rate of requests per second (open loop). Default 15; Shards × Rate at
	// most MaxShardRate.
	Rate float64
	// SimRequests is the number of simulated requests per policy, for
	// the cross-check of a loopback run and for Simulate. Default
	// defaultSimRequests; at most MaxSimRequests.
	SimRequests int
	// Seed makes arrivals, fixtures and the simulation reproducible.
	// Default 1.
	Seed uint64
	// Progress, when non-nil, is told as each policy completes.
	Progress func(done, total int)
}

// Limits of a fanout run. On loopback every shard replica is a fixture
// with its own listener, and each request is a burst of shard requests;
// simulated runs cost time in proportion to their requests, and Table 1's
// exact rows draw every shard.
const (
	MaxLoopbackShards   = 200
	MaxLoopbackRequests = 10_000
	// MaxShardRate bounds the shard requests per second on loopback
	// (Shards × Rate), here and in the bigtable experiment.
	MaxShardRate   = 5_000
	MaxSimShards   = 1_000_000
	MaxSimRequests = 10_000_000
	// MaxSharedSpread bounds SimOptions.SharedSpread.
	MaxSharedSpread = 3
)

// defaultSimRequests is the default number of simulated requests per
// policy.
const defaultSimRequests = 1_000_000

// modelSample is the number of draws behind a model's quantiles.
const modelSample = 1_000_000

// Defaults returns the configuration a zero Config runs with, but for
// Need (Shards - Shards/20) and HedgeDelay (the model's p95), which
// follow from the others.
func Defaults() Config {
	return Config{Shards: 60, Model: fixture.Lognormal{P50: 8 * time.Millisecond, P99: 90 * time.Millisecond},
		Requests: 300, Rate: 15, SimRequests: defaultSimRequests, Seed: 1}
}

func (cfg Config) withDefaults() Config {
	d := Defaults()
	exp.Default(&cfg.Shards, d.Shards)
	exp.Default(&cfg.Need, cfg.Shards-cfg.Shards/20)
	exp.Default(&cfg.Requests, d.Requests)
	exp.Default(&cfg.Rate, d.Rate)
	exp.Default(&cfg.SimRequests, d.SimRequests)
	exp.Default(&cfg.Seed, d.Seed)
	if cfg.Model == nil {
		cfg.Model = d.Model
	}
	return cfg
}

// Validate checks cfg for a loopback run (Run) as given, with its
// defaults filled in (Run fills them first): a zero where a default goes
// is an error here, except that Need and HedgeDelay may be 0 for theirs.
// Its errors wrap exp.ErrConfig or fixture.ErrModel.
func (cfg Config) Validate() error {
	const hint = " on loopback (two fixtures a shard): simulate larger runs"
	c := cfg.check(MaxLoopbackShards, hint)
	c.Check(cfg.Requests >= 1 && cfg.Requests <= MaxLoopbackRequests, "requests", cfg.Requests, "must be within [1, %d]%s", MaxLoopbackRequests, hint)
	c.Check(cfg.Rate > 0 && cfg.Rate*float64(cfg.Shards) <= MaxShardRate, "rate", cfg.Rate,
		"must be above 0, with shards x rate at most %d shard requests/s", MaxShardRate)
	return c.Err()
}

// ValidateSim is Validate for a simulated run (Simulate) with opts, whose
// defaults are filled in too: Requests and Rate are not used, and the
// fan-outs may be larger.
func (cfg Config) ValidateSim(opts SimOptions) error {
	c := cfg.check(MaxSimShards, "")
	for _, n := range opts.ArithmeticFanouts {
		exp.Within(c, "arithmetic fan-out", n, 1, MaxSimShards)
	}
	exp.Within(c, "table1-fanout", opts.Table1Fanout, 1, MaxSimShards)
	c.Check(opts.SharedSpread <= MaxSharedSpread, "shared-spread", opts.SharedSpread, "must be at most %d (negative: none)", MaxSharedSpread)
	return c.Err()
}

// check checks what a loopback and a simulated run share; hint ends the
// complaint about too many shards.
func (cfg Config) check(maxShards int, hint string) *exp.Checker {
	c := exp.NewChecker("fanout")
	c.Check(cfg.Shards >= 1 && cfg.Shards <= maxShards, "shards", cfg.Shards, "must be within [1, %d]%s", maxShards, hint)
	c.Check(cfg.Need >= 0 && cfg.Need <= cfg.Shards, "need", cfg.Need, "must be within [1, shards %d] (0: the default)", cfg.Shards)
	exp.Within(c, "hedge-delay", cfg.HedgeDelay, 0, time.Minute)
	exp.Within(c, "sim-requests", cfg.SimRequests, 1, MaxSimRequests)
	c.Check(cfg.Model != nil, "model", nil, "must be given")
	if cfg.Model != nil {
		_, err := fixture.SimLatency(cfg.Model) // validates it, and can it be simulated
		c.Fail(err)
	}
	return c
}

// sampled fills in the defaults that need the model's distribution, from
// a sorted sample of its latencies (ms), which it returns for the
// predictions.
func (cfg Config) sampled() (Config, []float64) {
	sample := fixture.Quantiles(cfg.Model, modelSample, cfg.Seed)
	if cfg.HedgeDelay == 0 {
		cfg.HedgeDelay = time.Duration(load.Rank(sample, 0.95) * float64(time.Millisecond))
	}
	return cfg, sample
}

// defaultArithmeticFanouts are the fan-outs Simulate checks against
// the arithmetic, besides the configured one.
var defaultArithmeticFanouts = []int{1, 10, 100, 1000, 2000}

// DefaultTable1Fanout is the fan-out of Simulate's Table 1, and
// DefaultSharedSpread the spread of its shared per-request factor.
const (
	DefaultTable1Fanout = 2000
	DefaultSharedSpread = 0.8
)

// SimOptions are the parts of a simulated fanout run that a loopback
// run does not have. Zero fields take the defaults.
type SimOptions struct {
	// ArithmeticFanouts to check; default defaultArithmeticFanouts plus
	// the configured fan-out.
	ArithmeticFanouts []int
	// Table1Fanout is the fan-out of the Table 1 rows; default
	// DefaultTable1Fanout.
	Table1Fanout int
	// SharedSpread is the sigma of the per-request factor of the second
	// Table 1, at most MaxSharedSpread; default DefaultSharedSpread;
	// negative skips it.
	SharedSpread float64
}

func (o SimOptions) withDefaults() SimOptions {
	if o.ArithmeticFanouts == nil {
		o.ArithmeticFanouts = defaultArithmeticFanouts
	}
	o.ArithmeticFanouts = slices.Clone(o.ArithmeticFanouts)
	if o.Table1Fanout == 0 {
		o.Table1Fanout = DefaultTable1Fanout
	}
	if o.SharedSpread == 0 {
		o.SharedSpread = DefaultSharedSpread
	}
	return o
}
