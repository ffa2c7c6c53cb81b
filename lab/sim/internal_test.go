package sim

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The k-th smallest of n uniforms is Beta(k, n−k+1): mean k/(n+1).
func TestOrderStatMoments(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const draws = 40_000
	for _, c := range [][2]int{{1, 1}, {1, 10}, {10, 10}, {3, 7}, {5, 9}, {950, 1000}, {1, 2000}, {2000, 2000}} {
		k, n := c[0], c[1]
		sum, sq := 0.0, 0.0
		for range draws {
			u := orderStat(rng, k, n)
			if u < 0 || u > 1 {
				t.Fatalf("Beta(%d,%d) draw %v outside [0, 1]", k, n-k+1, u)
			}
			sum += u
			sq += u * u
		}
		a, b := float64(k), float64(n-k+1)
		mean, variance := a/(a+b), a*b/((a+b)*(a+b)*(a+b+1))
		if se := math.Sqrt(variance / draws); math.Abs(sum/draws-mean) > 5*se {
			t.Errorf("Beta(%v,%v): mean %v, want %v ± %v", a, b, sum/draws, mean, 5*se)
		}
		if v := sq/draws - (sum/draws)*(sum/draws); math.Abs(v-variance) > 0.05*variance {
			t.Errorf("Beta(%v,%v): variance %v, want %v", a, b, v, variance)
		}
	}
}

func TestGammaMoments(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const draws = 40_000
	for _, a := range []int{1, 4, 5, 30, 1000} {
		sum, sq := 0.0, 0.0
		for range draws {
			x := gammaInt(rng, a)
			sum += x
			sq += x * x
		}
		mean, v := sum/draws, sq/draws-(sum/draws)*(sum/draws)
		if se := math.Sqrt(float64(a) / draws); math.Abs(mean-float64(a)) > 5*se {
			t.Errorf("Gamma(%d): mean %v", a, mean)
		}
		if math.Abs(v-float64(a)) > 0.05*float64(a) {
			t.Errorf("Gamma(%d): variance %v", a, v)
		}
	}
}

// Knuth's recursion draws Binomial(n, p) exactly: its mean and variance,
// and its whole distribution for a small case.
func TestBinomial(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const draws = 40_000
	for _, c := range []struct {
		n int
		p float64
	}{{10, 0.3}, {60, 0.95}, {2000, 0.01}, {2000, 0.5}, {100_000, 0.999}} {
		sum, sq := 0.0, 0.0
		for range draws {
			k := binomial(rng, c.n, c.p)
			if k < 0 || k > c.n {
				t.Fatalf("Binomial(%d, %v) = %d", c.n, c.p, k)
			}
			sum += float64(k)
			sq += float64(k) * float64(k)
		}
		mean, variance := float64(c.n)*c.p, float64(c.n)*c.p*(1-c.p)
		if se := math.Sqrt(variance / draws); math.Abs(sum/draws-mean) > 5*se {
			t.Errorf("Binomial(%d, %v): mean %v, want %v", c.n, c.p, sum/draws, mean)
		}
		if v := sq/draws - (sum/draws)*(sum/draws); math.Abs(v-variance) > 0.05*variance {
			t.Errorf("Binomial(%d, %v): variance %v, want %v", c.n, c.p, v, variance)
		}
	}
	// The distribution of Binomial(40, 0.2) against its PMF (chi-square).
	const n, p = 40, 0.2
	counts := make([]float64, n+1)
	for range draws {
		counts[binomial(rng, n, p)]++
	}
	chi, cells := 0.0, 0
	for k := range counts {
		e := draws * binomialPMF(n, k, p)
		if e < 5 {
			continue
		}
		chi += (counts[k] - e) * (counts[k] - e) / e
		cells++
	}
	if chi > 2*float64(cells)+20 { // far beyond any plausible chi-square
		t.Errorf("Binomial(40, 0.2): chi-square %.1f over %d cells", chi, cells)
	}
	if binomial(rng, 5, 0) != 0 || binomial(rng, 5, 1) != 5 || binomial(rng, 0, 0.5) != 0 {
		t.Error("degenerate binomials")
	}
}

func TestKthSmallest(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		n := 1 + rng.IntN(40)
		a := make([]time.Duration, n)
		spread := 1 + rng.IntN(5) // few distinct values: many ties
		for i := range a {
			a[i] = time.Duration(rng.IntN(spread * 3))
		}
		switch rng.IntN(4) {
		case 0:
			slices.Sort(a)
		case 1:
			slices.Sort(a)
			slices.Reverse(a)
		}
		sorted := slices.Sorted(slices.Values(a))
		k := 1 + rng.IntN(n)
		if got := kthSmallest(slices.Clone(a), k); got != sorted[k-1] {
			t.Fatalf("kthSmallest(%v, %d) = %v, want %v", a, k, got, sorted[k-1])
		}
	}
}

