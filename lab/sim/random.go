package sim

import (
	"math"
	"math/rand/v2"
)

// Salts separate the random streams of a run, so that the draws that build
// the empirical distribution never share a stream with a request's draws.
const (
	saltSample  = 0x6c8e9cf570932bd5
	saltRequest = 0x2545f4914f6cdd1d
)

// splitmix64 is the SplitMix64 finaliser: a bijective hash whose outputs for
// neighbouring inputs look unrelated, so that request i and request i+1 get
// unrelated PCG streams rather than two states one step apart.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// streamSeed returns the PCG seed of stream i under salt. Deriving every
// stream from (Seed, salt, index) alone, never from the worker that happens
// to run it, is what makes results independent of Workers.
func streamSeed(seed, salt, i uint64) (uint64, uint64) {
	a := splitmix64(splitmix64(seed^salt) + i)
	return a, splitmix64(a ^ salt)
}

// gammaInt draws a Gamma(a, 1) variate for an integer shape a >= 1. Small
// shapes are a sum of exponentials (exact and cheap); larger ones use
// Marsaglia and Tsang's squeeze method, whose cost does not grow with a.
func gammaInt(rng *rand.Rand, a int) float64 {
	if a <= 4 {
		s := 0.0
		for range a {
			s += rng.ExpFloat64()
		}
		return s
	}
	d := float64(a) - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		x2 := x * x
		if u < 1-0.0331*x2*x2 || math.Log(u) < 0.5*x2+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// orderStat draws the k-th smallest of n independent uniforms on [0, 1),
// which is Beta(k, n-k+1) distributed (1 <= k <= n). The extremes have
// closed forms that are both cheaper and more precise near 0 and 1 than
// the ratio of Gammas used in between.
func orderStat(rng *rand.Rand, k, n int) float64 {
	switch {
	case n == 1:
		return rng.Float64()
	case k == n: // the maximum: P(max <= u) = u^n
		return math.Exp(-rng.ExpFloat64() / float64(n))
	case k == 1: // the minimum: P(min > u) = (1-u)^n
		return -math.Expm1(-rng.ExpFloat64() / float64(n))
	}
	x := gammaInt(rng, k)
	y := gammaInt(rng, n-k+1)
	return x / (x + y)
}

// binomial draws a Binomial(n, p) variate exactly. Large n use Knuth's
// recursion through a Beta-distributed order statistic (TAOCP 3.4.1F),
// which halves n at each step, so a draw costs O(log n) Gamma draws
// rather than n uniforms and needs no normal approximation.
func binomial(rng *rand.Rand, n int, p float64) int {
	if p <= 0 || n <= 0 {
		return 0
	}
	if p >= 1 {
		return n
	}
	k := 0
	for n > 16 {
		a := 1 + n/2
		// x is the a-th smallest of n uniforms: the a-1 below it are
		// uniform on [0, x), the n-a above it uniform on (x, 1).
		x := orderStat(rng, a, n)
		if x >= p {
			n, p = a-1, p/x
		} else {
			k += a
			n, p = n-a, (p-x)/(1-x)
		}
	}
	for range n {
		if rng.Float64() < p {
			k++
		}
	}
	return k
}
