package straggler

import (
	"math"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
)

// Config configures the straggler experiment. Zero fields take the
// defaults shown.
type Config struct {
	// Requests per side. Default 500; at most MaxRequests.
	Requests int
	// Rate is the offered load per second (open loop). Default 100; at
	// most maxRate.
	Rate float64
	// Model is each replica's latency. Default: 5% of request IDs (every
	// 20th) take 80ms on whichever replica gets them as a primary and 2ms
	// anywhere else; the other requests take 2ms.
	Model fixture.Model
	// Gateway configures the gateway; Backends are filled in. Its zero
	// Policy is the gateway's default (adaptive delay).
	Gateway gateway.Config
	// Seed makes arrivals and fixtures reproducible. Default 1.
	Seed uint64
	// Progress, when non-nil, is told as each side completes.
	Progress func(done, total int)
}

// Limits of a straggler run.
const (
	MaxRequests = 100_000
	maxRate     = 10_000
)

// Defaults returns the configuration a zero Config runs with, but for the
// model, defaultModel of the requests.
func Defaults() Config { return Config{Requests: 500, Rate: 100, Seed: 1} }

func (cfg Config) withDefaults() Config {
	d := Defaults()
	exp.Default(&cfg.Requests, d.Requests)
	exp.Default(&cfg.Rate, d.Rate)
	exp.Default(&cfg.Seed, d.Seed)
	if cfg.Model == nil {
		cfg.Model = defaultModel(cfg.Requests)
	}
	return cfg
}

// Validate checks cfg as given, with its defaults filled in (Run fills
// them first): a zero where a default goes is an error here. Its errors
// wrap exp.ErrConfig or fixture.ErrModel.
func (cfg Config) Validate() error {
	c := exp.NewChecker("straggler")
	exp.Within(c, "requests", cfg.Requests, 1, MaxRequests)
	exp.Above(c, "rate", cfg.Rate, 0, maxRate)
	c.Check(cfg.Model != nil, "model", nil, "must be given")
	if cfg.Model != nil {
		c.Fail(fixture.ValidateModel(cfg.Model))
	}
	return c.Err()
}

// defaultModel is the straggler experiment's default: every 20th
// request straggles (80ms) on its primary, and is fast (2ms) as a hedge.
func defaultModel(requests int) fixture.Model {
	m, _ := IDs(requests, 0.05, 2*time.Millisecond, 80*time.Millisecond)
	return m
}

// IDs is the reference experiment's shape: of requests ids 0 to
// requests-1, a share spread evenly (id i when floor((i+1)·share) passes
// floor(i·share): every 20th for 0.05) takes slow on whichever replica
// serves it as a primary and fast as a hedge; the others take fast. It
// refuses a share outside [0, 1] and requests a run could not have;
// Validate checks the times, as it does any model's.
func IDs(requests int, share float64, fast, slow time.Duration) (fixture.Model, error) {
	c := exp.NewChecker("straggler")
	exp.Within(c, "requests", requests, 1, MaxRequests)
	exp.Within(c, "slow-share", share, 0, 1)
	if err := c.Err(); err != nil {
		return nil, err
	}
	var ids []uint64
	for i := range requests {
		if math.Floor(float64(i+1)*share) > math.Floor(float64(i)*share) {
			ids = append(ids, uint64(i))
		}
	}
	return fixture.SlowIDs{IDs: ids, Fast: fast, Slow: slow, PrimaryOnly: true}, nil
}
