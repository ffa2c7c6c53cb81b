package latency

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Bucket layout (HDR-style log-linear). Every power of two [2^k, 2^(k+1)) with
// k >= subBits is split into subCount equal-width sub-buckets; values below
// subCount get one bucket each and are therefore exact. With shift =
// max(0, msb-subBits) the index is simply shift*subCount + v>>shift, which is
// continuous across powers of two and monotonic in v.
const (
	subBits  = 5
	subCount = 1 << subBits // 32 sub-buckets per power of two

	// boundedBits is the number of value bits with their own buckets: values
	// below 2^boundedBits (~18.3 minutes) are tracked within RelativeError.
	boundedBits = 40

	// numBounded is the number of regular buckets: the largest bounded value
	// 2^40-1 has shift 34 and maps to 34*32 + 63 = 1151.
	numBounded = (boundedBits-subBits)*subCount + subCount

	// overflowIndex is the single extra bucket for values > MaxBounded.
	overflowIndex = numBounded
	numBuckets    = numBounded + 1
)

// RelativeError bounds the relative error of every quantile reported for data
// whose values are at most MaxBounded: |reported - exact| <= RelativeError*exact.
//
// A bucket at or above 32 ns spans [lower, lower+w) with lower >= 32w, and its
// value is reported as the midpoint lower+w/2, which is at most w/2 <= lower/64
// away from any value in the bucket. Values below 64 ns are reported exactly.
const RelativeError = 1.0 / 64 // 1/(2*subCount); checked by TestBucketLayout

// MaxBounded is the largest duration that has its own bucket (2^40-1 ns,
// about 18.3 minutes). Larger durations are clamped into one overflow bucket:
// they still count towards Count, Sum, Mean and Max (which stays exact), but a
// quantile that falls among them is reported as Max, so RelativeError no
// longer applies to it.
const MaxBounded time.Duration = 1<<40 - 1 // 1<<boundedBits - 1

// bucketIndex maps a non-negative value in nanoseconds to its bucket.
func bucketIndex(v int64) int {
	u := uint64(v)
	if u > uint64(MaxBounded) {
		return overflowIndex
	}
	// OR-ing in subCount makes values below subCount behave like the first
	// power of two with sub-buckets (shift 0) without a branch.
	shift := bits.Len64(u|subCount) - subBits - 1
	return shift<<subBits + int(u>>uint(shift))
}

// bucketBounds returns the half-open range [lower, upper) of bucket i. The
// overflow bucket reports [MaxBounded+1, MaxInt64]; Snapshot.Buckets narrows it
// to the recorded Max.
func bucketBounds(i int) (lower, upper int64) {
	switch {
	case i >= overflowIndex:
		return int64(MaxBounded) + 1, math.MaxInt64
	case i < 2*subCount: // shift 0: one value per bucket
		return int64(i), int64(i) + 1
	}
	shift := uint(i>>subBits - 1)
	m := int64(i&(subCount-1) + subCount) // leading subBits+1 bits of the value
	return m << shift, (m + 1) << shift
}

// bucketValue is the value reported for bucket i: its midpoint.
func bucketValue(i int) int64 {
	lo, hi := bucketBounds(i)
	return lo + (hi-lo)/2
}

