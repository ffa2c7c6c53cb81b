package latency

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

const (
	defaultSpan  = 10 * time.Second
	defaultSlots = 10
)

// MaxSlots caps the number of sub-windows. Each slot is a full, sharded
// histogram (about 37 KiB), and a window snapshot merges all of them, so a
// finer rotation than this costs more than it tells.
const MaxSlots = 60

// noEpoch tags a slot that holds no epoch: never used, or being cleared.
// It is older than any real epoch, so recorders seeing it take the slow path
// and snapshots skip the slot.
const noEpoch = math.MinInt64

// Window is a latency histogram over the recent past: a ring of sub-window
// histograms ("slots"), each covering span/slots of time, plus a cumulative
// view of everything recorded. Create it with NewWindow; all methods are
// safe for concurrent use.
//
// Time is cut into epochs of span/slots; epoch e lives in slot e%slots, tagged
// with e. Recording into an epoch that has its slot is lock-free, and a
// sample of the newest epoch finds its slot without a division. The first
// sample of a new epoch takes a mutex, empties the slot it reuses into the
// accumulator behind Cumulative and then publishes the new tag. A sample is
// dropped from the window (but still counted by Cumulative) when its
// timestamp is a whole span or more older than the newest epoch the window
// has seen, or older than the epoch now occupying its slot.
//
// Times that carry a monotonic clock reading, as those from time.Now do, are
// placed by that reading relative to the window's creation (just as
// time.Time.Sub measures them), so stepping the wall clock neither empties
// nor freezes the window. Times without one, such as a synthetic clock built
// with time.Unix, are placed by their wall-clock value.
//
// A handful of samples racing a rotation may be counted in the epoch that
// replaced theirs: a recorder that checked the tag just before its slot was
// recycled adds into the recycled slot, and what it adds after the slot was
// emptied shows up in the new epoch (its Min, Max or Sum part possibly left
// with the old one). That needs a recorder to stall for about a span between
// the check and the add, and is the price of a lock-free record path.
//
// Cumulative is not affected. A sample is recorded into one histogram only,
// its slot (recording into a slot and a cumulative histogram, as this type
// once did, doubled the cost of Record), and Cumulative adds up an
// accumulator and all slots. Recycling a slot moves its contents into the
// accumulator counter by counter with atomic swaps, so a racing sample lands
// in exactly one of the two, and samples too old for the window go straight
// into the accumulator: Cumulative never loses a sample. It holds the
// rotation mutex while it reads all slots (about 25µs for 10 sharded slots),
// so it can delay the first Record of a new epoch, never the lock-free path.
type Window struct {
	width    int64 // nanoseconds per slot, >= 1
	n        int64 // number of slots
	slots    []windowSlot
	origin   time.Time // creation time, with its monotonic reading
	originNs int64     // origin.UnixNano()
	// latest is the index of the slot of the newest epoch, so that a sample
	// of that epoch, the common case, finds its slot without dividing.
	latest atomic.Int64

	mu     sync.Mutex // serialises rotations and Cumulative
	newest int64      // newest epoch any slot was rotated to; guarded by mu
	past   tally      // recycled slots and dropped samples; guarded by mu
}

// tally is a histogram's raw contents, for the Window's accumulator.
type tally struct {
	counts [numBuckets]uint64
	count  uint64 // the sum of counts
	sum    int64
	minInv uint64 // ^min, 0 for none, as in Histogram
	max    int64
}

// add records v, which maps to bucket i.
func (t *tally) add(v int64, i int) {
	t.counts[i]++
	t.count++
	t.sum += v
	t.minInv = max(t.minInv, ^uint64(v))
	t.max = max(t.max, v)
}

// drain moves the contents of h into t; see Histogram.accumulate.
func (t *tally) drain(h *Histogram) {
	n, minInv, mx := h.accumulate(&t.counts, &t.sum, true)
	t.count += n
	t.minInv = max(t.minInv, minInv)
	t.max = max(t.max, mx)
}

type windowSlot struct {
	epoch atomic.Int64
	h     Histogram
}

