package sim

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sort"
	"time"
)

// subBits sets the histogram's resolution: 2^subBits buckets per power of
// two, so a bucket is at most 1/1024 (about 0.1%) of its values wide. Below
// 2^subBits ns every nanosecond has its own bucket.
const subBits = 10

// numBuckets covers every non-negative int64.
const numBuckets = (64 - subBits) << subBits

// sampleBlock is the number of draws per seeded block when building the
// empirical distribution; blocks are the unit of parallel work.
const sampleBlock = 1 << 14

// bucketOf returns the histogram bucket of v >= 0: log-linear, as in HDR
// histograms, so the relative width is bounded at every scale.
func bucketOf(v time.Duration) int {
	u := uint64(v)
	if u < 1<<subBits {
		return int(u)
	}
	shift := bits.Len64(u) - 1 - subBits
	return shift<<subBits + int(u>>shift)
}

// empirical is the single-attempt latency distribution F, estimated from M
// draws of the Latency func. It is a histogram rather than a sorted sample
// because binning is O(1) per draw while sorting millions of draws would
// cost more than drawing them. To keep atoms exact (a model that answers
// in exactly 1ms), each bucket keeps its smallest and largest draw and
// interpolates only between them: a bucket holding a single value is
// exact, and a quantile is never off by more than its bucket's width.
type empirical struct {
	m   int64         // draws
	b   []bucket      // by bucketOf
	max time.Duration // largest draw
}

// bucket is one histogram bucket, its fields side by side because every
// lookup reads all three: one cache miss rather than three.
type bucket struct {
	cum    int64         // draws in this bucket and all below it
	lo, hi time.Duration // smallest and largest draw in this bucket
}

// histogram accumulates one worker's draws.
type histogram struct {
	count  []int64
	lo, hi []time.Duration
}

func newHistogram() *histogram {
	h := &histogram{
		count: make([]int64, numBuckets),
		lo:    make([]time.Duration, numBuckets),
		hi:    make([]time.Duration, numBuckets),
	}
	for i := range h.lo {
		h.lo[i] = math.MaxInt64
	}
	return h
}

func (h *histogram) add(v time.Duration) {
	j := bucketOf(v)
	h.count[j]++
	h.lo[j] = min(h.lo[j], v)
	h.hi[j] = max(h.hi[j], v)
}

// buildEmpirical draws m latencies in blocks seeded from (seed, block), so
// the histogram, and everything derived from it, does not depend on how
// many workers drew them: counts add and extremes take min and max, both
// independent of order.
func buildEmpirical(lat Latency, m int, seed uint64, workers int) *empirical {
	blocks := (m + sampleBlock - 1) / sampleBlock
	workers = max(1, min(workers, blocks))
	hs := make([]*histogram, workers)
	srcs := make([]*rand.PCG, workers)
	rngs := make([]*rand.Rand, workers)
	parallel(workers, blocks, 1, func(w, lo, hi int) {
		h := hs[w]
		if h == nil {
			h = newHistogram()
			hs[w] = h
			srcs[w] = rand.NewPCG(0, 0)
			rngs[w] = rand.New(srcs[w])
		}
		src, rng := srcs[w], rngs[w]
		for b := lo; b < hi; b++ {
			src.Seed(streamSeed(seed, saltSample, uint64(b)))
			n := min(sampleBlock, m-b*sampleBlock)
			for range n {
				h.add(draw(lat, rng))
			}
		}
	})
	e := &empirical{m: int64(m), b: make([]bucket, numBuckets)}
	var total int64
	for j := range numBuckets {
		lo, hi, c := time.Duration(math.MaxInt64), time.Duration(0), int64(0)
		for _, h := range hs {
			if h == nil || h.count[j] == 0 {
				continue
			}
			c += h.count[j]
			lo, hi = min(lo, h.lo[j]), max(hi, h.hi[j])
		}
		total += c
		e.b[j] = bucket{cum: total, lo: lo, hi: hi}
		if c > 0 {
			e.max = hi
		}
	}
	return e
}

// count returns the draws in bucket j.
func (e *empirical) count(j int) int64 {
	if j == 0 {
		return e.b[0].cum
	}
	return e.b[j].cum - e.b[j-1].cum
}

// quantile returns F⁻¹(u): the value of rank ceil(u·M) among the draws.
// Within a bucket the ranks are spread linearly between the bucket's
// smallest and largest draw.
func (e *empirical) quantile(u float64) time.Duration {
	r := int64(math.Ceil(u * float64(e.m)))
	r = min(max(r, 1), e.m)
	j := sort.Search(len(e.b), func(j int) bool { return e.b[j].cum >= r })
	c := e.count(j)
	lo, hi := e.b[j].lo, e.b[j].hi
	if c == 1 || lo == hi {
		return lo
	}
	t := r - (e.b[j].cum - c) // 1..c
	return lo + time.Duration(float64(hi-lo)*float64(t-1)/float64(c-1))
}

// cdf returns F(x), the share of draws <= x, with the same within-bucket
// interpolation as quantile so that the two are (near) inverses.
func (e *empirical) cdf(x time.Duration) float64 {
	if x < 0 {
		return 0
	}
	if x >= e.max {
		return 1
	}
	j := bucketOf(x)
	c := e.count(j)
	b := e.b[j]
	below := b.cum - c
	var n float64
	switch {
	case c == 0 || x < b.lo:
		n = float64(below)
	case x >= b.hi:
		n = float64(b.cum)
	default: // lo <= x < hi, so c >= 2
		n = float64(below) + 1 + float64(c-1)*float64(x-b.lo)/float64(b.hi-b.lo)
	}
	return n / float64(e.m)
}

// hedgedCDF returns G(x) for a shard hedged after d: the first attempt has
// not answered by x, and neither has the hedge (sent at d, if the first had
// not answered by then): G(x) = 1 − (1 − F(x))·(1 − F(x − d)) for x >= d,
// F(x) below d.
func (e *empirical) hedgedCDF(x, d time.Duration) float64 {
	if x < d {
		return e.cdf(x)
	}
	return 1 - (1-e.cdf(x))*(1-e.cdf(x-d))
}

// hedgedQuantile returns G⁻¹(v) for v above F(d): the smallest x >= d with
// G(x) >= v, by bisection over whole nanoseconds. G has no closed-form
// inverse because F is only known as a histogram, but each evaluation is
// O(1), so the ~36 steps for values up to a minute are cheap.
func (e *empirical) hedgedQuantile(d time.Duration, v float64) time.Duration {
	lo := d
	if e.hedgedCDF(lo, d) >= v {
		return lo
	}
	hi := max(d, e.max)
	if e.hedgedCDF(hi, d) < v { // only by rounding: G(max) = 1
		return hi
	}
	for hi-lo > 1 { // G(lo) < v <= G(hi)
		mid := lo + (hi-lo)/2
		if e.hedgedCDF(mid, d) >= v {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