// Histogram is a cumulative, lock-free latency histogram. The zero value is
// ready to use, and a Histogram must not be copied after first use. All
// methods are safe for concurrent use.
//
// Record costs a few atomic operations and never allocates or blocks, so it is
// fit for request hot paths. Once a Histogram sees two cores record at the
// same moment, it spreads its counters over per-processor shards so that
// cores stop fighting over cache lines; see the package documentation for
// what that costs. Snapshot and Reset are not atomic with respect to
// concurrent Record calls; see their documentation.
type Histogram struct {
	// Sharding. The bucket counters and the sum live in numShards shards,
	// each on cache lines of its own. A Histogram starts unsharded: every
	// Record goes to shard 0 and costs what a plain histogram would. The
	// first time Record sees another core write the shard's sum between its
	// own read and write (a failed compare-and-swap, which only truly
	// concurrent recording produces), the Histogram switches for good to
	// sharded recording, where each Record adds into the shard of the
	// processor (P) it runs on.
	//
	// Why per-P and not a random shard per call: a core that writes a line
	// another core wrote last must fetch it from that core, however many
	// lines there are. With a random shard per call, the last writer of any
	// line is the other core about half the time, so random sharding barely
	// helps (measured on two cores, per sample: 66ns unsharded, 43ns with
	// four random shards, 7ns with one shard per core). Affinity is what
	// helps: each core writing its own lines. Go exposes no processor id,
	// but sync.Pool keeps a private slot per P, so a pool of shard tokens
	// hands every P the same token call after call. Taking and returning
	// the token adds about 6ns to a Record, which is why a Histogram only
	// pays it once it has seen contention.
	//
	// minInv holds ^uint64(min) so that tracking the minimum is a "keep the
	// largest" update like max, and its zero value (^MaxUint64, larger than
	// any int64) means "nothing recorded yet" without any initialisation.
	// Both, and the sharded flag, are read on every Record but rarely
	// written, so they sit on a line of their own that stays shared by all
	// cores.
	minInv  atomic.Uint64
	max     atomic.Int64
	sharded atomic.Bool // set once concurrent recording has been seen; never cleared
	_       [cacheLine - 20]byte

	shards [numShards]shard
}

const (
	// numShards is a power of two. Shards only help up to one per recording
	// core; four covers small machines fully and cuts contention on larger
	// ones, at 9 KiB per shard.
	numShards = 4
	// cacheLine is generous: 128 bytes also keeps x86's adjacent-line
	// prefetcher and 128-byte-line arm64 cores from coupling two shards.
	cacheLine = 128
)

// shard is one set of bucket counters with its own sum. The padding keeps the
// next shard off its cache lines.
type shard struct {
	counts [numBuckets]atomic.Uint64
	sum    atomic.Int64
	_      [cacheLine - 8]byte
}

// shardToken names the shard a P records into; see Histogram. The tokens are
// shared by all Histograms: a token means "this P uses shard i" everywhere.
type shardToken struct{ i int }

var (
	shardTokens = func() (t [numShards]shardToken) {
		for i := range t {
			t[i].i = i
		}
		return t
	}()
	// shardPool holds *shardToken values. Get on a P returns the token the
	// same P last Put, so a P keeps its shard. The pool is empty for a P
	// that has not recorded sharded yet or lost its token (to two garbage
	// collections, or at random under the race detector), and then
	// nextShard deals the tokens round robin.
	shardPool sync.Pool
	nextShard atomic.Uint32
)

func dealShardToken() *shardToken {
	return &shardTokens[nextShard.Add(1)&(numShards-1)]
}

// Record adds one sample. Negative durations are recorded as 0.
func (h *Histogram) Record(d time.Duration) {
	v := nonNegative(d)
	h.add(v, bucketIndex(v))
}

// add records v, already known to be non-negative and to map to bucket i.
//
// Order matters for Snapshot: min, max and sum are updated before the bucket
// count, and Snapshot reads the counts first, so every sample a snapshot
// counts is also reflected in its Min, Max and Sum.
func (h *Histogram) add(v int64, i int) {
	// Read before writing: once min and max have settled, the common case
	// is two plain loads and no contended write.
	if ^uint64(v) > h.minInv.Load() || v > h.max.Load() {
		h.updateMinMax(v)
	}
	if h.sharded.Load() {
		h.addSharded(v, i)
	} else {
		h.addUnsharded(v, i)
	}
}

// addUnsharded records into shard 0 and switches h to sharded recording if
// it sees another core do the same.
func (h *Histogram) addUnsharded(v int64, i int) {
	s := &h.shards[0]
	// A compare-and-swap costs what an add does, and its failure is the
	// cheapest sign of another core recording at the same moment.
	if old := s.sum.Load(); !s.sum.CompareAndSwap(old, old+v) {
		h.sharded.Store(true)
		s.sum.Add(v)
	}
	s.counts[i].Add(1)
}

func (h *Histogram) updateMinMax(v int64) {
	storeMaxUint64(&h.minInv, ^uint64(v))
	storeMaxInt64(&h.max, v)
}

