package hedge

import (
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/internal/latency"
)

// gateCounts counts, per slot of the gate's window, the operations, those
// that wanted a hedge because an answer was late, those that sent one and
// ended, and those a hedge won. Adds are lock-free on the fast path;
// rotating into a stale slot takes a mutex, once per slot width.
type gateCounts struct {
	origin time.Time // slots are placed by the monotonic clock from here
	width  int64     // nanoseconds per slot
	mu     sync.Mutex
	slots  [gateSlots]gateSlot
}

type gateSlot struct {
	epoch atomic.Int64
	n     [numGateCounts]atomic.Int64
}

// What a gateSlot counts.
const (
	countOps = iota
	countWanted
	countHedged
	countWins
	numGateCounts
)

// gateTotals are the sums of gateCounts over the window, by what they count.
type gateTotals [numGateCounts]int64

func newGateCounts(origin time.Time, span time.Duration) *gateCounts {
	return &gateCounts{origin: origin, width: max(int64(span)/gateSlots, 1)}
}

// epoch returns the number of the slot-width interval holding now, by the
// monotonic clock, so that stepping the wall clock moves nothing.
func (c *gateCounts) epoch(now time.Time) int64 {
	ns := int64(now.Sub(c.origin))
	e := ns / c.width
	if ns < 0 && ns%c.width != 0 {
		e--
	}
	return e
}

// add counts one of what at now. A caller with a clock reading older than
// the slot's epoch (a stale one) counts nothing.
func (c *gateCounts) add(now time.Time, what int) {
	e := c.epoch(now)
	i := e % gateSlots
	if i < 0 {
		i += gateSlots
	}
	s := &c.slots[i]
	if cur := s.epoch.Load(); cur != e {
		if cur > e {
			return
		}
		c.mu.Lock()
		if cur = s.epoch.Load(); cur < e {
			for i := range s.n {
				s.n[i].Store(0)
			}
			s.epoch.Store(e)
		}
		c.mu.Unlock()
		if cur > e {
			return
		}
	}
	s.n[what].Add(1)
}

// totals sums the slots whose epoch lies within the window ending at now.
func (c *gateCounts) totals(now time.Time) gateTotals {
	e := c.epoch(now)
	var t gateTotals
	for i := range c.slots {
		s := &c.slots[i]
		if ep := s.epoch.Load(); ep > e-gateSlots && ep <= e {
			for k := range t {
				t[k] += s.n[k].Load()
			}
		}
	}
	return t
}

// recentRing keeps the last recentSamples accepted latencies and when
// each was recorded, lock-free: a writer takes a slot with one atomic add.
// A reader racing a writer may pair a slot's new time with its old value;
// one sample in 128 off for a moment does not move a median.
type recentRing struct {
	n  atomic.Uint64
	v  [recentSamples]atomic.Int64 // latency, nanoseconds
	at [recentSamples]atomic.Int64 // when, nanoseconds from the gate's origin
}

func (r *recentRing) add(at int64, v time.Duration) {
	i := (r.n.Add(1) - 1) % recentSamples
	r.v[i].Store(int64(v))
	r.at[i].Store(at)
}

// median returns the median of the samples recorded at or after since,
// using buf, or zero when fewer than recentMinSamples qualify.
func (r *recentRing) median(since int64, buf []int64) time.Duration {
	buf = buf[:0]
	for i := range r.v {
		if r.at[i].Load() >= since {
			buf = append(buf, r.v[i].Load())
		}
	}
	if len(buf) < recentMinSamples {
		return 0
	}
	slices.Sort(buf)
	return time.Duration(buf[len(buf)/2])
}

// gatePass is what the gate granted a hedge wanted because an answer was
// late. The operation hands it back: refuse if the hedge did not go after
// all, settle when the operation ends.
type gatePass struct {
	probe     bool  // through a shut gate, to learn whether hedges help again
	prevProbe int64 // the last probe before this one, to refund the slot
	turn      int64 // the unproven gate's turn it holds (its start + 1), 0 none
}

