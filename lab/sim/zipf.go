package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// MaxZipfKeys bounds a Zipf's key space: its table holds 8 bytes a key.
const MaxZipfKeys = 50_000_000

// Zipf draws key ranks 0..n-1 with P(rank k) proportional to (k+1)^-s: the
// popularity of cache keys, web objects and words. Unlike math/rand/v2's
// Zipf it takes any exponent s >= 0 (s = 0 is uniform; YCSB's 0.99 and
// exponents below 1 are common), at the cost of a table of n cumulative
// probabilities; a draw is a binary search of it, exact up to float64
// rounding. A Zipf is immutable and safe for concurrent use; each caller
// brings its own rng.
type Zipf struct {
	s   float64
	cdf []float64 // cdf[k] = P(rank <= k); cdf[n-1] = 1
}

// NewZipf returns the Zipf distribution over n keys with exponent s.
func NewZipf(n int, s float64) (*Zipf, error) {
	if n < 1 || n > MaxZipfKeys {
		return nil, fmt.Errorf("%w: zipf keys %d outside [1, %d]", ErrInvalid, n, MaxZipfKeys)
	}
	if !(s >= 0 && s <= 10) {
		return nil, fmt.Errorf("%w: zipf exponent %v outside [0, 10]", ErrInvalid, s)
	}
	z := &Zipf{s: s, cdf: make([]float64, n)}
	// Summed from the smallest term up, so the tail's many small terms are
	// not lost against the head's large ones.
	total := 0.0
	for k := n - 1; k >= 0; k-- {
		total += math.Pow(float64(k+1), -s)
	}
	acc := 0.0
	for k := range n {
		acc += math.Pow(float64(k+1), -s)
		z.cdf[k] = acc / total
	}
	z.cdf[n-1] = 1
	return z, nil
}

// Keys is the size of the key space.
func (z *Zipf) Keys() int { return len(z.cdf) }

// Exponent is s.
func (z *Zipf) Exponent() float64 { return z.s }

// Prob is the probability of rank k (0 outside the key space).
func (z *Zipf) Prob(k int) float64 {
	switch {
	case k < 0 || k >= len(z.cdf):
		return 0
	case k == 0:
		return z.cdf[0]
	}
	return z.cdf[k] - z.cdf[k-1]
}

// Mass is the probability of the top k ranks together.
func (z *Zipf) Mass(k int) float64 {
	if k <= 0 {
		return 0
	}
	return z.cdf[min(k, len(z.cdf))-1]
}

// Draw draws a rank.
func (z *Zipf) Draw(rng *rand.Rand) int {
	u := rng.Float64()
	// The first rank whose cumulative probability exceeds u.
	k := sort.Search(len(z.cdf), func(i int) bool { return z.cdf[i] > u })
	return min(k, len(z.cdf)-1)
}

// LRUHitRatio estimates the hit ratio of an LRU cache of capacity keys
// under independent requests drawn from z, by Che's approximation (Che,
// Tung and Wang 2002; Fricker, Robert and Roberts 2012 show it is accurate
// for Zipf popularity): key k stays cached for a characteristic time T,
// the same for every key, that solves sum_k (1 - exp(-p_k T)) = capacity,
// and is hit with probability 1 - exp(-p_k T). The keys of a tier
// partitioned by key over N caches of C keys each are hit about as one LRU
// of N·C keys would hit them. The sums cost O(n) per step of a bisection
// over T: about 60·n operations.
func (z *Zipf) LRUHitRatio(capacity int) float64 {
	n := len(z.cdf)
	if capacity >= n {
		return 1
	}
	if capacity <= 0 {
		return 0
	}
	occupancy := func(t float64) float64 {
		s := 0.0
		for k := range n {
			s += -math.Expm1(-z.Prob(k) * t)
		}
		return s
	}
	lo, hi := 0.0, float64(capacity)
	for occupancy(hi) < float64(capacity) && hi < 1e300 {
		lo, hi = hi, hi*2
	}
	for range 60 {
		mid := (lo + hi) / 2
		if occupancy(mid) < float64(capacity) {
			lo = mid
		} else {
			hi = mid
		}
	}
	t, hit := (lo+hi)/2, 0.0
	for k := range n {
		p := z.Prob(k)
		hit += p * -math.Expm1(-p*t)
	}
	return hit
}
