package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Skew simulates a tier of cache servers read through a placement policy
// under skewed key popularity, in virtual time: the fleet-scale side of
// the lab's skew experiment. Reads arrive as a Poisson process at Rate,
// each for a key drawn from Zipf. The Placement names the replicas that
// may serve the key (all of them, without affinity; the key's owners,
// with it), and the read goes to the one with less work queued of two
// of them drawn at random (power of two choices; with one candidate, to
// it). Each replica caches CacheKeys keys (an LRU) and serves Workers
// reads at once, in arrival order: a hit takes Hit, a miss takes Miss
// (an origin fetch) and caches the key. The cache is looked up as the
// read arrives, not when its service starts (a fixture looks up when it
// starts serving): the two differ only for reads of a key whose miss is
// still queued. There is no hedging, no failure and no network.
//
// Skew is single-threaded and draws every random number from Seed, so a
// result depends only on the configuration and the placement.
type SkewConfig struct {
	// Replicas is the number of cache servers, within [1, MaxSkewReplicas].
	Replicas int
	// Workers is how many reads a replica serves at once, within [1,
	// MaxSkewWorkers].
	Workers int
	// CacheKeys is how many keys a replica caches, at least 1.
	CacheKeys int
	// Hit and Miss are the service times of a hit and a miss: 0 <= Hit <=
	// Miss, Miss > 0, Miss at most a minute.
	Hit, Miss time.Duration
	// Zipf draws each read's key; required.
	Zipf *Zipf
	// Rate is arrivals per second, > 0.
	Rate float64
	// Requests is how many reads arrive, within [1, MaxSkewRequests];
	// the first Warmup of them (0 <= Warmup < Requests) warm the caches
	// and the placement and are not measured.
	Requests, Warmup int
	// RebalanceEvery is how often, in virtual time, Placement.Rebalance
	// runs; 0 never calls it.
	RebalanceEvery time.Duration
	// Seed seeds arrivals, keys and picks.
	Seed uint64
}

// Limits of Skew.
const (
	MaxSkewReplicas = 100_000
	MaxSkewWorkers  = 64
	MaxSkewRequests = 100_000_000
)

// Placement routes the reads of a Skew simulation. Keys are Zipf ranks
// (0 is the most popular); times are virtual, since the first arrival.
type Placement interface {
	// Candidates returns the replicas (indices in [0, Replicas)) that may
	// serve a read of key at now: never empty. Skew does not keep or
	// modify the slice.
	Candidates(key int, now time.Duration) []int
	// Served tells the placement that replica served a read of key at now.
	Served(key, replica int, now time.Duration)
	// Rebalance runs one rebalancing round at now and returns how many
	// partitions it moved.
	Rebalance(now time.Duration) int
}

// SkewResult is what a Skew run measured, over the reads after the
// warm-up.
type SkewResult struct {
	// Requests is the number of reads measured.
	Requests int
	// HitRatio is the share of them that hit a cache.
	HitRatio float64
	// LoadMaxOverMean is the most reads a replica served over the mean
	// per replica; BusyMaxOverMean the same for service time (work).
	LoadMaxOverMean float64
	BusyMaxOverMean float64
	// Utilization is the replicas' mean busy share of their workers'
	// time over the measured span, MaxUtilization the busiest one's (above
	// 1 when its queue grew: it was offered more than it could serve).
	Utilization    float64
	MaxUtilization float64
	// Latency from arrival to the end of service.
	P50, P99, P999 time.Duration
	// PartitionsMoved sums what Rebalance returned over the whole run,
	// warm-up included.
	PartitionsMoved int
	// Served is the reads each replica served, measured.
	Served []int64
}

// Salts of Skew's random streams.
const (
	saltSkewArrival = 0x736b65772d617272
	saltSkewKey     = 0x736b65772d6b6579
	saltSkewPick    = 0x736b65772d70636b
)

func (c SkewConfig) validate() error {
	switch {
	case c.Replicas < 1 || c.Replicas > MaxSkewReplicas:
		return fmt.Errorf("%w: skew replicas %d outside [1, %d]", ErrInvalid, c.Replicas, MaxSkewReplicas)
	case c.Workers < 1 || c.Workers > MaxSkewWorkers:
		return fmt.Errorf("%w: skew workers %d outside [1, %d]", ErrInvalid, c.Workers, MaxSkewWorkers)
	case c.CacheKeys < 1:
		return fmt.Errorf("%w: skew cache keys %d below 1", ErrInvalid, c.CacheKeys)
	case c.Hit < 0 || c.Miss <= 0 || c.Hit > c.Miss || c.Miss > time.Minute:
		return fmt.Errorf("%w: skew hit %v and miss %v: want 0 <= hit <= miss, 0 < miss <= 1m", ErrInvalid, c.Hit, c.Miss)
	case c.Zipf == nil:
		return fmt.Errorf("%w: skew without a Zipf", ErrInvalid)
	case !(c.Rate > 0) || math.IsInf(c.Rate, 1):
		return fmt.Errorf("%w: skew rate %v must be positive", ErrInvalid, c.Rate)
	case c.Requests < 1 || c.Requests > MaxSkewRequests:
		return fmt.Errorf("%w: skew requests %d outside [1, %d]", ErrInvalid, c.Requests, MaxSkewRequests)
	case c.Warmup < 0 || c.Warmup >= c.Requests:
		return fmt.Errorf("%w: skew warm-up %d outside [0, requests %d)", ErrInvalid, c.Warmup, c.Requests)
	case c.RebalanceEvery < 0:
		return fmt.Errorf("%w: negative skew rebalance interval %v", ErrInvalid, c.RebalanceEvery)
	}
	return nil
}

