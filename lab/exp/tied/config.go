package tied

import (
	"fmt"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/tied"
)

// Config configures the tied experiment. Zero fields take the defaults
// shown.
type Config struct {
	// Servers is how many servers hold the data: fixtures on 127.0.0.1,
	// each behind a tied.Server. Reads go to pairs of neighbours (i, i+1)
	// in turn. Default 4; within [2, MaxServers].
	Servers int
	// Workers is each server's worker pool (tied.ServerConfig.Workers):
	// how many requests it serves at once, reads and background alike;
	// the rest queue. Default 2; at most MaxWorkers.
	Workers int
	// QueueLimit bounds each server's queue (tied.ServerConfig.QueueLimit).
	// Default 256; at most MaxQueueLimit.
	QueueLimit int
	// ReadModel is a read's service time once it has a worker. Default
	// lognormal:p50=15ms,p99=40ms: so that a good part of a read's latency
	// is waiting in a queue, which is what tied requests act on (they
	// cannot shorten the service time of the copy that runs).
	ReadModel fixture.Model
	// BackgroundModel is a background request's service time. Default
	// lognormal:p50=40ms,p99=150ms: the background's requests are longer
	// than the reads and hold a worker longer, as the paper's sort job
	// held the disks.
	BackgroundModel fixture.Model
	// BackgroundShare is the share of the servers' worker time the
	// background takes in the loaded cluster: its rate is BackgroundShare
	// × Servers × Workers / its mean service time, in Poisson arrivals,
	// each to a server drawn at random. Default 0.2; it must be in (0, 1)
	// and, with the reads' own share, leave the servers below capacity.
	BackgroundShare float64
	// Reads per run (one cluster under one policy). Default 3000; at most
	// MaxReads, and MaxRunTime of reads.
	Reads int
	// Rate of reads per second, open loop. Default 300; at most MaxRate:
	// with the default models, the reads take about 65% of the workers'
	// time.
	Rate float64
	// HedgeDelay is the hedging policy's fixed delay. Default: the p95 of
	// ReadModel, the service time of the fixtures alone, which the paper's
	// "95th-percentile expected latency" suggests; at most a minute. The
	// same delay serves
	// both clusters; in the loaded one more reads outlast it.
	HedgeDelay time.Duration
	// HedgeBudget bounds the hedges to this share of reads (burst 10);
	// the overload gate is off, as the paper's hedging had none. Default
	// 0.1; at most 1.
	HedgeBudget float64
	// TiedDelay is how long the tied client waits before sending the
	// second copy (tied.TransportConfig.Delay), at most a second. Default
	// 1ms, as in the paper; AtOnce sends both copies at once.
	TiedDelay time.Duration
	// Timeout bounds each read, at most a minute. Default 2s.
	Timeout time.Duration
	// Warmup is how long the background runs in the loaded cluster before
	// the reads start, so that they meet its queues in steady state.
	// Default 1s; at most a minute; NoWarmup means none.
	Warmup time.Duration
	// HedgePriority makes the servers serve queued copies marked as
	// hedges (hedges, and the second copy of a tied request) only when no
	// unmarked request waits. By default they queue in arrival order, as
	// in the paper, where both copies of a tied request were equals.
	HedgePriority bool
	// Seed makes arrivals and service times reproducible. Default 1. The
	// three policies in a cluster, and the two clusters, read the same
	// arrivals and draw the same service times (by server, read and copy);
	// the background's arrivals have a seed of their own.
	Seed uint64
	// Progress, when non-nil, is told as each run completes.
	Progress func(done, total int)
}

// Values of TiedDelay and Warmup that are not durations.
const (
	// AtOnce, as TiedDelay, sends both copies of a tied request at once.
	AtOnce time.Duration = -1
	// NoWarmup, as Warmup, starts the reads with the background.
	NoWarmup time.Duration = -1
)

