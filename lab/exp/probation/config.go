package probation

import (
	"strconv"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
)

// Config configures the probation experiment. Zero fields take the
// defaults shown.
type Config struct {
	// Duration is how long each run offers reads. Default
	// 60s (with the gateway's default probation
	// window of 5s, going on probation takes about two windows after the
	// degradation starts, coming off about two after it ends); within
	// [1s, MaxDuration]. The timeline has one entry per second
	// or part of one.
	Duration time.Duration
	// Rate is the offered load in reads per second (open loop, Poisson
	// arrivals), at most MaxRate and MaxReads a run. Default 400: enough that the gateway's
	// peak-EWMA picker spreads primaries over every replica, which it does
	// not under light load (see Run).
	Rate float64
	// Replicas is how many fixtures serve behind the gateway; the last one
	// degrades. Default 3; within [2, MaxReplicas].
	Replicas int
	// Model is every replica's service time, and the degraded replica's
	// outside its degradation. Default lognormal:p50=5ms,p99=40ms: its
	// tail matters (see Defaults).
	Model fixture.Model
	// DegradeFrom and DegradeTo bound the degradation, in time since the
	// run started: the last replica serves the requests that arrive within
	// [DegradeFrom, DegradeTo) Factor times slower (a Phase over Model).
	// When both are zero they default to a fifth and a half of Duration
	// (12s and 30s of the default 60s); otherwise 0 <= DegradeFrom <
	// DegradeTo <= Duration.
	DegradeFrom, DegradeTo time.Duration
	// Factor is how many times slower the degraded replica is. Default
	// 10; within (1, fixture.MaxPhaseFactor]. A much larger factor
	// makes the picker starve the slow replica of primaries by itself, and
	// with few samples probation does not judge it at all.
	Factor float64
	// Gateway configures the gateway of both runs: Backends and
	// DisableProbation are set for each run, the rest is kept (its zero
	// value is the gateway's defaults: adaptive hedging, probation at 3×
	// the peers' median for 5s, one shadow a second). Without a
	// Replica.Seed the picks are seeded from Seed.
	Gateway gateway.Config
	// Seed makes arrivals and service times reproducible. Default 1. Both
	// runs read the same arrivals, and each replica draws the same service
	// time for the same read in both.
	Seed uint64
	// Progress, when non-nil, is told each second of each run.
	Progress func(done, total int)
}

// Limits of a probation run: everything runs on one machine, two runs in
// a row.
const (
	MinDuration = time.Second
	MaxDuration = 5 * time.Minute
	MaxReplicas = 10
	MaxRate     = 2000
	// MaxReads bounds the reads of one run (Rate × Duration).
	MaxReads = 300_000
	// MaxWindow and MaxShadowRate bound the gateway's probation window
	// and shadow rate (Gateway.Replica.Probation).
	MaxWindow     = time.Minute
	MaxShadowRate = 100
)

// Defaults returns the configuration a zero Config runs with, but for
// the degradation, whose default depends on the duration
// (DefaultDegradation). Its model's tail matters: probation judges the
// slow replica by its answers and by the attempts hedges cut short (at
// about the hedge delay, the p95 of recent latencies, plus a fast answer),
// so its median as probation sees it is capped near that, well below its
// true median. With a tight tail (p99 at 4× p50) that cap sits near the
// default factor of 3 and the replica flaps between serving and
// diverging; with this one (p99 at 8× p50) it is clearly above.
func Defaults() Config {
	return Config{Duration: 60 * time.Second, Rate: 400, Replicas: 3, Factor: 10, Seed: 1,
		Model: fixture.Lognormal{P50: 5 * time.Millisecond, P99: 40 * time.Millisecond}}
}

// DefaultDegradation is the degradation of a run of duration d when none
// is given: from a fifth of it to half of it.
func DefaultDegradation(d time.Duration) (from, to time.Duration) { return d / 5, d / 2 }

func (cfg Config) withDefaults() Config {
	d := Defaults()
	exp.Default(&cfg.Duration, d.Duration)
	exp.Default(&cfg.Rate, d.Rate)
	exp.Default(&cfg.Replicas, d.Replicas)
	exp.Default(&cfg.Factor, d.Factor)
	exp.Default(&cfg.Seed, d.Seed)
	if cfg.Model == nil {
		cfg.Model = d.Model
	}
	if cfg.DegradeFrom == 0 && cfg.DegradeTo == 0 {
		cfg.DegradeFrom, cfg.DegradeTo = DefaultDegradation(cfg.Duration)
	}
	return cfg
}

// Validate checks cfg as given, with its defaults filled in (Run fills
// them first): a zero where a default goes is an error here. It checks the
// gateway's configuration too, by making one. Its errors wrap
// exp.ErrConfig, fixture.ErrModel or gateway.ErrInvalid.
func (cfg Config) Validate() error {
	_, err := cfg.setup()
	return err
}