// addSharded records into the calling P's shard.
func (h *Histogram) addSharded(v int64, i int) {
	t, _ := shardPool.Get().(*shardToken)
	if t == nil {
		t = dealShardToken()
	}
	s := &h.shards[t.i]
	if old := s.sum.Load(); !s.sum.CompareAndSwap(old, old+v) {
		// Another P shares this shard: move this P to the next one, as
		// Java's LongAdder rehashes a thread's probe on contention.
		s.sum.Add(v)
		t = &shardTokens[(t.i+1)&(numShards-1)]
	}
	s.counts[i].Add(1)
	shardPool.Put(t)
}

// Snapshot returns a point-in-time copy. Under concurrent Record calls the
// copy is not a single instant: each counter is read atomically, but samples
// recorded during the copy may be counted in some fields and not others. The
// copy never counts a sample without reflecting it in Min, Max and Sum.
func (h *Histogram) Snapshot() *Snapshot {
	s := new(Snapshot)
	h.load(s)
	return s
}

// load overwrites s with the current contents of h.
//
// All counts are read before any sum, and the sums before min and max, the
// reverse of the order add writes them in: whatever sample the counts
// include, the sum, min and max read afterwards include it too.
func (h *Histogram) load(s *Snapshot) {
	shards := h.shardsInUse()
	var n uint64
	first := &shards[0].counts
	for i := range first {
		c := first[i].Load()
		s.counts[i] = c
		n += c
	}
	for k := 1; k < len(shards); k++ {
		counts := &shards[k].counts
		for i := range counts {
			c := counts[i].Load()
			s.counts[i] += c
			n += c
		}
	}
	var sum int64
	for k := range shards {
		sum += shards[k].sum.Load()
	}
	s.sum = sum
	s.finish(n, h.minInv.Load(), h.max.Load())
}

// shardsInUse returns the shards Record may have written to: the first one
// until the Histogram switches to sharded recording. A sample recorded into
// another shard after the switch was also recorded after this call.
func (h *Histogram) shardsInUse() []shard {
	if h.sharded.Load() {
		return h.shards[:]
	}
	return h.shards[:1]
}

// accumulate adds h's bucket counts to counts and its sum to sum, and returns
// the number of samples and h's minimum (as ^min, 0 for none) and maximum,
// in the order load reads them. With drain it takes them out of h instead,
// atomically counter by counter, so that a sample recorded concurrently ends
// up either in the result or still in h, never in neither.
func (h *Histogram) accumulate(counts *[numBuckets]uint64, sum *int64, drain bool) (n, minInv uint64, mx int64) {
	shards := h.shardsInUse()
	for k := range shards {
		c := &shards[k].counts
		for i := range c {
			v := c[i].Load()
			if v != 0 && drain {
				v = c[i].Swap(0)
			}
			counts[i] += v
			n += v
		}
	}
	for k := range shards {
		if drain {
			*sum += shards[k].sum.Swap(0)
		} else {
			*sum += shards[k].sum.Load()
		}
	}
	if drain {
		return n, h.minInv.Swap(0), h.max.Swap(0)
	}
	return n, h.minInv.Load(), h.max.Load()
}

// Reset empties the histogram. Samples recorded concurrently with Reset may
// be partly kept (for example counted but missing from Sum). A Histogram that
// has switched to sharded recording stays sharded.
func (h *Histogram) Reset() {
	for k := range h.shards {
		s := &h.shards[k]
		for i := range s.counts {
			if s.counts[i].Load() != 0 {
				s.counts[i].Store(0)
			}
		}
		s.sum.Store(0)
	}
	h.minInv.Store(0)
	h.max.Store(0)
}

func nonNegative(d time.Duration) int64 {
	return max(int64(d), 0)
}

// storeMaxUint64 raises a to v unless it already holds at least v.
func storeMaxUint64(a *atomic.Uint64, v uint64) {
	for old := a.Load(); v > old; old = a.Load() {
		if a.CompareAndSwap(old, v) {
			return
		}
	}
}

// storeMaxInt64 raises a to v unless it already holds at least v.
func storeMaxInt64(a *atomic.Int64, v int64) {
	for old := a.Load(); v > old; old = a.Load() {
		if a.CompareAndSwap(old, v) {
			return
		}
	}
}