// NewWindow returns a Window covering the last span, rotated in slots steps.
// span <= 0 means 10s and slots <= 0 means 10; slots above MaxSlots are
// capped. See Span for the effective span.
func NewWindow(span time.Duration, slots int) *Window {
	if span <= 0 {
		span = defaultSpan
	}
	if slots <= 0 {
		slots = defaultSlots
	}
	slots = min(slots, MaxSlots)
	origin := time.Now()
	w := &Window{
		width:    max(int64(span)/int64(slots), 1),
		n:        int64(slots),
		slots:    make([]windowSlot, slots),
		origin:   origin,
		originNs: origin.UnixNano(),
		newest:   noEpoch,
	}
	for i := range w.slots {
		w.slots[i].epoch.Store(noEpoch)
	}
	return w
}

// Span returns the effective span: slots times the slot width, which is the
// requested span rounded down to a multiple of the slot count (and at least
// one nanosecond per slot).
func (w *Window) Span() time.Duration { return time.Duration(w.width * w.n) }

// Record adds one sample at the current time. Negative durations are
// recorded as 0.
//
// It reads only the monotonic clock (time.Since the window's creation), which
// places the sample exactly where RecordAt(time.Now(), d) would, at half the
// cost of time.Now. A caller that already holds the completion time, as a
// latency measurement usually does, can pass it to RecordAt and skip the
// clock read altogether.
func (w *Window) Record(d time.Duration) { w.record(w.nowNanos(), d) }

// RecordAt adds one sample observed at now. It is Record with an explicit
// clock, for tests and for callers that already know the time.
func (w *Window) RecordAt(now time.Time, d time.Duration) { w.record(w.nanos(now), d) }

// record adds d at ns, the window's nanosecond timeline (see nanos).
func (w *Window) record(ns int64, d time.Duration) {
	v := nonNegative(d)
	i := bucketIndex(v)
	// Fast path: ns falls in the epoch of the latest slot. This is exactly
	// the case the slow path would settle by finding that slot tagged with
	// ns's epoch; it just skips the two divisions. The subtraction may wrap
	// for times near the ends of int64, but the difference is still exact.
	s := &w.slots[w.latest.Load()]
	if e := s.epoch.Load(); e != noEpoch && uint64(ns-e*w.width) < uint64(w.width) {
		s.h.add(v, i)
		return
	}
	w.recordSlow(ns, v, i)
}

func (w *Window) recordSlow(ns, v int64, i int) {
	e := w.epoch(ns)
	s := &w.slots[w.slotOf(e)]
	if s.epoch.Load() == e || w.rotate(s, e, v, i) {
		s.h.add(v, i)
	}
}

// rotate makes s hold epoch e and reports whether the sample v (in bucket i)
// of epoch e may be recorded into it. If not, the sample is too old for the
// window and rotate adds it to the accumulator for Cumulative. It is the slow
// path, taken once per slot per epoch.
func (w *Window) rotate(s *windowSlot, e, v int64, i int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := s.epoch.Load()
	switch {
	case cur == e: // another recorder rotated it first
		return true
	case cur > e, // the slot has moved on: e is at least a span old
		e+w.n <= w.newest: // e fell out of the window already
		w.past.add(v, i)
		return false
	}
	// Untag first so concurrent snapshots skip the slot while it is being
	// emptied; tag last so a recorder that sees e adds into a clean slot.
	s.epoch.Store(noEpoch)
	w.past.drain(&s.h)
	s.epoch.Store(e)
	if e > w.newest {
		w.newest = e
		w.latest.Store(w.slotOf(e))
	}
	return true
}

// Snapshot returns the window's contents at time.Now().
func (w *Window) Snapshot() *Snapshot { return w.snapshot(w.nowNanos(), w.n) }

// SnapshotAt merges the slots whose epochs lie in the span ending at now: the
// epoch containing now and the slots-1 before it. The window therefore looks
// back between span-span/slots and span, depending on where now falls in its
// epoch; samples stamped later than now but within now's epoch are included.
// Slots for epochs after now are left out.
//
// Concurrent Record calls make the result slightly torn, as for
// Histogram.Snapshot; a slot that is rotated while being read is left out.
func (w *Window) SnapshotAt(now time.Time) *Snapshot { return w.snapshot(w.nanos(now), w.n) }

