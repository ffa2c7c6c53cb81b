package overload

import (
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
)

// Config configures the overload experiment. Zero fields take the
// defaults shown.
type Config struct {
	// Workers is how many requests each of the two fixtures serves at
	// once; the rest queue (FIFO). Default 2; at most MaxWorkers.
	Workers int
	// Service is each request's service time, at most a second. Default
	// 20ms: with 2
	// workers, a fixture serves 100 requests/s, the pair 200.
	Service time.Duration
	// Loads are offered loads as multiples of the pair's capacity, each in
	// (0, MaxLoad], at most maxRate reads/s. Default (nil) 0.5, 0.8, 1.0,
	// 1.2, 1.5, 2.0.
	Loads []float64
	// Duration of each load, at most a minute. Default 3s. Each load offers the arrivals of
	// a Poisson process over this window, so the number of reads offered
	// is itself random (mean rate × Duration).
	Duration time.Duration
	// Delay is the hedge delay, at most a minute. Default 30ms (a little over the service
	// time: below capacity it hedges only what queues).
	Delay time.Duration
	// Timeout bounds each read. Default 1s.
	Timeout time.Duration
	// Seed makes arrivals reproducible. Default 1. Each load draws its
	// arrivals from its own seed, derived from Seed and the load's index;
	// the conditions at one load share them, so they are compared on the
	// same arrivals.
	Seed uint64
	// HedgePriority adds a fourth condition: unbounded hedging against
	// fixtures that serve queued hedges only when no primary waits (hedge
	// priority), to show whether that protects the primaries when hedges
	// are plentiful.
	HedgePriority bool
	// Progress, when non-nil, is told as each point completes.
	Progress func(done, total int)
}

// Limits of an overload run.
const (
	MaxWorkers = 64
	MaxLoad    = 5
	// maxRate bounds the reads per second of the highest load.
	maxRate = 5000
)

// Defaults returns the configuration a zero Config runs with.
func Defaults() Config {
	return Config{Workers: 2, Service: 20 * time.Millisecond, Loads: []float64{0.5, 0.8, 1.0, 1.2, 1.5, 2.0}, Duration: 3 * time.Second,
		Delay: 30 * time.Millisecond, Timeout: time.Second, Seed: 1}
}

func (cfg Config) withDefaults() Config {
	d := Defaults()
	exp.Default(&cfg.Workers, d.Workers)
	exp.Default(&cfg.Service, d.Service)
	exp.Default(&cfg.Duration, d.Duration)
	exp.Default(&cfg.Delay, d.Delay)
	exp.Default(&cfg.Timeout, d.Timeout)
	exp.Default(&cfg.Seed, d.Seed)
	if cfg.Loads == nil {
		cfg.Loads = d.Loads
	}
	return cfg
}

// capacity is what the pair of fixtures serves per second.
func (cfg Config) capacity() float64 { return 2 * float64(cfg.Workers) / cfg.Service.Seconds() }

// Validate checks cfg as given, with its defaults filled in (Run fills
// them first): a zero where a default goes is an error here. Its errors
// wrap exp.ErrConfig.
func (cfg Config) Validate() error {
	c := exp.NewChecker("overload")
	exp.Within(c, "workers", cfg.Workers, 1, MaxWorkers)
	exp.Above(c, "service", cfg.Service, 0, time.Second)
	exp.Above(c, "duration", cfg.Duration, 0, time.Minute)
	exp.Above(c, "hedge-delay", cfg.Delay, 0, time.Minute)
	c.Check(cfg.Timeout >= 0, "timeout", cfg.Timeout, "must not be negative")
	c.Check(len(cfg.Loads) > 0, "loads", nil, "is empty: name at least one load")
	top := 0.0
	for _, l := range cfg.Loads {
		exp.Above(c, "loads", l, 0, MaxLoad)
		top = max(top, l)
	}
	if rps := top * cfg.capacity(); c.Err() == nil {
		c.Check(rps <= maxRate, "", nil, "the highest load would offer %.0f reads/s: keep it within %d (fewer workers, longer service)", rps, maxRate)
	}
	return c.Err()
}
