package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// lognormal returns a leaf latency whose logarithm is normal with median
// p50 and standard deviation sigma.
func lognormal(p50 time.Duration, sigma float64) Latency {
	return func(rng *rand.Rand) time.Duration {
		return time.Duration(float64(p50) * math.Exp(sigma*rng.NormFloat64()))
	}
}

// lognormalCDF is the exact distribution function of lognormal(p50, sigma).
func lognormalCDF(p50 time.Duration, sigma float64, x time.Duration) float64 {
	if x <= 0 {
		return 0
	}
	z := math.Log(float64(x)/float64(p50)) / sigma
	return 0.5 * math.Erfc(-z/math.Sqrt2)
}

// bimodal answers in fast, except with probability p in slow: the model of
// the paper's arithmetic (a server slow 1% of the time).
func bimodal(fast, slow time.Duration, p float64) Latency {
	return func(rng *rand.Rand) time.Duration {
		if rng.Float64() < p {
			return slow
		}
		return fast
	}
}

// binomialPMF returns P(Binomial(n, p) = k), in log space for large n.
func binomialPMF(n, k int, p float64) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	if p == 0 {
		if k == 0 {
			return 1
		}
		return 0
	}
	if p == 1 {
		if k == n {
			return 1
		}
		return 0
	}
	return math.Exp(lg(n) - lg(k) - lg(n-k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
}

// relDiff returns |a−b|/b.
func relDiff(a, b time.Duration) float64 {
	return math.Abs(float64(a-b)) / float64(b)
}