// Defaults returns the configuration a zero Config runs with, but for
// HedgeDelay, whose default (0) is the read model's p95.
func Defaults() Config {
	return Config{
		Servers: 4, Workers: 2, QueueLimit: 256,
		ReadModel:       fixture.Lognormal{P50: 15 * time.Millisecond, P99: 40 * time.Millisecond},
		BackgroundModel: fixture.Lognormal{P50: 40 * time.Millisecond, P99: 150 * time.Millisecond},
		BackgroundShare: 0.2, Reads: 3000, Rate: 300, HedgeBudget: 0.1,
		TiedDelay: tied.DefaultDelay, Timeout: 2 * time.Second, Warmup: time.Second, Seed: 1,
	}
}

func (cfg Config) withDefaults() Config {
	d := Defaults()
	exp.Default(&cfg.Servers, d.Servers)
	exp.Default(&cfg.Workers, d.Workers)
	exp.Default(&cfg.QueueLimit, d.QueueLimit)
	exp.Default(&cfg.Reads, d.Reads)
	exp.Default(&cfg.BackgroundShare, d.BackgroundShare)
	exp.Default(&cfg.Rate, d.Rate)
	exp.Default(&cfg.HedgeBudget, d.HedgeBudget)
	exp.Default(&cfg.TiedDelay, d.TiedDelay)
	exp.Default(&cfg.Timeout, d.Timeout)
	exp.Default(&cfg.Warmup, d.Warmup)
	exp.Default(&cfg.Seed, d.Seed)
	if cfg.ReadModel == nil {
		cfg.ReadModel = d.ReadModel
	}
	if cfg.BackgroundModel == nil {
		cfg.BackgroundModel = d.BackgroundModel
	}
	return cfg
}

// Limits of a tied run: everything runs on one machine.
const (
	MaxServers    = 16
	MaxWorkers    = 16
	MaxQueueLimit = 10_000
	MaxReads      = 100_000
	MaxRate       = 1000
	// MaxRunTime bounds a run's reads: Reads / Rate.
	MaxRunTime = time.Minute
	// maxRequestRate bounds the requests the servers receive per
	// second: two copies per read and the background's.
	maxRequestRate = 2000
)

// tiedSample is the number of draws behind a model's mean and p95.
const tiedSample = 200_000

// Validate checks cfg as given, with its defaults filled in (Run fills
// them first): a zero where a default goes is an error here, but for
// HedgeDelay. It checks what follows from the settings too: that the
// servers are not loaded past capacity, nor sent too many requests. Its
// errors wrap exp.ErrConfig or fixture.ErrModel.
func (cfg Config) Validate() error {
	_, _, err := cfg.setup()
	return err
}

