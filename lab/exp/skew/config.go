package skew

import (
	"slices"
	"strconv"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/partition"
)

// Config configures the skew experiment. Zero fields take the defaults
// shown.
type Config struct {
	// Replicas is how many cache fixtures serve the tier, on 127.0.0.1.
	// Default 8; within [2, MaxReplicas].
	Replicas int
	// Workers is each replica's worker pool: reads served at once, the
	// rest queue in arrival order. Default 2; within [1, MaxWorkers].
	Workers int
	// Keys is the key space. Default 2000; within [1, MaxKeys].
	Keys int
	// CacheKeys is how many keys each replica caches (an LRU). Default
	// 100: the tier as a whole caches 40% of the key space and,
	// partitioned by key, hits 89% of the reads at the default skew, as a
	// cache tier is sized to; a replica fills its cache within the
	// warm-up (a larger cache, at the rate a replica serves here, would
	// still be filling when the measurement starts). Within [1, Keys].
	CacheKeys int
	// Exponent is the Zipf exponent of key popularity: the key of rank k
	// (from 1) is read in proportion to k^-Exponent. Default 1.1; within
	// [0, MaxExponent].
	Exponent float64
	// Hit and Miss are a replica's service times of a read whose key is
	// cached and of one that is not (an origin fetch), each holding a
	// worker. Defaults 10ms and 50ms: a miss costs 5 hits, and the time
	// scale is ten times a memory cache's so that one 2-core machine
	// drives the tier (about 780 reads/s) with its own scheduling noise
	// small next to a service time. The ratio is what matters: with a miss
	// at 20 hits, the hits micro-partitions lose to their second owner
	// cost more work than their balance saves (see docs/lab.md).
	// 0 <= Hit <= Miss, 0 < Miss <= MaxServiceTime.
	Hit, Miss time.Duration
	// Load is the offered rate as a share of the tier's capacity: the
	// reads per second its workers serve at the hit ratio of a tier
	// partitioned by key (Che's approximation for Replicas caches of
	// CacheKeys keys under the Zipf popularity), which is what a cache tier
	// is sized for. A policy that hits less offers its replicas more work
	// than Load says, and the report gives each policy's own utilization.
	// Default 0.7; within (0, MaxLoad].
	Load float64
	// Warmup is how long each run reads before its reads count: the caches
	// fill, the load estimates of the partition table cover a window and
	// the rebalancer settles. Its first half ramps the offered rate up
	// from a quarter (by thinning the arrivals), so that cold caches,
	// which miss every read, do not leave a backlog the measurement would
	// spend draining. Default 4s; at most MaxDuration; NoWarmup means none.
	Warmup time.Duration
	// Duration is how long each run reads after its warm-up, measured.
	// Default 6s; within [1s, MaxDuration].
	Duration time.Duration
	// Exponents are the Zipf exponents of the sweep (p99 against skew):
	// each is read through the hedged policies at Load of the tier's
	// capacity at that exponent's own planned hit ratio (a tier sized for
	// its workload: the skew changes, the planned utilization does not);
	// Exponent's own runs are its point. Nil means {0.8, 1.4}; empty, no
	// sweep. At most MaxExponents, each within [0, MaxExponent].
	Exponents []float64
	// Partitions configures the tables of the micro-partition policies
	// (package partition). Its zero fields take the lab's defaults, which
	// compress the gateway's time scale to fit a run of seconds: a Window
	// of 1s (the gateway's is 10s), a Cooldown of 500ms (5s); the rest are
	// the package's (20 partitions a replica, 2 owners, a load bound of
	// 1.25, 2 moves a round, 16 hot keys over 4 replicas, hot above 25% of
	// the mean rate per replica). The policy without selective replication
	// sets HotKeys to -1.
	Partitions partition.Config
	// RebalanceEvery is how often a rebalancing round runs. Default
	// 250ms (the gateway's is 1s); within (0, 10s].
	RebalanceEvery time.Duration
	// InFlightBound, when above 0, makes the micro-partition policies
	// judge a key's home per read, as HAProxy's hash-balance-factor
	// judges a server: the primary leaves the home for another owner
	// when one more attempt would take the home past InFlightBound × the
	// mean attempts in flight per replica. Zero (the default, and the
	// gateway's way) sends the primary home whenever it admits one, and
	// leaves the load bound to the partition table's moves. Zero or
	// within (1, 10].
	InFlightBound float64
	// Timeout bounds each read, hedges included; a read that times out
	// fails. Default 2s; within [100ms, 1m].
	Timeout time.Duration
	// Seed makes arrivals, keys and the picks reproducible. Default 1.
	// Every policy reads the same arrivals of the same keys, and the keys'
	// names (so where hashing puts them) follow the seed.
	Seed uint64
	// Progress, when non-nil, is told as each run completes.
	Progress func(done, total int)
}