// gate is the runtime form of Gate. Its decision is re-evaluated at most
// every evalEvery (Window/1000) by whichever caller finds it due, under
// mu, and published in shut; the hedge path reads atomics. The latency
// medians it weighs are looked at every measureGap (Window/500).
type gate struct {
	cfg        Gate
	counts     *gateCounts
	lat        *latency.Window // accepted attempts' latencies, shared with the delay
	origin     time.Time       // the nanosecond clocks below count from here, by the monotonic clock
	evalEvery  int64
	measureGap int64
	probeFirst int64         // from shutting to the first probe, and between probes at first
	probeMost  int64         // between probes at most, after probes that did not win at the old speed
	turnMost   int64         // how long an unproven turn may last
	hold       time.Duration // Load's signals stay at least this long
	notify     func(GateState)
	retired    atomic.Bool // replaced by Update: changes are no longer reported

	next      atomic.Int64  // when the next evaluation is due
	shut      atomic.Uint32 // GateSignals in force
	unproven  atomic.Bool
	turn      atomic.Int64  // the unproven turn's start + 1, 0 when free
	lateBits  atomic.Uint32 // the last 32 operations, newest lowest: 1 late, 0 answered before the delay
	settled   atomic.Int64  // operations that set a bit, up to 32
	surgeK    atomic.Int32  // late operations of the last 32 that make a surge; 0: not yet known
	surgeFrom atomic.Int64  // when the surge began + 1, 0 none
	surgeWon  atomic.Bool   // a hedge sent since surgeFrom won at the old speed
	lastProbe atomic.Int64
	probeGap  atomic.Int64
	probes    atomic.Int64
	fastLimit atomic.Int64 // a hedge that wins within this wins at the old speed; 0 unknown
	// Hedged operations, and those won at the old speed, since the median
	// rose, in two buckets that take turns a Window each, so that only the
	// last one or two Windows count; cleared when it rises.
	rise    [2]riseBucket
	riseCur atomic.Int32
	recent  recentRing

	mu       sync.Mutex
	state    GateState
	tripped  [len(gateSignalNames)]time.Time // when each of Load's signals last held
	risen    bool                            // the median is up
	riseFrom int64                           // the latency epoch in which it rose (or was last adopted)
	riseTurn time.Time                       // when rise[riseCur] began to fill
	medians  [baselineSlots]slotMedian       // ring, by epoch
	measured int64                           // newest epoch whose median is in medians
	nextLook int64
	scratch  []time.Duration  // for the baseline's quartile
	ringBuf  []int64          // for the recent median
	snap     latency.Snapshot // for the slot medians, reused: it is 9 KiB
}

type riseBucket struct{ hedged, fast atomic.Int64 }

func (b *riseBucket) clear() {
	b.hedged.Store(0)
	b.fast.Store(0)
}

// slotMedian is one completed latency slot's median.
type slotMedian struct {
	epoch  int64
	median time.Duration // 0: too few samples
	risen  bool          // recorded while the median was up
}

func newGate(cfg Gate, lat *latency.Window, notify func(GateState)) *gate {
	origin := time.Now()
	w := int64(cfg.Window)
	g := &gate{
		cfg:        cfg,
		counts:     newGateCounts(origin, cfg.Window),
		lat:        lat,
		origin:     origin,
		evalEvery:  max(w/1000, 1),
		measureGap: max(w/500, 1),
		probeFirst: max(w/gateSlots, 1),
		probeMost:  max(w/2, 1),
		turnMost:   max(w/gateSlots, 1),
		hold:       cfg.Window / gateSlots,
		notify:     notify,
		measured:   math.MinInt64,
		ringBuf:    make([]int64, 0, recentSamples),
	}
	g.state.Since = origin
	g.probeGap.Store(g.probeFirst)
	g.lastProbe.Store(math.MinInt64 / 2) // long ago
	g.unproven.Store(!cfg.Disabled)
	g.state.Unproven = !cfg.Disabled
	return g
}

