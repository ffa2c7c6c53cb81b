package load

import "math"

// This file: distribution-free confidence intervals of quantiles, from
// the order statistics of a sample: how far a percentile measured on n
// reads can be from the true one.

// QuantileRanks returns the 1-based ranks lo and hi of a distribution-free
// confidence interval [x(lo), x(hi)] for the q-quantile of n samples, at
// level at least 1-alpha: the number of samples below the true quantile
// is Binomial(n, q), and each tail outside the ranks has at most alpha/2.
// lo < 1 or hi > n means that side is unbounded.
func QuantileRanks(n int, q, alpha float64) (lo, hi int) {
	cdf := binomialCDF(n, q)
	lo = 0 // largest k with P(B <= k-1) <= alpha/2
	for k := 1; k <= n; k++ {
		if cdf[k-1] > alpha/2 {
			break
		}
		lo = k
	}
	hi = n + 1 // smallest k with P(B >= k) <= alpha/2
	for k := n; k >= 1; k-- {
		if 1-cdf[k-1] > alpha/2 {
			break
		}
		hi = k
	}
	return lo, hi
}

// binomialCDF returns P(B <= k) for k = 0..n, B ~ Binomial(n, p).
func binomialCDF(n int, p float64) []float64 {
	cdf := make([]float64, n+1)
	lgn, _ := math.Lgamma(float64(n + 1))
	sum := 0.0
	for k := 0; k <= n; k++ {
		lk, _ := math.Lgamma(float64(k + 1))
		lnk, _ := math.Lgamma(float64(n - k + 1))
		sum += math.Exp(lgn - lk - lnk + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
		cdf[k] = min(sum, 1)
	}
	return cdf
}

// QuantileCI returns a confidence interval, at level at least 1-alpha,
// of the q-quantile of the sorted sample x (failures as +Inf at its end):
// lo and hi are sample values, NaN on a side the sample is too small to
// bound, and hi is +Inf when a failure bounds it.
func QuantileCI(x []float64, q, alpha float64) (lo, hi float64) {
	lo, hi = math.NaN(), math.NaN()
	l, h := QuantileRanks(len(x), q, alpha)
	if l >= 1 {
		lo = x[l-1]
	}
	if h <= len(x) {
		hi = x[h-1]
	}
	return lo, hi
}