// NoWarmup, as Config.Warmup, measures from the first read.
const NoWarmup time.Duration = -1

// Limits of a skew run: everything runs on one machine, run after run.
const (
	MaxReplicas    = 16
	MaxWorkers     = 16
	MaxKeys        = 10_000_000
	MaxExponent    = 3.0
	MaxExponents   = 8
	MaxServiceTime = time.Second
	MaxLoad        = 1.5
	MaxDuration    = 2 * time.Minute
	// MaxRate bounds the offered reads per second, MaxReads the reads of
	// one run (warm-up included).
	MaxRate  = 5000
	MaxReads = 300_000
)

// Defaults returns the configuration a zero Config runs with.
func Defaults() Config {
	return Config{Replicas: 8, Workers: 2, Keys: 2000, CacheKeys: 100, Exponent: 1.1, Hit: 10 * time.Millisecond, Miss: 50 * time.Millisecond,
		Load: 0.7, Warmup: 4 * time.Second, Duration: 6 * time.Second, Exponents: []float64{0.8, 1.4},
		Partitions: partition.Config{Window: time.Second, Cooldown: 500 * time.Millisecond}, RebalanceEvery: 250 * time.Millisecond,
		Timeout: 2 * time.Second, Seed: 1}
}

func (cfg Config) withDefaults() Config {
	d := Defaults()
	exp.Default(&cfg.Replicas, d.Replicas)
	exp.Default(&cfg.Workers, d.Workers)
	exp.Default(&cfg.Keys, d.Keys)
	exp.Default(&cfg.CacheKeys, d.CacheKeys)
	exp.Default(&cfg.Exponent, d.Exponent)
	exp.Default(&cfg.Hit, d.Hit)
	exp.Default(&cfg.Miss, d.Miss)
	exp.Default(&cfg.Load, d.Load)
	exp.Default(&cfg.Warmup, d.Warmup)
	exp.Default(&cfg.Duration, d.Duration)
	exp.Default(&cfg.Partitions.Window, d.Partitions.Window)
	exp.Default(&cfg.Partitions.Cooldown, d.Partitions.Cooldown)
	exp.Default(&cfg.RebalanceEvery, d.RebalanceEvery)
	exp.Default(&cfg.Timeout, d.Timeout)
	exp.Default(&cfg.Seed, d.Seed)
	if cfg.Exponents == nil {
		cfg.Exponents = d.Exponents
	}
	cfg.Exponents = slices.Clone(cfg.Exponents)
	return cfg
}

// Validate checks cfg as given, with its defaults filled in (Run fills
// them first): a zero where a default goes is an error here. Its errors
// wrap exp.ErrConfig, or partition.ErrInvalid for the Partitions.
func (cfg Config) Validate() error {
	_, err := cfg.setup()
	return err
}