// nanos places now on the gate's monotonic clock.
func (g *gate) nanos(now time.Time) int64 { return int64(now.Sub(g.origin)) }

// addOp counts an operation starting at now and re-evaluates the gate if
// that is due.
func (g *gate) addOp(now time.Time) {
	g.counts.add(now, countOps)
	g.tick(now)
}

// record notes an accepted attempt's latency (or a cancelled loser's lower
// bound) for the recent median.
func (g *gate) record(now time.Time, l time.Duration) {
	if !g.cfg.Disabled {
		g.recent.add(g.nanos(now), l)
	}
}

// tick re-evaluates the gate if that is due at now.
func (g *gate) tick(now time.Time) {
	if g.cfg.Disabled {
		return
	}
	n := g.nanos(now)
	if n < g.next.Load() {
		return
	}
	// Due: whoever gets the lock first evaluates; the others wait for it,
	// so that none acts on the state the evaluation is replacing. next
	// moves on only once the new state is published.
	g.mu.Lock()
	if n < g.next.Load() {
		g.mu.Unlock()
		return
	}
	snap, changed := g.evaluate(now)
	g.next.Store(n + g.evalEvery)
	g.mu.Unlock()
	if changed && g.notify != nil && !g.retired.Load() {
		g.notify(snap)
	}
}

// allow reports whether a hedge wanted at now because an answer was late
// may go, with the pass to hand back; again is set when the operation
// asking has sent such a hedge already (it holds its turn).
func (g *gate) allow(now time.Time, again bool) (gatePass, bool) {
	g.tick(now)
	shut := GateSignals(g.shut.Load())
	n := g.nanos(now)
	if shut == 0 && !again && !g.unproven.Load() && g.surging(n) {
		g.unproven.Store(true) // published at once: the next evaluation may be 10ms away
	}
	switch {
	case shut == 0 && (again || !g.unproven.Load()):
		return gatePass{}, true
	case shut == 0:
		// Unproven: one operation at a time. A turn ends with its
		// operation, or after turnMost, whatever became of it.
		t := g.turn.Load()
		if t != 0 && n-(t-1) < g.turnMost || !g.turn.CompareAndSwap(t, n+1) {
			return gatePass{}, false
		}
		return gatePass{turn: n + 1}, true
	case shut&^probeable != 0:
		return gatePass{}, false // Load's evidence: no hedge can disprove it
	}
	last := g.lastProbe.Load()
	if n-last < g.probeGap.Load() || !g.lastProbe.CompareAndSwap(last, n) {
		return gatePass{}, false
	}
	return gatePass{probe: true, prevProbe: last}, true
}

// launched is told that the hedge p was granted for went out.
func (g *gate) launched(p gatePass) {
	if p.probe {
		g.probes.Add(1)
	}
}

// refuse hands back what p holds: the hedge it was granted for did not go
// (the budget, the target or the caller's Admit said no).
func (g *gate) refuse(p gatePass, now time.Time) {
	if p.probe {
		g.lastProbe.CompareAndSwap(g.nanos(now), p.prevProbe)
	}
	if p.turn != 0 {
		g.turn.CompareAndSwap(p.turn, 0)
	}
}

