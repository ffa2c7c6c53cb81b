package skew

import (
	"math/rand/v2"
	"strconv"

	"github.com/tailgate-dev/tailgate/internal/lab/load"
	"github.com/tailgate-dev/tailgate/internal/lab/sim"
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
