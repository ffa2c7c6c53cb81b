package sweep

import (
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
)

// Config configures the sweep experiment. Zero fields take the
// defaults shown.
type Config struct {
	// Requests per point. Default 400; at most MaxRequests.
	Requests int
	// Rate is the offered load per second (open loop). Default 200; at most
	// maxRate.
	Rate float64
	// Model is each replica's latency. Default lognormal, p50 4ms, p99 60ms.
	Model fixture.Model
	// Delays are the fixed hedge delays to try, each at most a minute.
	// Default (nil) 1, 2, 3, 5, 8, 13, 20, 30 and 50ms.
	Delays []time.Duration
	// Quantiles are the adaptive delays to try, each in (0, 1). Default
	// (nil) p50, p75, p90, p95 and p99. An empty Delays and Quantiles leave
	// nothing to sweep.
	Quantiles []float64
	// Seed makes arrivals and fixtures reproducible. Default 1.
	Seed uint64
	// Progress, when non-nil, is told as each point completes.
	Progress func(done, total int)
	// NoReruns keeps every point's first run, whatever the machine did
	// during it (see Point.Runs): for a quick look, where a rerun's time
	// buys nothing (the demo's -short, tests under -race, whose every
	// point would see a stall).
	NoReruns bool
}

// Limits of a sweep.
const (
	MaxRequests = 100_000
	maxRate     = 10_000
)

// Defaults returns the configuration a zero Config runs with.
func Defaults() Config {
	d := Config{Requests: 400, Rate: 200, Seed: 1, Model: fixture.Lognormal{P50: 4 * time.Millisecond, P99: 60 * time.Millisecond},
		Quantiles: []float64{0.5, 0.75, 0.9, 0.95, 0.99}}
	for _, ms := range []int{1, 2, 3, 5, 8, 13, 20, 30, 50} {
		d.Delays = append(d.Delays, time.Duration(ms)*time.Millisecond)
	}
	return d
}

func (cfg Config) withDefaults() Config {
	d := Defaults()
	exp.Default(&cfg.Requests, d.Requests)
	exp.Default(&cfg.Rate, d.Rate)
	exp.Default(&cfg.Seed, d.Seed)
	if cfg.Model == nil {
		cfg.Model = d.Model
	}
	if cfg.Delays == nil {
		cfg.Delays = d.Delays
	}
	if cfg.Quantiles == nil {
		cfg.Quantiles = d.Quantiles
	}
	return cfg
}

// Validate checks cfg as given, with its defaults filled in (Run fills
// them first): a zero where a default goes is an error here. Its errors
// wrap exp.ErrConfig or fixture.ErrModel.
func (cfg Config) Validate() error {
	c := exp.NewChecker("sweep")
	exp.Within(c, "requests", cfg.Requests, 1, MaxRequests)
	exp.Above(c, "rate", cfg.Rate, 0, maxRate)
	for _, d := range cfg.Delays {
		exp.Above(c, "delays", d, 0, time.Minute)
	}
	for _, q := range cfg.Quantiles {
		c.Check(q > 0 && q < 1, "quantiles", q, "must be within (0, 1)")
	}
	c.Check(len(cfg.Delays)+len(cfg.Quantiles) > 0, "", nil, "nothing to sweep: give delays or quantiles")
	c.Check(cfg.Model != nil, "model", nil, "must be given")
	if cfg.Model != nil {
		c.Fail(fixture.ValidateModel(cfg.Model))
	}
	return c.Err()
}