// setup validates cfg and returns the setup a run of it has, with the
// gateway's defaults as it applies them.
func (cfg Config) setup() (runSetup, error) {
	c := exp.NewChecker("probation")
	exp.Within(c, "duration", cfg.Duration, MinDuration, MaxDuration)
	exp.Above(c, "rate", cfg.Rate, 0, MaxRate)
	if reads := cfg.Rate * cfg.Duration.Seconds(); c.Err() == nil {
		c.Check(reads <= MaxReads, "rate", cfg.Rate, "for duration %v would be %.0f reads per run: keep it within %d", cfg.Duration, reads, MaxReads)
	}
	exp.Within(c, "replicas", cfg.Replicas, 2, MaxReplicas)
	exp.Within(c, "degrade-from", cfg.DegradeFrom, 0, cfg.Duration)
	c.Check(cfg.DegradeTo > cfg.DegradeFrom && cfg.DegradeTo <= cfg.Duration, "degrade-to", cfg.DegradeTo,
		"must be within (degrade-from %v, duration %v]", cfg.DegradeFrom, cfg.Duration)
	exp.Above(c, "factor", cfg.Factor, 1, fixture.MaxPhaseFactor)
	pr := cfg.Gateway.Replica.Probation
	exp.Within(c, "probation-window", pr.Window, 0, MaxWindow)
	c.Check(pr.Factor == 0 || pr.Factor > 1 && pr.Factor <= fixture.MaxPhaseFactor, "probation-factor", pr.Factor,
		"must be within (1, %d] (0: the default)", fixture.MaxPhaseFactor)
	exp.Within(c, "shadow-rate", pr.ShadowRate, 0, MaxShadowRate)
	c.Check(cfg.Model != nil, "model", nil, "must be given")
	if c.Err() != nil {
		return runSetup{}, c.Err()
	}
	c.Fail(fixture.ValidateModel(cfg.Model))
	degraded := fixture.Phase{From: cfg.DegradeFrom, To: cfg.DegradeTo, Factor: cfg.Factor, Base: cfg.Model}
	c.Fail(fixture.ValidateModel(degraded))
	if c.Err() != nil {
		return runSetup{}, c.Err()
	}
	s := runSetup{
		DurationMs: load.Ms(cfg.Duration), Rate: cfg.Rate, Replicas: cfg.Replicas, Model: cfg.Model.String(),
		DegradedModel: degraded.String(), DegradeFromMs: load.Ms(cfg.DegradeFrom), DegradeToMs: load.Ms(cfg.DegradeTo), Factor: cfg.Factor,
		Seed: cfg.Seed, ArrivalSeed: load.PointSeed(cfg.Seed, 0), PickSeed: cfg.Gateway.Replica.Seed, DegradedIndex: cfg.Replicas - 1,
	}
	if s.PickSeed == 0 {
		s.PickSeed = load.PointSeed(cfg.Seed, 1)
	}
	for i := range cfg.Replicas {
		s.ReplicaNames = append(s.ReplicaNames, "replica-"+replicaLetter(i))
		s.FixtureSeeds = append(s.FixtureSeeds, cfg.Seed*1_000_003+uint64(i))
	}
	s.DegradedReplica = s.ReplicaNames[s.DegradedIndex]
	s.Reads = load.PoissonArrivals(load.Config{Rate: cfg.Rate, Seed: s.ArrivalSeed}, cfg.Duration)
	if s.Reads < 1 {
		c.Check(false, "", nil, "no read arrives within %v at %v reads/s with seed %d", cfg.Duration, cfg.Rate, cfg.Seed)
		return runSetup{}, c.Err()
	}
	// The gateway applies its own defaults and checks the rest: ask it,
	// with placeholder backends it never contacts.
	gcfg := gatewayConfig(cfg, s, make([]string, cfg.Replicas), true)
	for i := range gcfg.Backends {
		gcfg.Backends[i] = "http://127.0.0.1:" + strconv.Itoa(9+i)
	}
	g, err := gateway.New(gcfg)
	if err != nil {
		return runSetup{}, err
	}
	defer g.Close()
	p := g.Classes().Policy()
	s.HedgeDelay = exp.HedgeDelay(g)
	s.MaxAttempts = p.MaxAttempts
	s.TimeoutMs = load.Ms(gateway.DefaultTimeout)
	if gcfg.Timeout > 0 {
		s.TimeoutMs = load.Ms(gcfg.Timeout)
	}
	pr = g.Replicas().Config().Probation
	s.Probation = settings{Factor: pr.Factor, ExitFactor: pr.ExitFactor, WindowMs: load.Ms(pr.Window), MinSamples: pr.MinSamples,
		MaxShare: pr.MaxShare, MaxOnProbation: pr.MaxOnProbation(cfg.Replicas), ShadowRate: pr.ShadowRate}
	return s, nil
}

func replicaLetter(i int) string {
	if i < 26 {
		return string(rune('a' + i))
	}
	return strconv.Itoa(i)
}

// gatewayConfig is the gateway configuration of a run.
func gatewayConfig(cfg Config, s runSetup, backends []string, on bool) gateway.Config {
	g := cfg.Gateway
	g.Backends = backends
	g.DisableProbation = !on
	g.Replica.Seed = s.PickSeed
	return g
}