// setup validates cfg and returns it with the read model's p95 as its
// HedgeDelay if it had none, and the setup a run of it has.
func (cfg Config) setup() (Config, runSetup, error) {
	c := exp.NewChecker("tied")
	exp.Within(c, "servers", cfg.Servers, 2, MaxServers)
	exp.Within(c, "workers", cfg.Workers, 1, MaxWorkers)
	exp.Within(c, "queue-limit", cfg.QueueLimit, 1, MaxQueueLimit)
	exp.Within(c, "reads", cfg.Reads, 1, MaxReads)
	exp.Above(c, "rate", cfg.Rate, 0, MaxRate)
	if c.Err() == nil {
		t := float64(cfg.Reads) / cfg.Rate
		c.Check(t <= MaxRunTime.Seconds(), "reads", cfg.Reads, "at rate %v would take %.0fs per run: keep it within %v", cfg.Rate, t, MaxRunTime)
	}
	c.Check(cfg.BackgroundShare > 0 && cfg.BackgroundShare < 1, "background-share", cfg.BackgroundShare, "must be within (0, 1)")
	exp.Within(c, "hedge-delay", cfg.HedgeDelay, 0, time.Minute)
	exp.Above(c, "hedge-budget", cfg.HedgeBudget, 0, 1)
	c.Check(cfg.TiedDelay == AtOnce || cfg.TiedDelay >= 0 && cfg.TiedDelay <= time.Second, "tied-delay", cfg.TiedDelay, "must be within [0, 1s]")
	exp.Above(c, "timeout", cfg.Timeout, 0, time.Minute)
	c.Check(cfg.Warmup == NoWarmup || cfg.Warmup >= 0 && cfg.Warmup <= time.Minute, "warmup", cfg.Warmup, "must be within [0, 1m]")
	for _, m := range []struct {
		field string
		m     fixture.Model
	}{{"read-model", cfg.ReadModel}, {"background-model", cfg.BackgroundModel}} {
		c.Check(m.m != nil, m.field, nil, "must be given")
		if m.m != nil {
			if err := fixture.ValidateModel(m.m); err != nil {
				c.Fail(fmt.Errorf("lab tied: %s: %w", m.field, err))
			}
		}
	}
	if err := c.Err(); err != nil {
		return cfg, runSetup{}, err
	}
	bad := func(field string, value any, problem string, args ...any) error {
		c.Check(false, field, value, problem, args...)
		return c.Err()
	}
	read := fixture.Quantiles(cfg.ReadModel, tiedSample, cfg.Seed)
	bg := fixture.Quantiles(cfg.BackgroundModel, tiedSample, cfg.Seed+1)
	readMean, bgMean := mean(read), mean(bg)
	if !(readMean > 0) || !(bgMean > 0) {
		return cfg, runSetup{}, bad("", nil, "the read and background models must take time (means %.3f ms and %.3f ms)", readMean, bgMean)
	}
	if cfg.HedgeDelay == 0 {
		cfg.HedgeDelay = time.Duration(load.Rank(read, 0.95) * float64(time.Millisecond))
	}
	workers := float64(cfg.Servers * cfg.Workers)
	s := runSetup{
		Servers: cfg.Servers, Workers: cfg.Workers, QueueLimit: cfg.QueueLimit,
		ReadModel: cfg.ReadModel.String(), BackgroundModel: cfg.BackgroundModel.String(),
		Reads: cfg.Reads, Rate: cfg.Rate,
		ReadMeanMs: exp.Round3(readMean), ReadP95Ms: exp.Round3(load.Rank(read, 0.95)), BackgroundMeanMs: exp.Round3(bgMean),
		ReadShare:       exp.Round3(cfg.Rate * readMean / 1000 / workers),
		BackgroundShare: cfg.BackgroundShare,
		BackgroundRate:  exp.Round2(cfg.BackgroundShare * workers / (bgMean / 1000)),
		HedgeDelayMs:    load.Ms(cfg.HedgeDelay), HedgeBudget: cfg.HedgeBudget,
		TiedDelayMs: load.Ms(max(cfg.TiedDelay, 0)), TimeoutMs: load.Ms(cfg.Timeout), WarmupMs: load.Ms(max(cfg.Warmup, 0)),
		HedgePriority: cfg.HedgePriority, Seed: cfg.Seed,
		ReadSeed: load.PointSeed(cfg.Seed, 0), BackgroundSeed: load.PointSeed(cfg.Seed, 1),
	}
	c.Check(s.ReadShare+s.BackgroundShare < 1, "", nil, "reads (%.0f%% of the workers' time) and background (%.0f%%) would load the servers past capacity: lower the rate or the background share",
		100*s.ReadShare, 100*s.BackgroundShare)
	r := 2*cfg.Rate + s.BackgroundRate
	c.Check(r <= maxRequestRate, "", nil, "%.0f reads/s (two copies each) and %.0f background requests/s make %.0f requests/s: keep it within %d (lower the rate, the background share or the workers, or lengthen the background model)",
		cfg.Rate, s.BackgroundRate, r, maxRequestRate)
	return cfg, s, c.Err()
}

func mean(x []float64) float64 {
	t := 0.0
	for _, v := range x {
		t += v
	}
	return t / float64(len(x))
}
