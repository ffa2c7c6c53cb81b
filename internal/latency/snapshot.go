package latency

import (
	"math"
	"time"
)

// Snapshot is a plain copy of a histogram's contents. It is not synchronised:
// share it freely for reading, but Merge into it from one goroutine only, and
// not while others read it.
//
// The zero Snapshot is empty and ready for Merge.
type Snapshot struct {
	counts [numBuckets]uint64
	count  uint64 // always the sum of counts, so quantile ranks never overrun
	sum    int64
	min    int64 // exact; meaningful only when count > 0
	max    int64
}

// Count returns the number of samples.
func (s *Snapshot) Count() uint64 { return s.count }

// Sum returns the total of all samples. It wraps around after about 292 years
// of accumulated latency.
func (s *Snapshot) Sum() time.Duration { return time.Duration(s.sum) }

// Min returns the exact smallest sample, or 0 if the snapshot is empty.
func (s *Snapshot) Min() time.Duration { return time.Duration(s.min) }

// Max returns the exact largest sample, or 0 if the snapshot is empty.
func (s *Snapshot) Max() time.Duration { return time.Duration(s.max) }

// Mean returns the arithmetic mean (truncated to the nanosecond), or 0 if the
// snapshot is empty.
func (s *Snapshot) Mean() time.Duration {
	if s.count == 0 {
		return 0
	}
	return time.Duration(s.sum / int64(s.count))
}

// Quantile returns the q-quantile by the nearest-rank definition: the sample
// of rank ceil(q*Count) (1-based) in sorted order, estimated as the midpoint
// of its bucket and clamped into [Min, Max] (ranks 1 and Count return Min and
// Max themselves, exactly). For samples up to MaxBounded the
// result is within RelativeError of the exact value.
//
// q <= 0 (or NaN) returns Min, q >= 1 returns Max, and an empty snapshot
// returns 0. Each call walks the buckets once; it does not allocate.
func (s *Snapshot) Quantile(q float64) time.Duration {
	switch {
	case s.count == 0:
		return 0
	case !(q > 0):
		return s.Min()
	case q >= 1:
		return s.Max()
	}
	rank := uint64(math.Ceil(q * float64(s.count)))
	switch {
	case rank <= 1: // also guards against float rounding at the ends
		return s.Min() // the smallest and largest samples are known exactly
	case rank >= s.count:
		return s.Max()
	}
	var seen uint64
	for i, c := range s.counts {
		seen += c
		if seen < rank {
			continue
		}
		if i == overflowIndex {
			// The overflow bucket has no useful midpoint; Max is the only
			// exact value known inside it.
			return s.Max()
		}
		return time.Duration(min(max(bucketValue(i), s.min), s.max))
	}
	return s.Max() // unreachable: count is the sum of counts
}

// Merge adds o's samples into s, as if they had been recorded into s. A nil o
// is a no-op.
func (s *Snapshot) Merge(o *Snapshot) {
	if o == nil || o.count == 0 {
		return
	}
	if s.count == 0 {
		s.min, s.max = o.min, o.max
	} else {
		s.min, s.max = min(s.min, o.min), max(s.max, o.max)
	}
	for i, c := range o.counts {
		s.counts[i] += c
	}
	s.count += o.count
	s.sum += o.sum
}

// finish completes a snapshot whose counts and sum are filled in, given the
// number of samples they count and the raw minimum (as ^min, 0 for none) and
// maximum read after them.
func (s *Snapshot) finish(n, minInv uint64, mx int64) {
	s.count = n
	if n == 0 {
		// Keep empty snapshots canonical even if a Record is half done.
		s.sum, s.min, s.max = 0, 0, 0
		return
	}
	s.min = 0
	if minInv != 0 { // zero only if racing Reset
		s.min = int64(^minInv)
	}
	s.max = mx
}

// Buckets calls fn for every non-empty bucket in ascending order with the
// bucket's half-open range [lower, upper) and its count, e.g. for CDF plots.
// The overflow bucket (samples above MaxBounded), if used, is reported last
// as [MaxBounded+1, Max+1).
func (s *Snapshot) Buckets(fn func(lower, upper time.Duration, count uint64)) {
	for i, c := range s.counts {
		if c == 0 {
			continue
		}
		lo, hi := bucketBounds(i)
		if i == overflowIndex && s.max < math.MaxInt64 {
			hi = max(s.max, lo) + 1
		}
		fn(time.Duration(lo), time.Duration(hi), c)
	}
}
