package classes

import (
	"encoding/json"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
)

// Config configures the classes experiment. Zero fields take the defaults
// of Defaults.
type Config struct {
	// Reads per condition; Rate the offered load per second, open loop.
	Reads int
	Rate  float64
	// SearchShare is the share of reads that are searches.
	SearchShare float64
	// IDs is how many ids the reads draw from, uniformly.
	IDs int
	// Item and Search are the two kinds' service times: fast, and slow on
	// the replica whose own share of ids straggles.
	Item, Search Kind
	// ItemDelay and SearchDelay are the routes condition's fixed delays.
	ItemDelay, SearchDelay time.Duration
	// Seed makes arrivals, ids and stragglers reproducible.
	Seed uint64
	// Progress, when non-nil, is told as each condition completes.
	Progress func(done, total int)
}

// Kind is one kind of read's service times.
type Kind struct {
	Fast, Slow time.Duration
	// SlowShare is each replica's own share of ids that take Slow there
	// (and Fast on the other replica).
	SlowShare float64
}

// Limits of a run.
const (
	MaxReads = 100_000
	maxRate  = 10_000
	maxIDs   = 1_000_000
)

// Defaults returns the configuration of the measurement: 3,000
// reads at 150/s, a fifth of them searches.
func Defaults() Config {
	return Config{
		Reads: 3000, Rate: 150, SearchShare: 0.2, IDs: 1000,
		Item:      Kind{Fast: time.Millisecond, Slow: 40 * time.Millisecond, SlowShare: 0.05},
		Search:    Kind{Fast: 20 * time.Millisecond, Slow: 200 * time.Millisecond, SlowShare: 0.04},
		ItemDelay: 5 * time.Millisecond, SearchDelay: 40 * time.Millisecond,
		Seed: 1,
	}
}

func (cfg Config) withDefaults() Config {
	d := Defaults()
	exp.Default(&cfg.Reads, d.Reads)
	exp.Default(&cfg.Rate, d.Rate)
	exp.Default(&cfg.SearchShare, d.SearchShare)
	exp.Default(&cfg.IDs, d.IDs)
	if cfg.Item == (Kind{}) {
		cfg.Item = d.Item
	}
	if cfg.Search == (Kind{}) {
		cfg.Search = d.Search
	}
	exp.Default(&cfg.ItemDelay, d.ItemDelay)
	exp.Default(&cfg.SearchDelay, d.SearchDelay)
	exp.Default(&cfg.Seed, d.Seed)
	return cfg
}

// Validate checks cfg with its defaults filled in; errors wrap
// exp.ErrConfig.
func (cfg Config) Validate() error {
	cfg = cfg.withDefaults()
	c := exp.NewChecker("classes")
	exp.Within(c, "reads", cfg.Reads, 1, MaxReads)
	exp.Above(c, "rate", cfg.Rate, 0, maxRate)
	exp.Within(c, "search-share", cfg.SearchShare, 0, 1)
	exp.Within(c, "ids", cfg.IDs, 10, maxIDs)
	for _, k := range []struct {
		name string
		k    Kind
	}{{"item", cfg.Item}, {"search", cfg.Search}} {
		c.Check(k.k.Fast > 0 && k.k.Slow >= k.k.Fast, k.name, nil, "times: want 0 < fast <= slow")
		exp.Within(c, k.name+"-slow-share", k.k.SlowShare, 0, 0.5)
	}
	c.Check(cfg.ItemDelay > 0 && cfg.SearchDelay > 0, "delay", nil, "the routes' delays must be positive")
	return c.Err()
}

// MarshalJSON writes cfg as the reports show a configuration: times in
// milliseconds, under the flags' names.
func (cfg Config) MarshalJSON() ([]byte, error) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	type kind struct {
		FastMs    float64 `json:"fastMs"`
		SlowMs    float64 `json:"slowMs"`
		SlowShare float64 `json:"slowShare"`
	}
	return json.Marshal(struct {
		Reads         int     `json:"reads"`
		Rate          float64 `json:"rate"`
		SearchShare   float64 `json:"searchShare"`
		IDs           int     `json:"ids"`
		Item          kind    `json:"item"`
		Search        kind    `json:"search"`
		ItemDelayMs   float64 `json:"itemDelayMs"`
		SearchDelayMs float64 `json:"searchDelayMs"`
		Seed          uint64  `json:"seed"`
	}{cfg.Reads, cfg.Rate, cfg.SearchShare, cfg.IDs,
		kind{ms(cfg.Item.Fast), ms(cfg.Item.Slow), cfg.Item.SlowShare},
		kind{ms(cfg.Search.Fast), ms(cfg.Search.Slow), cfg.Search.SlowShare},
		ms(cfg.ItemDelay), ms(cfg.SearchDelay), cfg.Seed})
}
