package report

import (
	"math"
	"slices"
)

// DefaultCDFPoints is the number of points CDF keeps when maxPoints is not
// positive: enough for a smooth curve at full page width and for hovering
// down to p99.9 of a large run, few enough to keep a page with many CDFs
// small.
const DefaultCDFPoints = 500

// CDF turns latencies (in ms) into a step CDF series: X = latency, Y =
// fraction of samples <= X, downsampled to at most maxPoints points (keep
// the first and last, and the tail detail: use quantile-spaced points with
// extra density above p90), ready for a LogX plot.
//
// Each point lies on the empirical CDF: X is a sample and Y the exact
// fraction of samples at or below it, so X and Y both increase, the first
// point is the fastest sample and the last is the slowest with Y = 1. NaN
// and infinite samples are ignored (Y counts finite samples only); zero and
// negative ones are kept, and a LogX plot leaves them out with a footnote.
//
// When there are more distinct values than maxPoints, the points kept are
// the maximum and the minimum, the nearest-rank p50, p99, p90 and p99.9 (in
// that order when maxPoints is smaller than six), and quantile-spaced points:
// three fifths above p90, geometrically spaced in the number of slower
// samples (as many from p90 to p99 as from p99 to p99.9) but at least one
// sample apart, and the rest evenly over p0–p90. The tail gets most of the
// points because it is where hedging acts, and an even spread would leave
// p99–p100 with a handful. maxPoints <= 0 means DefaultCDFPoints.
func CDF(name string, latenciesMs []float64, maxPoints int) Series {
	return cdf(name, latenciesMs, false, 0, maxPoints)
}

// CDFOutOf is CDF for a run of total requests of which only some have a
// latency, the others having failed, timed out or never been sent: Y is
// the fraction of all total requests answered at or below X, so the curve
// tops out at the share answered, and the gap above it is the requests
// that never got a good answer (on a CDF that rose to 1, failures would
// disappear, and a run where slow reads time out would look fast).
//
// A +Inf sample is such a request and counts towards total; NaN and -Inf
// samples are ignored. total is raised to the number of other samples if it
// is smaller, so total 0 counts the samples. The points kept are those CDF
// keeps for the finite samples, with Y scaled.
func CDFOutOf(name string, latenciesMs []float64, total, maxPoints int) Series {
	return cdf(name, latenciesMs, true, total, maxPoints)
}

// cdf implements CDF and, with outOf, CDFOutOf.
func cdf(name string, latenciesMs []float64, outOf bool, total, maxPoints int) Series {
	s := Series{Name: name}
	xs := make([]float64, 0, len(latenciesMs))
	unanswered := 0
	for _, v := range latenciesMs {
		if finite(v) {
			xs = append(xs, v)
		} else if math.IsInf(v, 1) {
			unanswered++
		}
	}
	n := len(xs)
	if n == 0 {
		return s
	}
	denom := float64(n)
	if outOf {
		denom = float64(max(total, n+unanswered))
	}
	slices.Sort(xs)
	// Distinct values and how many samples are at or below each, so that
	// ties make one point at the top of their step.
	vals, cum := make([]float64, 0, n), make([]int, 0, n)
	for i, v := range xs {
		if i+1 < n && xs[i+1] == v {
			continue
		}
		vals, cum = append(vals, v), append(cum, i+1)
	}
	if maxPoints <= 0 {
		maxPoints = DefaultCDFPoints
	}
	point := func(j int) Point { return Point{X: vals[j], Y: float64(cum[j]) / denom} }
	if len(vals) <= maxPoints {
		s.Points = make([]Point, len(vals))
		for j := range vals {
			s.Points[j] = point(j)
		}
		return s
	}

	chosen := pickRanks(n, maxPoints, func(rank int) int {
		j, _ := slices.BinarySearch(cum, rank)
		return j
	}, len(vals))
	s.Points = make([]Point, 0, maxPoints)
	for j, c := range chosen {
		if c {
			s.Points = append(s.Points, point(j))
		}
	}
	return s
}

// rankOf returns the nearest rank (1-based) of quantile q of n samples: the
// smallest rank with at least a fraction q of the samples at or below it.
func rankOf(q float64, n int) int {
	return min(max(int(math.Ceil(q*float64(n)-1e-9)), 1), n)
}

// pickRanks chooses up to maxPoints of the distinct values of n sorted
// samples, returned as a mask over the distinct values; value(rank) gives
// the distinct value a sample rank falls on. It first keeps the maximum, the
// minimum and p50, p99, p90, p99.9, in that order, and fills the rest of the
// budget with ranks spread over the body and the tail (see CDF). Ties can map
// several ranks to one value, so the budget is raised until it is used.
func pickRanks(n, maxPoints int, value func(rank int) int, distinct int) []bool {
	keys := []int{n, 1}
	for _, q := range []float64{0.5, 0.99, 0.9, 0.999} {
		keys = append(keys, rankOf(q, n))
	}
	sel := func(extra int) ([]bool, int) {
		chosen, kept := make([]bool, distinct), 0
		add := func(rank int) {
			if j := value(rank); !chosen[j] && kept < maxPoints {
				chosen[j] = true
				kept++
			}
		}
		for _, r := range keys {
			add(r)
		}
		for _, r := range spread(n, extra) {
			add(r)
		}
		return chosen, kept
	}
	extra := maxPoints - len(keys)
	best, kept := sel(extra)
	// Each round asks for as many more ranks as the last one fell short;
	// rounds are few as only collisions with keys and ties cost points.
	for round := 0; round < 16 && kept < maxPoints && extra > 0; round++ {
		extra += maxPoints - kept
		c, k := sel(extra)
		if k <= kept {
			break
		}
		best, kept = c, k
	}
	return best
}

// spread returns about budget sample ranks: three fifths in the tail above
// p90, geometrically spaced in the number of slower samples (as many from
// p90 to p99 as from p99 to p99.9) but at least one rank apart, and the rest
// evenly over the body below p90. The tail list comes first so that a
// truncated selection loses body detail rather than tail detail.
func spread(n, budget int) []int {
	if budget <= 0 {
		return nil
	}
	r90 := rankOf(0.9, n)
	above := n - r90 // samples slower than p90
	tail := min(budget*3/5, max(above-1, 0))
	ranks := make([]int, 0, budget)
	if tail > 0 {
		ranks = append(ranks, tailRanks(n, above, tail)...)
	}
	body := budget - len(ranks)
	for i := 1; i <= body; i++ {
		ranks = append(ranks, 1+int(math.Round(float64(r90-1)*float64(i)/float64(body+1))))
	}
	return ranks
}

// tailRanks returns at most want ranks among the above-1 ranks strictly
// between p90 and the maximum, where k = n - rank samples are slower: k
// falls by a factor r per step, or by one where that would repeat a rank.
// It searches for the smallest r that gives no more than want ranks.
func tailRanks(n, above, want int) []int {
	gen := func(r float64, out []int) []int {
		for k := above; ; {
			k = min(int(float64(k)/r), k-1)
			if k < 1 {
				return out
			}
			out = append(out, n-k)
		}
	}
	count := func(r float64) int {
		c := 0
		for k := above; ; c++ {
			if k = min(int(float64(k)/r), k-1); k < 1 {
				return c
			}
		}
	}
	if count(1) <= want {
		return gen(1, nil)
	}
	lo, hi := 0.0, math.Log(float64(above)+1) // in log r; count(e^hi) is 0
	for range 60 {
		mid := (lo + hi) / 2
		if count(math.Exp(mid)) > want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return gen(math.Exp(hi), make([]int, 0, want))
}