// Skew runs the simulation described by cfg through placement p.
func Skew(cfg SkewConfig, p Placement) (SkewResult, error) {
	if err := cfg.validate(); err != nil {
		return SkewResult{}, err
	}
	if p == nil {
		return SkewResult{}, fmt.Errorf("%w: skew without a placement", ErrInvalid)
	}
	n, w := cfg.Replicas, cfg.Workers
	arrivals := rand.New(rand.NewPCG(streamSeed(cfg.Seed, saltSkewArrival, 0)))
	keys := rand.New(rand.NewPCG(streamSeed(cfg.Seed, saltSkewKey, 0)))
	picks := rand.New(rand.NewPCG(streamSeed(cfg.Seed, saltSkewPick, 0)))
	caches := make([]*LRU[int], n)
	for i := range caches {
		caches[i] = NewLRU[int](cfg.CacheKeys)
	}
	free := make([]time.Duration, n*w) // when each worker of each replica is next free
	served := make([]int64, n)
	busy := make([]time.Duration, n)
	lat := make([]time.Duration, 0, cfg.Requests-cfg.Warmup)
	var res SkewResult
	var hits int
	var now, from time.Duration
	next := cfg.RebalanceEvery
	for i := range cfg.Requests {
		now += time.Duration(arrivals.ExpFloat64() / cfg.Rate * float64(time.Second))
		for cfg.RebalanceEvery > 0 && now >= next {
			res.PartitionsMoved += p.Rebalance(next)
			next += cfg.RebalanceEvery
		}
		key := cfg.Zipf.Draw(keys)
		r := pickLessQueued(p.Candidates(key, now), free, w, now, picks)
		hit := caches[r].Touch(key)
		s := cfg.Miss
		if hit {
			s = cfg.Hit
		}
		// FIFO over w workers: the read starts when the first of them is
		// free.
		ws := free[r*w : r*w+w]
		first := 0
		for j := 1; j < w; j++ {
			if ws[j] < ws[first] {
				first = j
			}
		}
		end := max(now, ws[first]) + s
		ws[first] = end
		p.Served(key, r, now)
		if i < cfg.Warmup {
			continue
		}
		if i == cfg.Warmup {
			from = now
		}
		lat = append(lat, end-now)
		served[r]++
		busy[r] += s
		if hit {
			hits++
		}
	}
	res.Requests = len(lat)
	res.HitRatio = float64(hits) / float64(res.Requests)
	res.Served = served
	res.LoadMaxOverMean = maxOverMean(served)
	res.BusyMaxOverMean = maxOverMean(busy)
	if span := now - from; span > 0 {
		var total, top time.Duration
		for _, b := range busy {
			total += b
			top = max(top, b)
		}
		res.Utilization = float64(total) / float64(n) / float64(w) / float64(span)
		res.MaxUtilization = float64(top) / float64(w) / float64(span)
	}
	slices.Sort(lat)
	res.P50, res.P99, res.P999 = rankOf(lat, 0.5), rankOf(lat, 0.99), rankOf(lat, 0.999)
	return res, nil
}

// pickLessQueued returns the candidate with less work queued (the sum of
// its workers' remaining busy time at now) of two drawn at random, or the
// only one.
func pickLessQueued(cands []int, free []time.Duration, w int, now time.Duration, rng *rand.Rand) int {
	if len(cands) == 1 {
		return cands[0]
	}
	a := rng.IntN(len(cands))
	b := rng.IntN(len(cands) - 1)
	if b >= a {
		b++
	}
	ra, rb := cands[a], cands[b]
	if queued(free[rb*w:rb*w+w], now) < queued(free[ra*w:ra*w+w], now) {
		return rb
	}
	return ra
}

func queued(ws []time.Duration, now time.Duration) time.Duration {
	var q time.Duration
	for _, f := range ws {
		q += max(f-now, 0)
	}
	return q
}

// maxOverMean is the largest of x over their mean, 0 when they sum to 0.
func maxOverMean[T int64 | time.Duration](x []T) float64 {
	var sum, top T
	for _, v := range x {
		sum += v
		top = max(top, v)
	}
	if sum == 0 {
		return 0
	}
	return float64(top) * float64(len(x)) / float64(sum)
}

// rankOf is the nearest-rank q-quantile of sorted x.
func rankOf(x []time.Duration, q float64) time.Duration {
	if len(x) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(x)))) - 1
	return x[min(max(i, 0), len(x)-1)]
}