// setup validates cfg and returns the setup its runs share.
func (cfg Config) setup() (Setup, error) {
	c := exp.NewChecker("skew")
	tier, _ := tierSpec{cfg.Replicas, cfg.Workers, cfg.Keys, cfg.CacheKeys, cfg.Exponent, cfg.Hit, cfg.Miss, cfg.Load,
		MaxReplicas, MaxWorkers, MaxKeys}.plan(c)
	c.Check(cfg.Warmup == NoWarmup || cfg.Warmup >= 0 && cfg.Warmup <= MaxDuration, "warmup", cfg.Warmup, "must be within [0, %v]", MaxDuration)
	exp.Within(c, "duration", cfg.Duration, time.Second, MaxDuration)
	c.Check(len(cfg.Exponents) <= MaxExponents, "exponents", len(cfg.Exponents), "exponents: at most %d", MaxExponents)
	for _, e := range cfg.Exponents {
		exp.Within(c, "exponents", e, 0, MaxExponent)
	}
	exp.Above(c, "rebalance-every", cfg.RebalanceEvery, 0, 10*time.Second)
	exp.Within(c, "timeout", cfg.Timeout, 100*time.Millisecond, time.Minute)
	c.Check(cfg.InFlightBound == 0 || cfg.InFlightBound > 1 && cfg.InFlightBound <= 10, "inflight-bound", cfg.InFlightBound, "must be 0 (none) or within (1, 10]")
	c.Check(c.Err() != nil || tier.Rate <= MaxRate, "load", cfg.Load,
		"offers %.0f reads/s to a tier that serves %.0f: keep it within %d (fewer replicas or workers, a lower load, or slower hits and misses)",
		tier.Rate, tier.CapacityPerSec, MaxRate)
	if c.Err() != nil {
		return Setup{}, c.Err()
	}
	names := replicaNames(cfg.Replicas)
	if _, err := partition.New(names, cfg.Partitions); err != nil {
		return Setup{}, &exp.FieldError{Experiment: "skew", Problem: "partitions: " + err.Error()}
	}
	s := Setup{
		Tier: tier, WarmupMs: load.Ms(max(cfg.Warmup, 0)), DurationMs: load.Ms(cfg.Duration), InFlightBound: cfg.InFlightBound,
		Exponents: cfg.Exponents, Partitions: settingsOf(cfg.Partitions, cfg.RebalanceEvery), TimeoutMs: load.Ms(cfg.Timeout),
		Seed: cfg.Seed, ArrivalSeed: load.PointSeed(cfg.Seed, 0), KeySeed: load.PointSeed(cfg.Seed, 1), PickSeed: load.PointSeed(cfg.Seed, 2),
		ReplicaNames: names,
	}
	run := max(cfg.Warmup, 0) + cfg.Duration
	s.Reads = Arrivals(s.Rate, run, cfg.Seed).Requests
	c.Check(s.Reads <= MaxReads, "duration", cfg.Duration, "with -warmup %v at %.0f reads/s is %d reads a run: keep it within %d", cfg.Warmup, s.Rate, s.Reads, MaxReads)
	c.Check(s.Reads > 0, "", nil, "no read arrives within %v at %v reads/s with seed %d", run, s.Rate, cfg.Seed)
	for _, e := range cfg.Exponents {
		t, _ := tierSpec{cfg.Replicas, cfg.Workers, cfg.Keys, cfg.CacheKeys, e, cfg.Hit, cfg.Miss, cfg.Load, MaxReplicas, MaxWorkers, MaxKeys}.plan(c)
		reads := Arrivals(t.Rate, run, cfg.Seed).Requests
		c.Check(c.Err() != nil || t.Rate <= MaxRate && reads <= MaxReads, "exponents", e, "offers %.0f reads/s, %d a run: keep them within %d and %d", t.Rate, reads, MaxRate, MaxReads)
		s.SweepRates = append(s.SweepRates, t.Rate)
	}
	if c.Err() != nil {
		return Setup{}, c.Err()
	}
	h, err := hedge.New(hedge.Policy{})
	if err != nil {
		return Setup{}, err
	}
	hp := h.Policy()
	s.HedgeDelay = "adaptive p" + strconv.FormatFloat(100*hp.Adaptive.Quantile, 'g', -1, 64)
	s.MaxAttempts, s.HedgeBudget, s.HedgeBurst = hp.MaxAttempts, hp.Budget.Fraction(), hp.Budget.Burst()
	for _, p := range policies() {
		s.Policies = append(s.Policies, p.Name)
	}
	return s, nil
}