// RecentAt is SnapshotAt over a shorter look-back: it merges the slots of
// the epoch containing now and of the epochs before it that start less
// than span before that epoch ends, so span is rounded up to whole slots,
// and at most the window's. A span of one slot width or less gives the
// epoch containing now alone; RecentAt(now, Span()) is SnapshotAt(now).
func (w *Window) RecentAt(now time.Time, span time.Duration) *Snapshot {
	k := (int64(span) + w.width - 1) / w.width
	return w.snapshot(w.nanos(now), min(max(k, 1), w.n))
}

// RecentInto is RecentAt writing into dst, which it empties first, so
// that a caller that looks often allocates nothing (a Snapshot is about
// 9 KiB).
func (w *Window) RecentInto(dst *Snapshot, now time.Time, span time.Duration) {
	k := (int64(span) + w.width - 1) / w.width
	*dst = Snapshot{}
	w.snapshotInto(dst, w.nanos(now), min(max(k, 1), w.n))
}

// EpochAt returns the number of the epoch containing now: time cut into
// slot-width intervals on the window's timeline (see Window), numbered so
// that consecutive epochs are consecutive integers. With RecentAt and
// SlotWidth it lets a caller read each completed epoch once.
func (w *Window) EpochAt(now time.Time) int64 { return w.epoch(w.nanos(now)) }

// SlotWidth returns the time each slot covers: Span divided by the slots.
func (w *Window) SlotWidth() time.Duration { return time.Duration(w.width) }

// snapshot merges the slots of the k epochs ending with the one holding ns.
func (w *Window) snapshot(ns, k int64) *Snapshot {
	out := new(Snapshot)
	w.snapshotInto(out, ns, k)
	return out
}

// snapshotInto merges the slots of the k epochs ending with the one holding
// ns into out.
func (w *Window) snapshotInto(out *Snapshot, ns, k int64) {
	e := w.epoch(ns)
	var tmp Snapshot
	for i := range w.slots {
		s := &w.slots[i]
		tag := s.epoch.Load()
		if tag <= e-k || tag > e {
			continue
		}
		s.h.load(&tmp)
		if s.epoch.Load() != tag {
			continue // recycled while we read it: the counts are not tag's
		}
		out.Merge(&tmp)
	}
}

// Cumulative returns everything recorded since the window was created,
// including samples the window itself dropped as too old. It is torn by
// concurrent Record calls as Histogram.Snapshot is, but loses no sample to
// rotation (see Window).
func (w *Window) Cumulative() *Snapshot {
	out := new(Snapshot)
	w.mu.Lock()
	defer w.mu.Unlock()
	out.counts = w.past.counts
	out.sum = w.past.sum
	n, minInv, mx := w.past.count, w.past.minInv, w.past.max
	for i := range w.slots {
		c, mi, ma := w.slots[i].h.accumulate(&out.counts, &out.sum, false)
		n, minInv, mx = n+c, max(minInv, mi), max(mx, ma)
	}
	out.finish(n, minInv, mx)
	return out
}

// nanos places now on the window's timeline: Unix nanoseconds, but measured
// from the window's creation by the monotonic clock when now has a monotonic
// reading. time.Time.Sub makes that choice, and for a time without one the
// result is exactly now.UnixNano().
func (w *Window) nanos(now time.Time) int64 {
	return w.originNs + int64(now.Sub(w.origin))
}

// nowNanos is nanos(time.Now()) with a single, monotonic clock read.
func (w *Window) nowNanos() int64 {
	return w.originNs + int64(time.Since(w.origin))
}

// epoch returns the epoch containing ns, rounding towards minus infinity so
// that times before 1970 behave too.
func (w *Window) epoch(ns int64) int64 {
	e := ns / w.width
	if ns%w.width < 0 {
		e--
	}
	return e
}

func (w *Window) slotOf(e int64) int64 {
	i := e % w.n
	if i < 0 {
		i += w.n
	}
	return i
}
