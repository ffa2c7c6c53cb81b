package skew

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/sim"
)

// keyName names the key of popularity rank r (0 the most popular) under
// seed: a hash of both (load.PointSeed, a bijection of r for a seed), so
// that where hashing places the hottest keys (which replica, which
// partition) follows the seed, as it would follow the names of a real
// tier's keys.
func keyName(seed uint64, r int) string {
	return "k" + strconv.FormatUint(load.PointSeed(seed, r), 36)
}

// drawKeys draws the popularity ranks of n reads from z with seed: the
// same reads for every policy of a run.
func drawKeys(z *sim.Zipf, n int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 0x736b65772d6b6579))
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = z.Draw(rng)
	}
	return ranks
}

// Keys returns the keys of n reads under seed, as every run of the skew
// experiment reads them: popularity ranks drawn from a Zipf over keys with
// exponent, named by keyName. bench/skew reads the same keys.
func Keys(keys int, exponent float64, n int, seed uint64) ([]string, error) {
	z, err := sim.NewZipf(keys, exponent)
	if err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i, r := range drawKeys(z, n, load.PointSeed(seed, 1)) {
		names[i] = keyName(seed, r)
	}
	return names, nil
}

// Arrivals returns the open-loop schedule of a run at rate for d under
// seed (Poisson arrivals, load.Generate's), and how many reads arrive.
func Arrivals(rate float64, d time.Duration, seed uint64) load.Config {
	c := load.Config{Rate: rate, Seed: load.PointSeed(seed, 0)}
	c.Requests = load.PoissonArrivals(c, d)
	return c
}

// WarmupSends reports whether read i, due at since the run started, is
// sent: the first half of a warm-up ramps the offered rate up from a
// quarter to the full rate by thinning the arrivals (a hash of seed and i
// against the share of the rate due at), so that cold caches, which miss
// every read, leave no backlog for the measurement to drain.
func WarmupSends(seed uint64, i int, at, warmup time.Duration) bool {
	ramp := warmup / 2
	return at >= ramp || float64(load.PointSeed(seed, i)>>11)/(1<<53) < 0.25+0.75*float64(at)/float64(ramp)
}
