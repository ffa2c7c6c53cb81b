package skew

import (
	"math"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/sim"
)

// Tier is the cache tier a run reads and how hard, as a loopback run's and
// a simulation's reports give it.
type Tier struct {
	Replicas  int     `json:"replicas"`
	Workers   int     `json:"workers"`
	Keys      int     `json:"keys"`
	CacheKeys int     `json:"cacheKeys"`
	Exponent  float64 `json:"exponent"`
	// TopKeyShare is the share of reads the most popular key draws.
	TopKeyShare float64 `json:"topKeyShare"`
	HitMs       float64 `json:"hitMs"`
	MissMs      float64 `json:"missMs"`
	// PlannedHitRatio is Che's approximation of the hit ratio of the tier
	// partitioned by key (Replicas caches of CacheKeys keys);
	// NoAffinityHitRatio that of a cache that sees every key (CacheKeys).
	PlannedHitRatio    float64 `json:"plannedHitRatio"`
	NoAffinityHitRatio float64 `json:"noAffinityHitRatio"`
	// CapacityPerSec is the reads per second the tier serves at the
	// planned hit ratio: Replicas × Workers / the mean service time. Rate
	// is Load × that: the offered rate, Poisson arrivals.
	CapacityPerSec float64 `json:"capacityPerSec"`
	Load           float64 `json:"load"`
	Rate           float64 `json:"rate"`
}

// tierSpec is a tier as configured, and the limits of the run that reads
// it.
type tierSpec struct {
	replicas, workers, keys, cacheKeys int
	exponent                           float64
	hit, miss                          time.Duration
	load                               float64
	maxReplicas, maxWorkers, maxKeys   int
}

// plan checks the tier's settings with c and works out its hit ratios,
// capacity and rate; z is its key popularity, nil when c found a problem.
func (t tierSpec) plan(c *exp.Checker) (tier Tier, z *sim.Zipf) {
	exp.Within(c, "replicas", t.replicas, 2, t.maxReplicas)
	exp.Within(c, "workers", t.workers, 1, t.maxWorkers)
	exp.Within(c, "keys", t.keys, 1, t.maxKeys)
	exp.Within(c, "cache-keys", t.cacheKeys, 1, t.keys)
	exp.Within(c, "exponent", t.exponent, 0, MaxExponent)
	exp.Within(c, "hit", t.hit, 0, MaxServiceTime)
	exp.Above(c, "miss", t.miss, 0, MaxServiceTime)
	c.Check(t.hit <= t.miss, "hit", t.hit, "must not be above -miss %v", t.miss)
	exp.Above(c, "load", t.load, 0, MaxLoad)
	if c.Err() != nil {
		return Tier{}, nil
	}
	z, err := sim.NewZipf(t.keys, t.exponent)
	if err != nil {
		c.Fail(err)
		return Tier{}, nil
	}
	planned := z.LRUHitRatio(t.replicas * t.cacheKeys)
	mean := planned*float64(t.hit) + (1-planned)*float64(t.miss)
	capacity := float64(t.replicas*t.workers) / (mean / float64(time.Second))
	return Tier{
		Replicas: t.replicas, Workers: t.workers, Keys: t.keys, CacheKeys: t.cacheKeys, Exponent: t.exponent, TopKeyShare: exp.Round3(z.Prob(0)),
		HitMs: load.Ms(t.hit), MissMs: load.Ms(t.miss), PlannedHitRatio: exp.Round3(planned), NoAffinityHitRatio: exp.Round3(z.LRUHitRatio(t.cacheKeys)),
		CapacityPerSec: math.Round(capacity), Load: t.load, Rate: math.Round(t.load*capacity*10) / 10,
	}, z
}

// PlanTier checks a tier of the sizes given, on loopback (at most
// MaxReplicas replicas of MaxWorkers workers), and works out its hit
// ratios, capacity and rate as the skew experiment does: bench/skew offers
// the same load. Its errors wrap exp.ErrConfig.
func PlanTier(replicas, workers, keys, cacheKeys int, exponent float64, hit, miss time.Duration, loadShare float64) (Tier, error) {
	c := exp.NewChecker("skew")
	t, _ := tierSpec{replicas, workers, keys, cacheKeys, exponent, hit, miss, loadShare, MaxReplicas, MaxWorkers, MaxKeys}.plan(c)
	return t, c.Err()
}

// Balance is how a policy's reads used the tier.
type Balance struct {
	// HitRatio is the share of the reads the replicas served that hit
	// their cache.
	HitRatio float64 `json:"hitRatio"`
	// LoadMaxOverMean is the most reads a replica received over the mean
	// per replica; WorkMaxOverMean the same for the service time they
	// cost (hits and misses priced at Hit and Miss).
	LoadMaxOverMean float64 `json:"loadMaxOverMean"`
	WorkMaxOverMean float64 `json:"workMaxOverMean"`
	// Utilization is the replicas' mean busy share of their workers' time,
	// MaxUtilization the busiest replica's.
	Utilization    float64 `json:"utilization"`
	MaxUtilization float64 `json:"maxUtilization"`
	// PartitionsMoved counts the rebalancer's moves over the whole run,
	// warm-up included; HotKeys the keys replicated at the end.
	PartitionsMoved int `json:"partitionsMoved"`
	HotKeys         int `json:"hotKeys"`
}