// settle hands back p for an operation that sent a hedge because an
// answer was late and has ended at now; counts says whether its outcome
// is evidence (won or lost: see hedgeHelped, and not sent under a
// warming-up delay), won whether a hedge won, took how long the winning
// hedge took.
func (g *gate) settle(now time.Time, p gatePass, counts, won bool, took time.Duration) {
	if p.turn != 0 {
		g.turn.CompareAndSwap(p.turn, 0)
	}
	if !counts {
		return
	}
	g.counts.add(now, countHedged)
	b := &g.rise[g.riseCur.Load()]
	b.hedged.Add(1)
	fast := false
	if won {
		g.counts.add(now, countWins)
		limit := g.fastLimit.Load()
		if fast = limit == 0 || int64(took) <= limit; fast {
			b.fast.Add(1)
			if from := g.surgeFrom.Load(); from != 0 && p.turn >= from {
				g.surgeWon.Store(true)
			}
		}
	}
	if !p.probe {
		return
	}
	if fast {
		g.probeGap.Store(g.probeFirst)
		return
	}
	for {
		gap := g.probeGap.Load()
		if g.probeGap.CompareAndSwap(gap, min(2*gap, g.probeMost)) {
			return
		}
	}
}

// evaluate recomputes the gate's signals at now and publishes them, and
// returns the new state and whether its signals changed. Called with g.mu
// held.
func (g *gate) evaluate(now time.Time) (GateState, bool) {
	s := &g.state
	prev := s.Shut
	t := g.counts.totals(now)
	s.Hedged, s.HedgeWins = t[countHedged], t[countWins]
	var shut GateSignals

	// Hedges that do not win: the alternate is as slow as the primary.
	if prev&GateNoHelp != 0 {
		if s.Hedged > 0 && float64(s.HedgeWins) < g.cfg.MinWinRate*reopenWinFactor*float64(s.Hedged) {
			shut |= GateNoHelp
		}
	} else if wilsonUpper(s.HedgeWins, s.Hedged, wilsonZ) < g.cfg.MinWinRate {
		shut |= GateNoHelp
	}

	// A risen median, unless hedges sent since it rose win at the old
	// speed. Only outcomes since then count: those from before, when all
	// was well, say nothing of the alternates now. Medians move slowly:
	// they are looked at every measureGap, not every evaluation.
	if n := g.nanos(now); n >= g.nextLook {
		g.nextLook = n + g.measureGap
		g.measure(now)
	}
	risingUnproven := false
	if g.risen {
		s.RiseHedged, s.RiseFastWins = g.riseCounts()
		share := fastWinShare
		if prev&GateSlowdown != 0 {
			share = fastWinClear
		}
		switch {
		case s.RiseHedged < riseNeed:
			risingUnproven = true // too few outcomes yet: one at a time
		case float64(s.RiseFastWins) < share*float64(s.RiseHedged):
			shut |= GateSlowdown
		}
	} else {
		s.RiseHedged, s.RiseFastWins = 0, 0
	}

	// The caller's own evidence.
	if g.cfg.Load != nil {
		l := g.cfg.Load()
		s.Load = l
		shut |= g.trip(now, GateCapacity, l.InUse >= capacityShut || prev&GateCapacity != 0 && l.InUse >= capacityClear)
		shut |= g.trip(now, GateUnavailable, l.Unavailable > unavailableShut)
	}

	surgeUnproven := g.surge(now, t)

	s.Probes = g.probes.Load()
	s.Unproven = shut == 0 && (s.HedgeWins == 0 || risingUnproven || surgeUnproven)
	g.unproven.Store(s.Unproven)
	changed := shut != prev
	if changed {
		s.Shut = shut
		s.Changes++
		g.shut.Store(uint32(shut))
		switch {
		case shut == 0:
			s.Since = now
			g.probeGap.Store(g.probeFirst) // the next time it shuts, probe from the start
		case prev == 0:
			s.Since = now
			g.lastProbe.Store(g.nanos(now)) // the first probe a gap after shutting
		}
	}
	return *s, changed
}

// riseCounts returns the hedged operations, and those won at the old
// speed, since the median rose (in the last Window or two). Called with
// g.mu held.
func (g *gate) riseCounts() (hedged, fast int64) {
	for i := range g.rise {
		hedged += g.rise[i].hedged.Load()
		fast += g.rise[i].fast.Load()
	}
	return hedged, fast
}

