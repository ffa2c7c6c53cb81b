package load

import (
	"math"
	"testing"
)

func TestQuantileRanksCoverAtTheirLevel(t *testing.T) {
	for _, c := range []struct {
		n int
		q float64
	}{{300, 0.5}, {300, 0.9}, {300, 0.99}, {1000, 0.999}, {20, 0.5}, {5, 0.5}} {
		lo, hi := QuantileRanks(c.n, c.q, 0.01)
		cdf := binomialCDF(c.n, c.q)
		at := func(k int) float64 { // P(B <= k)
			if k < 0 {
				return 0
			}
			return cdf[min(k, c.n)]
		}
		// The interval [x(lo), x(hi)] misses the quantile when fewer than
		// lo or at least hi samples lie below it.
		miss := at(lo-1) + (1 - at(hi-1))
		if miss > 0.01+1e-9 {
			t.Errorf("n=%d q=%v: ranks %d..%d miss with probability %v", c.n, c.q, lo, hi, miss)
		}
		// And they are the tightest: one rank closer on either side
		// would miss more than alpha/2 on that side.
		if lo >= 0 && lo < c.n && at(lo) <= 0.005 {
			t.Errorf("n=%d q=%v: lo %d could be %d", c.n, c.q, lo, lo+1)
		}
		if hi <= c.n && hi > 1 && 1-at(hi-2) <= 0.005 {
			t.Errorf("n=%d q=%v: hi %d could be %d", c.n, c.q, hi, hi-1)
		}
	}
	// 300 samples cannot bound a p99 from above at 99%.
	if _, hi := QuantileRanks(300, 0.99, 0.01); hi != 301 {
		t.Errorf("p99 of 300: hi %d, want unbounded", hi)
	}
	// Nor 5 samples a median from either side.
	if lo, hi := QuantileRanks(5, 0.5, 0.01); lo != 0 || hi != 6 {
		t.Errorf("median of 5: %d..%d, want unbounded both ways", lo, hi)
	}
}

// QuantileCI reads the ranks off the sorted sample: a side it cannot
// bound is NaN, a failure at the top bound is +Inf.
func TestQuantileCI(t *testing.T) {
	x := make([]float64, 2000)
	for i := range x {
		x[i] = float64(i + 1)
	}
	lo, hi := QuantileCI(x, 0.99, 0.05)
	l, h := QuantileRanks(2000, 0.99, 0.05)
	if lo != float64(l) || hi != float64(h) || !(lo < 1980 && hi > 1980) {
		t.Errorf("p99 of 1..2000: [%v, %v] (ranks %d..%d)", lo, hi, l, h)
	}
	lo, hi = QuantileCI(x[:100], 0.99, 0.05)
	if !math.IsNaN(hi) || math.IsNaN(lo) {
		t.Errorf("p99 of 100: [%v, %v], want a lower bound alone", lo, hi)
	}
	for i := 1985; i < 2000; i++ {
		x[i] = math.Inf(1) // 15 failures: 0.75%, within the interval
	}
	if lo, hi := QuantileCI(x, 0.99, 0.05); !math.IsInf(hi, 1) || math.IsInf(lo, 0) {
		t.Errorf("p99 with 0.75%% failed: [%v, %v], want a finite low and +Inf", lo, hi)
	}
}
