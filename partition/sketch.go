package partition

import (
	"cmp"
	"math"
	"slices"
	"sync"
)

// This file: the hot-key sketch, Space-Saving (Metwally, Agrawal and El
// Abbadi, 2005) over exponentially decayed counts. m counters hold the keys
// seen most; a key not held takes the counter of least count, inheriting
// that count as its possible overestimate (err), so a held key's true count
// lies in [count-err, count] and any key with more than total/m is held.
//
// Decay is forward decay (Cormode et al., 2009): a request at t adds
// e^((t-L)/W) for a landmark L, which weighs every request as
// e^(-(now-t)/W) relative to now without touching the other counters;
// RebalanceAt moves L to now and rescales (decayTo), so the weights stay
// near 1.
//
// The counters are split into shards by the key's hash, each under its own
// mutex: a key always lands in the same shard, so each shard is an exact
// Space-Saving sketch of its share of the stream, and concurrent requests
// rarely wait for each other.

// tick is the resolution of the weights, 2^20 ns ≈ 1 ms: the requests of
// one tick weigh the same (off by at most tick/W, 10⁻⁴ of the default
// Window), so that a shard computes an exponential once per tick rather
// than once per request.
const tick = 1 << 20

const noTick = math.MinInt64

// maxExponent caps (t-L)/W: if no round moves the landmark for this many
// windows, later requests all weigh the same (decay pauses) rather than
// overflow.
const maxExponent = 600

type sketch struct {
	shards []shard
	mask   uint64  // len(shards)-1
	window float64 // W in nanoseconds
}

type shard struct {
	mu       sync.Mutex
	landmark int64   // L in Unix nanoseconds; 0 until the first request or round
	wTick    int64   // the tick since L whose weight w is; noTick when none
	w        float64 // e^(wTick·tick/W): the weight of a request in that tick
	total    float64 // decayed weight of every request the shard saw
	n        int     // counters in use
	keys     []string
	hashes   []uint64
	err      []float64
	heap     []slot  // the counters in use, a min-heap by count
	pos      []int32 // counter index -> its place in heap
	table    []int32 // open addressing by hash: counter index + 1, 0 when empty
	tmask    uint64
	_        [64]byte // keeps neighbouring shards' mutexes off one cache line
}

func newSketch(size int, window float64) *sketch {
	shards := 1
	for shards < 8 && size/(shards*2) >= 16 {
		shards *= 2
	}
	s := &sketch{shards: make([]shard, shards), mask: uint64(shards - 1), window: window}
	per := (size + shards - 1) / shards
	tsize := 1
	for tsize < 2*per {
		tsize *= 2
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.keys = make([]string, per)
		sh.hashes = make([]uint64, per)
		sh.err = make([]float64, per)
		sh.heap = make([]slot, 0, per)
		sh.pos = make([]int32, per)
		sh.table = make([]int32, tsize)
		sh.tmask = uint64(tsize - 1)
	}
	return s
}

// record counts one request for key, whose hash is h, at now (Unix ns).
func (s *sketch) record(h uint64, key string, now int64) {
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	if sh.landmark == 0 {
		sh.landmark, sh.wTick = now, noTick
	}
	if k := (now - sh.landmark) / tick; k != sh.wTick {
		x := float64(k*tick) / s.window
		sh.wTick, sh.w = k, math.Exp(max(min(x, maxExponent), -maxExponent))
	}
	w := sh.w
	sh.total += w
	if i := sh.find(h); i >= 0 {
		j := int(sh.pos[i])
		sh.heap[j].count += w
		sh.down(j)
	} else if sh.n < len(sh.keys) {
		i := int32(sh.n)
		sh.n++
		sh.keys[i], sh.hashes[i], sh.err[i] = key, h, 0
		sh.insert(i)
		sh.pos[i] = int32(len(sh.heap))
		sh.heap = append(sh.heap, slot{w, i}) // within capacity: no allocation
		sh.up(len(sh.heap) - 1)
	} else {
		min := &sh.heap[0]
		i := min.i
		sh.remove(sh.hashes[i])
		sh.keys[i], sh.hashes[i], sh.err[i] = key, h, min.count
		min.count += w
		sh.insert(i)
		sh.down(0)
	}
	sh.mu.Unlock()
}

func (sh *shard) home(h uint64) uint64 { return (h >> 16) & sh.tmask }

// find returns the counter holding hash h, or -1.
func (sh *shard) find(h uint64) int32 {
	for j := sh.home(h); ; j = (j + 1) & sh.tmask {
		e := sh.table[j]
		if e == 0 {
			return -1
		}
		if sh.hashes[e-1] == h {
			return e - 1
		}
	}
}

func (sh *shard) insert(i int32) {
	j := sh.home(sh.hashes[i])
	for sh.table[j] != 0 {
		j = (j + 1) & sh.tmask
	}
	sh.table[j] = i + 1
}

// remove deletes hash h from the table by backward shift, so that probes
// never need tombstones.
func (sh *shard) remove(h uint64) {
	j := sh.home(h)
	for sh.hashes[sh.table[j]-1] != h {
		j = (j + 1) & sh.tmask
	}
	for k := (j + 1) & sh.tmask; sh.table[k] != 0; k = (k + 1) & sh.tmask {
		home := sh.home(sh.hashes[sh.table[k]-1])
		// The entry at k may fill the hole at j unless its home lies
		// cyclically in (j, k].
		if (j < k && j < home && home <= k) || (j > k && (home > j || home <= k)) {
			continue
		}
		sh.table[j] = sh.table[k]
		j = k
	}
	sh.table[j] = 0
}

func (sh *shard) less(a, b int) bool { return sh.heap[a].count < sh.heap[b].count }

func (sh *shard) swap(a, b int) {
	sh.heap[a], sh.heap[b] = sh.heap[b], sh.heap[a]
	sh.pos[sh.heap[a].i], sh.pos[sh.heap[b].i] = int32(a), int32(b)
}

func (sh *shard) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !sh.less(j, p) {
			return
		}
		sh.swap(j, p)
		j = p
	}
}

func (sh *shard) down(j int) {
	n := len(sh.heap)
	for {
		c := 2*j + 1
		if c >= n {
			return
		}
		if c+1 < n && sh.less(c+1, c) {
			c++
		}
		if !sh.less(c, j) {
			return
		}
		sh.swap(j, c)
		j = c
	}
}

// slot is a counter's place in its shard's heap: the count is kept there,
// not behind the index, so that sifting compares without an indirection.
type slot struct {
	count float64
	i     int32 // the counter's index
}

// counted is one key the sketch holds: its decayed count, of which up to
// err may belong to the keys it displaced.
type counted struct {
	key   string
	hash  uint64
	count float64
	err   float64
}

// decayTo moves every shard's landmark to now, rescaling its counts, and
// returns the held keys, most counted first, and the decayed total of all
// requests, all as of now: a steady rate r gives a count of r × W.
func (s *sketch) decayTo(now int64) ([]counted, float64) {
	var out []counted
	total := 0.0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if sh.landmark != 0 {
			x := float64(now-sh.landmark) / s.window
			f := math.Exp(-max(min(x, maxExponent), -maxExponent))
			sh.total *= f
			for j := 0; j < sh.n; j++ {
				sh.heap[j].count *= f
				sh.err[j] *= f
			}
		}
		sh.landmark, sh.wTick = now, noTick
		total += sh.total
		for _, s := range sh.heap {
			out = append(out, counted{sh.keys[s.i], sh.hashes[s.i], s.count, sh.err[s.i]})
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b counted) int {
		if c := cmp.Compare(b.count, a.count); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	return out, total
}