// trip returns sig while on holds and for g.hold after it last did, else
// zero. Called with g.mu held.
func (g *gate) trip(now time.Time, sig GateSignals, on bool) GateSignals {
	i := bits.TrailingZeros8(uint8(sig))
	if on {
		g.tripped[i] = now
		return sig
	}
	if !g.tripped[i].IsZero() && now.Sub(g.tripped[i]) < g.hold {
		return sig
	}
	return 0
}

// measure records the medians of the latency slots completed since the
// last call (those the window still holds), updates the baseline and the
// recent median, and whether the median is up. Called with g.mu held.
func (g *gate) measure(now time.Time) {
	s := &g.state
	w := g.lat.SlotWidth()
	cur := g.lat.EpochAt(now)
	if from := max(cur-int64(g.lat.Span()/w)+1, g.measured+1); from < cur {
		for e := from; e < cur; e++ {
			g.lat.RecentInto(&g.snap, now.Add(-time.Duration(cur-e)*w), w)
			var m time.Duration
			if g.snap.Count() >= slotMinSamples {
				m = g.snap.Quantile(0.5)
			}
			i := e % baselineSlots
			if i < 0 {
				i += baselineSlots
			}
			g.medians[i] = slotMedian{epoch: e, median: m, risen: g.risen}
			g.measured = e
		}
		if g.risen && cur-g.riseFrom >= adoptSlots {
			// The slowdown has lasted: it is the new normal.
			for i := range g.medians {
				g.medians[i].risen = false
			}
			g.riseFrom = cur
		}
		s.BaselineMedian = g.baseline(cur)
		if s.BaselineMedian > 0 {
			g.fastLimit.Store(int64(g.cfg.Slowdown * float64(s.BaselineMedian)))
		}
	}
	s.RecentMedian = g.recent.median(g.nanos(now)-2*int64(w), g.ringBuf)

	// Up at Slowdown times the baseline, and stays up until below three
	// quarters of that, whatever the gate decides meanwhile.
	limit := g.cfg.Slowdown
	if g.risen {
		limit *= reopenSlowdownFactor
	}
	risen := s.RecentMedian > 0 && s.BaselineMedian > 0 &&
		float64(s.RecentMedian) >= limit*float64(s.BaselineMedian) && s.RecentMedian-s.BaselineMedian >= slowdownFloor
	switch {
	case risen && !g.risen:
		g.rise[0].clear()
		g.rise[1].clear()
		g.riseTurn = now
		g.riseFrom = cur
	case risen && now.Sub(g.riseTurn) >= g.cfg.Window:
		next := 1 - g.riseCur.Load()
		g.rise[next].clear()
		g.riseCur.Store(next)
		g.riseTurn = now
	}
	g.risen = risen
}

// baseline returns the lower quartile of the known slot medians of the
// baselineSlots epochs before cur, leaving out those recorded while the
// median was up (a slowdown must not become its own baseline), or zero
// when none is known. The lower quartile rather than the least: a minimum
// of many noisy medians sits well below the typical one. Called with g.mu
// held.
func (g *gate) baseline(cur int64) time.Duration {
	g.scratch = g.scratch[:0]
	for _, m := range g.medians {
		if m.median > 0 && !m.risen && m.epoch >= cur-baselineSlots && m.epoch < cur {
			g.scratch = append(g.scratch, m.median)
		}
	}
	if len(g.scratch) == 0 {
		return 0
	}
	slices.Sort(g.scratch)
	return g.scratch[(len(g.scratch)-1)/4]
}

// snapshot returns the gate's state as last evaluated, with the counts
// brought up to now.
func (g *gate) snapshot(now time.Time) GateState {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.state
	t := g.counts.totals(now)
	st.Hedged, st.HedgeWins = t[countHedged], t[countWins]
	if g.risen {
		st.RiseHedged, st.RiseFastWins = g.riseCounts()
	}
	st.Probes = g.probes.Load()
	return st
}