// Buckets are monotone, contiguous and at most 1/1024 of their values
// wide.
func TestBuckets(t *testing.T) {
	prev := -1
	for _, v := range []time.Duration{0, 1, 1023, 1024, 1025, 2047, 2048, time.Millisecond, 1 << 20, time.Second, time.Hour, math.MaxInt64} {
		j := bucketOf(v)
		if j < prev || j >= numBuckets {
			t.Errorf("bucketOf(%d) = %d after %d", v, j, prev)
		}
		prev = j
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 10_000 {
		v := time.Duration(rng.Int64N(math.MaxInt64>>rng.IntN(60)) + 1)
		j := bucketOf(v)
		lo, width := v, time.Duration(1)
		if v >= 1<<subBits {
			shift := bits.Len64(uint64(v)) - 1 - subBits
			lo, width = v>>shift<<shift, 1<<shift
		}
		if bucketOf(lo) != j || bucketOf(lo-1) != j-1 || bucketOf(lo+width-1) != j {
			t.Fatalf("bucket %d of %d: [%d, %d) not contiguous", j, v, lo, lo+width)
		}
		if lo+width > 0 && bucketOf(lo+width) != j+1 {
			t.Fatalf("bucket after %d of %d is %d", j, v, bucketOf(lo+width))
		}
		if v >= 1<<subBits && width > lo>>subBits {
			t.Fatalf("bucket of %d: width %d over %d", v, width, lo)
		}
	}
}

// The empirical distribution keeps atoms exact and inverts consistently.
func TestEmpirical(t *testing.T) {
	lat := bimodal(time.Millisecond, 100*time.Millisecond, 0.25)
	e := buildEmpirical(lat, 100_000, 1, 3)
	fd := e.cdf(time.Millisecond)
	if math.Abs(fd-0.75) > 0.01 || e.cdf(99*time.Millisecond) != fd || e.cdf(-1) != 0 || e.cdf(time.Second) != 1 {
		t.Errorf("cdf: F(1ms) = %v", fd)
	}
	if q := e.quantile(0.5); q != time.Millisecond {
		t.Errorf("median %v", q)
	}
	if q := e.quantile(0.9); q != 100*time.Millisecond {
		t.Errorf("p90 %v", q)
	}
	if e.quantile(0) != time.Millisecond || e.quantile(1) != 100*time.Millisecond {
		t.Error("quantile extremes")
	}
	// Hedged after 10ms: a shard is slow only if both attempts are, so
	// G(x) = 1 − 0.25² from 10ms+1ms on, and the slow atom sits at 100ms.
	d := 10 * time.Millisecond
	if g := e.hedgedCDF(11*time.Millisecond, d); math.Abs(g-(1-(1-fd)*(1-fd))) > 1e-12 {
		t.Errorf("G(11ms) = %v", g)
	}
	if x := e.hedgedQuantile(d, fd+1e-9); x != 11*time.Millisecond {
		t.Errorf("G⁻¹ just above F(d) = %v, want 11ms", x)
	}
	if x := e.hedgedQuantile(d, 1); x != 100*time.Millisecond {
		t.Errorf("G⁻¹(1) = %v, want 100ms", x)
	}
	if x := e.hedgedQuantile(d, 0.5); x != d {
		t.Errorf("G⁻¹(0.5) = %v, want d", x)
	}

	// A continuous distribution: the empirical quantiles are close to the
	// true ones, and cdf inverts quantile.
	const p50, sigma = time.Millisecond, 1.0
	e = buildEmpirical(lognormal(p50, sigma), 1<<20, 2, 2)
	for _, u := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
		x := e.quantile(u)
		if f := lognormalCDF(p50, sigma, x); math.Abs(f-u) > 5*math.Sqrt(u*(1-u)/(1<<20))+1e-3*(1-u) {
			t.Errorf("quantile(%v) = %v, true F there %v", u, x, f)
		}
		if f := e.cdf(x); math.Abs(f-u) > 2.0/(1<<20) {
			t.Errorf("cdf(quantile(%v)) = %v", u, f)
		}
	}
}

func TestSatAddAndScale(t *testing.T) {
	if satAdd(math.MaxInt64-5, 10) != math.MaxInt64 || satAdd(1, 2) != 3 {
		t.Error("satAdd")
	}
	if scale(10, 1) != 10 || scale(10, 2.5) != 25 || scale(math.MaxInt64, 2) != math.MaxInt64 {
		t.Error("scale")
	}
}