// Setup is the skew experiment's configuration with its defaults filled
// in, and what follows from it.
type Setup struct {
	Tier
	WarmupMs   float64 `json:"warmupMs"`
	DurationMs float64 `json:"durationMs"`
	// Reads is how many reads each run offers, warm-up included: the
	// Poisson arrivals of ArrivalSeed, the same in every run.
	Reads     int       `json:"readsPerRun"`
	Exponents []float64 `json:"exponents"`
	// SweepRates are the offered rates of the Exponents' runs.
	SweepRates []float64 `json:"sweepRates"`
	// Partitions are the micro-partition policies' table settings.
	Partitions settings `json:"partitions"`
	// InFlightBound is Config's: 0 when a key's primaries go home
	// whenever it admits one.
	InFlightBound float64 `json:"inFlightBound"`
	// HedgeDelay, MaxAttempts, HedgeBudget and HedgeBurst are the hedging
	// policies' (the hedge engine's defaults); TimeoutMs bounds each read.
	HedgeDelay   string   `json:"hedgeDelay"`
	MaxAttempts  int      `json:"maxAttempts"`
	HedgeBudget  float64  `json:"hedgeBudget"`
	HedgeBurst   float64  `json:"hedgeBurst"`
	TimeoutMs    float64  `json:"timeoutMs"`
	Policies     []string `json:"policies"`
	Seed         uint64   `json:"seed"`
	ArrivalSeed  uint64   `json:"arrivalSeed"`
	KeySeed      uint64   `json:"keySeed"`
	PickSeed     uint64   `json:"pickSeed"`
	ReplicaNames []string `json:"replicaNames"`
}

// settings are a partition table's settings in effect.
type settings struct {
	PartitionsPerReplica int     `json:"partitionsPerReplica"`
	Owners               int     `json:"owners"`
	LoadBound            float64 `json:"loadBound"`
	MovesPerRound        int     `json:"movesPerRound"`
	CooldownMs           float64 `json:"cooldownMs"`
	WindowMs             float64 `json:"windowMs"`
	HotKeys              int     `json:"hotKeys"`
	HotShare             float64 `json:"hotShare"`
	HotReplicas          int     `json:"hotReplicas"`
	SketchSize           int     `json:"sketchSize"`
	RebalanceEveryMs     float64 `json:"rebalanceEveryMs"`
}

// settingsOf fills c's zero fields with the package's defaults, as
// partition.New does, for the report.
func settingsOf(c partition.Config, every time.Duration) settings {
	or := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	s := settings{
		PartitionsPerReplica: or(c.PartitionsPerReplica, partition.DefaultPartitionsPerReplica), Owners: or(c.Owners, partition.DefaultOwners),
		LoadBound: c.LoadBound, MovesPerRound: or(c.MovesPerRound, partition.DefaultMovesPerRound),
		CooldownMs: load.Ms(c.Cooldown), WindowMs: load.Ms(c.Window), HotKeys: or(c.HotKeys, partition.DefaultHotKeys),
		HotShare: c.HotShare, HotReplicas: or(c.HotReplicas, partition.DefaultHotReplicas), SketchSize: or(c.SketchSize, partition.DefaultSketchSize),
		RebalanceEveryMs: load.Ms(every),
	}
	if s.LoadBound == 0 {
		s.LoadBound = partition.DefaultLoadBound
	}
	if s.HotShare == 0 {
		s.HotShare = partition.DefaultHotShare
	}
	return s
}

// replicaNames names n replicas cache-a, cache-b, ...
func replicaNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "cache-" + string(rune('a'+i))
	}
	return names
}
