package hedge

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/latency"
)

// Gate configures the overload gate. Hedging helps when a few attempts are
// slow for reasons of their own (variance); when the system is slow because
// it is saturated (overload), a duplicate only adds load. How many answers
// come late cannot tell the two apart: a workload where a tenth of the
// requests straggle looks the same at any load, and the budget already
// prices it. So the gate looks for evidence of overload, and pauses the
// hedges sent because an answer was late while it finds any:
//
//   - GateNoHelp: hedges do not help. Of the operations in the last Window
//     that sent such a hedge (at least MinHedges of them), fewer than
//     MinWinRate were won by a hedge; or not one of the first three was.
//     Under variance a hedge to another replica usually answers before the
//     slow primary; under saturation the alternate is as slow, and a hedge
//     that starts a delay later seldom overtakes. Operations that ran out
//     of time count as lost. Until a hedge in the window has won (at
//     start, and after a quiet spell), late-answer hedges go one at a
//     time, so that a cold start into saturation spends a hedge per
//     verdict rather than a burst.
//   - GateSlowdown: the typical attempt has slowed down, and hedges are
//     slow too. The median latency of accepted attempts (over the current
//     slot of the latency window, or the last two, or the whole window,
//     whichever is the first to hold 100 attempts; a slot is a tenth of
//     Adaptive.Window, a second by default)
//     is Slowdown times its baseline, the lower quartile of the one-slot
//     medians of the last 300 slots (five minutes), and at least 1ms above
//     it; unless, since it rose (over the last Window or two), at least
//     MinHedges/2 operations sent a hedge and half of them were won by one
//     that answered within Slowdown times the baseline. Hedges that win at the old speed show healthy
//     alternates (one replica slow, the others not): variance, which a
//     risen median does not make overload. The slots recorded while the
//     median is up stay out of the baseline, unless it stays up for four
//     minutes: then it is the new normal.
//   - GateCapacity: Load reports the caller's concurrency limit 90% full.
//   - GateUnavailable: Load reports more than half the targets unavailable.
//
// Each signal has hysteresis: hedges must win 1.5 times MinWinRate before
// GateNoHelp clears; the median must fall below three quarters of Slowdown
// times its baseline, or 60% of the hedged operations since it rose be won
// at the old speed, before GateSlowdown clears; Load's signals clear once InUse is below 75%
// and at most half the targets are unavailable, and then only after a
// tenth of Window (a second) without them.
//
// While the gate is shut for the first two signals, which only hedges can
// disprove, a wanted hedge still goes out now and then as a probe, within
// the budget: the first Window/MinHedges (a second) after it shut, and
// each probe that is not won at the old speed doubles the gap, up to half
// the Window, so a steady overload costs a probe every five seconds. A
// probe won at the old speed resets the gap. GateNoHelp holds while the
// window has any outcome and they stay below 1.5 times MinWinRate, so the
// gate reopens by itself within about one Window of the overload ending.
//
// Hedges sent at once because an attempt failed are failover, not
// variability: they neither wait for the gate nor count towards it, and
// the budget alone bounds them. The budget bounds every hedge in every
// state of the gate.
type Gate struct {
	// Window is how far back the outcomes of hedges count. Default 10s.
	Window time.Duration
	// MinHedges is how many operations in the window must have sent a hedge
	// because an answer was late before their outcomes can shut the gate
	// (half as many keep a slowdown from doing so). Default 10.
	MinHedges int
	// MinWinRate is the share of those operations a hedge must win for
	// hedges to count as helping. Default 0.2; in (0, 0.5].
	MinWinRate float64
	// Slowdown is how many times its baseline the median latency must be
	// to count as a slowdown. Default 2; at least 1.
	Slowdown float64
	// Load, when non-nil, reports the caller's own evidence of overload,
	// which the engine cannot see. It is called at most every Window/1000
	// (10ms by default), on the request path, and must be fast and safe
	// for concurrent use.
	Load func() Load
	// Disabled turns the gate off (the budget still applies).
	Disabled bool
}

// Load is evidence of overload only the caller can see, for Gate.Load.
type Load struct {
	// InUse is the share of the caller's concurrency limit in use (the
	// gateway's attempt and request limits), in [0, 1].
	InUse float64
	// Unavailable is the share of targets that cannot take attempts (their
	// circuit breakers open), in [0, 1].
	Unavailable float64
}

// Defaults of a Gate.
const (
	DefaultGateWindow     = 10 * time.Second
	DefaultGateMinHedges  = 10
	DefaultGateMinWinRate = 0.2
	DefaultGateSlowdown   = 2.0
)

const (
	gateSlots = 10

	// noWinHedges: this many hedged operations and not one won shut the
	// gate before MinHedges: with hedges that win half the time, that
	// happens by chance one time in eight.
	noWinHedges = 3
	// reopenWinFactor: hedges must win this many times MinWinRate for
	// GateNoHelp to clear.
	reopenWinFactor = 1.5
	// fastWinShare and fastWinClear: the share of hedged operations won
	// by a hedge at the old speed that keeps GateSlowdown from shutting
	// the gate, and that clears it.
	fastWinShare = 0.5
	fastWinClear = 0.6
	// reopenSlowdownFactor: the median must fall below this share of
	// Slowdown times the baseline for GateSlowdown to clear.
	reopenSlowdownFactor = 0.75
	// slowdownFloor: a rise smaller than this is jitter, not saturation.
	slowdownFloor = time.Millisecond
	// recentMinSamples: the recent median needs this many samples, so that
	// a heavy tail's noise is not taken for a doubling (a median of 100
	// lognormal samples with p99 = 15 × p50 varies by about 15%).
	// slotMinSamples: a slot's median joins the baseline with this many.
	recentMinSamples = 100
	slotMinSamples   = 50
	// baselineSlots: the baseline is the lower quartile of the medians of
	// this many latency slots.
	baselineSlots = 300
	// adoptSlots: a slowdown that lasts this many latency slots (four
	// minutes) is the new normal and joins the baseline.
	adoptSlots = 240
	// Load's thresholds: shut at or above capacityShut in use, clear below
	// capacityClear; shut above unavailableShut.
	capacityShut    = 0.9
	capacityClear   = 0.75
	unavailableShut = 0.5
)

// GateSignals is a set of the gate's signals of overload. The zero value
// is the empty set: a gate with no signal is open.
type GateSignals uint8

// The signals, as documented on Gate.
const (
	GateNoHelp GateSignals = 1 << iota
	GateSlowdown
	GateCapacity
	GateUnavailable
)

// AllGateSignals lists every signal, in the order String names them.
var AllGateSignals = []GateSignals{GateNoHelp, GateSlowdown, GateCapacity, GateUnavailable}

var gateSignalNames = [...]string{"noHelp", "slowdown", "capacity", "unavailable"}

// String names the signals in s joined by "+", or "none".
func (s GateSignals) String() string {
	if s == 0 {
		return "none"
	}
	return strings.Join(s.Names(), "+")
}

// Names lists the names of the signals in s.
func (s GateSignals) Names() []string {
	names := []string{}
	for i, name := range gateSignalNames {
		if s&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return names
}

// probeable are the signals only hedges can disprove.
const probeable = GateNoHelp | GateSlowdown

// GateState is what the overload gate sees and has decided.
type GateState struct {
	// Shut holds the signals that keep the gate shut; zero when it is open.
	Shut GateSignals
	// Since is when the gate last opened or shut (the Hedger's creation
	// until it first does).
	Since time.Time
	// Hedged counts the operations in the window that sent a hedge because
	// an answer was late and have ended; HedgeWins those a hedge won.
	Hedged, HedgeWins int64
	// RiseHedged counts the operations that sent such a hedge and ended
	// since the median rose to Slowdown times its baseline (over the last
	// Window or two), RiseFastWins those won by a hedge that answered
	// within Slowdown times the baseline (at the old speed); both zero
	// while it has not risen.
	RiseHedged, RiseFastWins int64
	// RecentMedian is the median latency of recent accepted attempts,
	// BaselineMedian what it is compared with; zero while unknown (too few
	// attempts).
	RecentMedian, BaselineMedian time.Duration
	// Load is the caller's load as last reported (zero without Gate.Load).
	Load Load
	// Probes counts the hedges sent while the gate was shut, to learn
	// whether hedges help again, since the Hedger was created.
	Probes int64
	// Unproven is set while no hedge in the window has won (at start, and
	// after a quiet spell): the gate lets late-answer hedges through one at
	// a time until one wins, so that a cold start into saturation spends
	// one hedge per verdict instead of a burst.
	Unproven bool
}

// Open reports whether the gate lets hedges through.
func (s GateState) Open() bool { return s.Shut == 0 }

// WinRate is the share of Hedged that a hedge won, or NaN when none ended.
func (s GateState) WinRate() float64 {
	if s.Hedged == 0 {
		return math.NaN()
	}
	return float64(s.HedgeWins) / float64(s.Hedged)
}

// String explains the state in a line: "open", or "shut:" and the evidence
// of each signal that keeps it shut.
func (s GateState) String() string {
	if s.Open() {
		return "open"
	}
	var parts []string
	if s.Shut&GateNoHelp != 0 {
		parts = append(parts, fmt.Sprintf("hedges won %d of %d (%.0f%%): alternates are as slow", s.HedgeWins, s.Hedged, 100*s.WinRate()))
	}
	if s.Shut&GateSlowdown != 0 {
		ratio := 0.0
		if s.BaselineMedian > 0 {
			ratio = float64(s.RecentMedian) / float64(s.BaselineMedian)
		}
		parts = append(parts, fmt.Sprintf("median latency %v is %.1fx its baseline %v, and since it rose %d of %d hedged reads were won at the old speed",
			s.RecentMedian.Round(time.Microsecond), ratio, s.BaselineMedian.Round(time.Microsecond), s.RiseFastWins, s.RiseHedged))
	}
	if s.Shut&GateCapacity != 0 {
		parts = append(parts, fmt.Sprintf("%.0f%% of the concurrency limit in use", 100*s.Load.InUse))
	}
	if s.Shut&GateUnavailable != 0 {
		parts = append(parts, fmt.Sprintf("%.0f%% of the targets unavailable", 100*s.Load.Unavailable))
	}
	return "shut: " + strings.Join(parts, "; ")
}

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

// gate is the runtime form of Gate. Its decision is re-evaluated at most
// every evalEvery (Window/1000), by whichever caller finds it due, and
// published in shut; the hedge path reads one atomic. The latency medians
// it weighs are looked at every measureGap (Window/500).
type gate struct {
	cfg        Gate
	counts     *gateCounts
	lat        *latency.Window // accepted attempts' latencies, shared with the delay
	origin     time.Time       // next and lastProbe count nanoseconds from here, by the monotonic clock
	evalEvery  int64           // nanoseconds
	measureGap int64           // nanoseconds between two looks at the latency window
	probeFirst int64           // nanoseconds from a probe to the next, at first
	probeMost  int64           // ... at most, after probes that did not win at the old speed
	hold       time.Duration   // Load's signals stay at least this long
	notify     func(GateState) // told of each change, outside mu; may be nil

	next      atomic.Int64  // nanoseconds from origin of the next evaluation
	shut      atomic.Uint32 // GateSignals in force
	lastProbe atomic.Int64  // nanoseconds from origin of the last probe
	probeGap  atomic.Int64  // nanoseconds from the last probe to the next
	probes    atomic.Int64
	// unsettled counts operations that sent a hedge because an answer was
	// late and are not decided yet; unproven is set while no such hedge in
	// the window has won: then they go one at a time, so that a cold start
	// into saturation spends one hedge per verdict, not a burst.
	unsettled atomic.Int64
	unproven  atomic.Bool
	fastLimit atomic.Int64 // nanoseconds: a hedge that wins within this wins at the old speed; 0 unknown
	// Hedged operations, and those won at the old speed, since the median
	// rose, in two buckets that take turns a Window each, so that only the
	// last one or two Windows count; cleared when it rises.
	rise    [2]riseBucket
	riseCur atomic.Int32 // the bucket being filled

	mu       sync.Mutex
	state    GateState
	tripped  [len(gateSignalNames)]time.Time // when each of Load's signals last held
	risen    bool                            // the median is up: rise counts
	riseFrom int64                           // the latency epoch in which it rose (or was last adopted)
	riseTurn time.Time                       // when rise[riseCur] began to fill
	medians  [baselineSlots]slotMedian       // ring, by epoch
	measured int64                           // newest epoch whose median is in medians
	nextLook int64                           // nanoseconds from origin of the next look at the latency window
	scratch  []time.Duration                 // for the baseline's quartile
	snap     latency.Snapshot                // for the medians, reused: it is 9 KiB
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
	g := &gate{
		cfg:        cfg,
		counts:     newGateCounts(origin, cfg.Window),
		lat:        lat,
		origin:     origin,
		evalEvery:  max(int64(cfg.Window)/1000, 1),
		measureGap: max(int64(cfg.Window)/500, 1),
		probeFirst: max(int64(cfg.Window)/int64(cfg.MinHedges), 1),
		probeMost:  max(int64(cfg.Window)/2, 1),
		hold:       cfg.Window / gateSlots,
		notify:     notify,
		measured:   math.MinInt64,
	}
	g.state.Since = origin
	g.probeGap.Store(g.probeFirst)
	g.lastProbe.Store(math.MinInt64 / 2) // long ago: the first probe may go at once
	return g
}

// addOp counts an operation starting at now and re-evaluates the gate if
// that is due.
func (g *gate) addOp(now time.Time) {
	g.counts.add(now, countOps)
	g.tick(now)
}

// tick re-evaluates the gate if that is due at now.
func (g *gate) tick(now time.Time) {
	if g.cfg.Disabled {
		return
	}
	n := int64(now.Sub(g.origin))
	if n < g.next.Load() {
		return
	}
	// Due: whoever gets the lock first evaluates; the others wait for it,
	// so that none acts on the state the evaluation is replacing.
	g.mu.Lock()
	if n < g.next.Load() {
		g.mu.Unlock()
		return
	}
	snap, changed := g.evaluate(now)
	g.next.Store(n + g.evalEvery) // only now: a caller that finds it due waits for the state above
	g.mu.Unlock()
	if changed && g.notify != nil {
		g.notify(snap)
	}
}

// allow reports whether a hedge wanted at now because an answer was late
// may go, and whether it goes as a probe of a shut gate; again is set when
// the operation asking has sent such a hedge already. It re-evaluates the
// gate first if that is due: the caller's Load may have changed since the
// operation started.
func (g *gate) allow(now time.Time, again bool) (ok, probe bool) {
	g.tick(now)
	shut := GateSignals(g.shut.Load())
	if shut == 0 {
		if again || !g.unproven.Load() {
			return true, false
		}
		return g.unsettled.Load() == 0, false // unproven: one operation at a time
	}
	if shut&^probeable != 0 {
		return false, false // Load's evidence: no hedge can disprove it
	}
	n := int64(now.Sub(g.origin))
	last := g.lastProbe.Load()
	if n-last < g.probeGap.Load() || !g.lastProbe.CompareAndSwap(last, n) {
		return false, false
	}
	g.probes.Add(1)
	return true, true
}

// hedged counts an operation that sent a hedge because an answer was late
// and has ended at now: whether a hedge won and how long the winning hedge
// took, and whether it went as a probe, whose outcome sets the gap to the
// next one.
func (g *gate) hedged(now time.Time, won bool, took time.Duration, probe bool) {
	g.counts.add(now, countHedged)
	b := &g.rise[g.riseCur.Load()]
	b.hedged.Add(1)
	fast := false
	if won {
		g.counts.add(now, countWins)
		limit := g.fastLimit.Load()
		if fast = limit == 0 || int64(took) <= limit; fast {
			b.fast.Add(1)
		}
	}
	if !probe {
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
// returns the new state and whether it changed. Called with g.mu held.
func (g *gate) evaluate(now time.Time) (GateState, bool) {
	s := &g.state
	prev := s.Shut
	t := g.counts.totals(now)
	s.Hedged, s.HedgeWins = t[countHedged], t[countWins]
	winRate := float64(s.HedgeWins) / float64(max(s.Hedged, 1))
	enough := s.Hedged >= int64(g.cfg.MinHedges)
	var shut GateSignals

	// Hedges that do not win: the alternate is as slow as the primary.
	// Once shut, any evidence keeps it so while it says the same: the
	// probes are few by design.
	if prev&GateNoHelp != 0 {
		if s.Hedged > 0 && winRate < g.cfg.MinWinRate*reopenWinFactor {
			shut |= GateNoHelp
		}
	} else if enough && winRate < g.cfg.MinWinRate || s.Hedged >= noWinHedges && s.HedgeWins == 0 {
		// Not one of the first few won: no need to wait for MinHedges
		// (a cold start into saturation would spend them all at once).
		shut |= GateNoHelp
	}

	// A risen median, unless hedges sent since it rose win at the old
	// speed. Only outcomes since then count: those from before, when all
	// was well, say nothing of the alternates now. Medians move slowly:
	// they are looked at every measureGap, not every evaluation.
	if n := int64(now.Sub(g.origin)); n >= g.nextLook {
		g.nextLook = n + g.measureGap
		g.measure(now)
	}
	limit, need, share := g.cfg.Slowdown, max(int64(g.cfg.MinHedges)/2, 1), fastWinShare
	if prev&GateSlowdown != 0 {
		limit, share = limit*reopenSlowdownFactor, fastWinClear
	}
	risen := s.RecentMedian > 0 && s.BaselineMedian > 0 &&
		float64(s.RecentMedian) >= limit*float64(s.BaselineMedian) && s.RecentMedian-s.BaselineMedian >= slowdownFloor
	switch {
	case risen && !g.risen:
		g.rise[0].clear()
		g.rise[1].clear()
		g.riseTurn = now
		g.riseFrom = g.lat.EpochAt(now)
	case risen && now.Sub(g.riseTurn) >= g.cfg.Window:
		next := 1 - g.riseCur.Load()
		g.rise[next].clear()
		g.riseCur.Store(next)
		g.riseTurn = now
	}
	g.risen = risen
	s.RiseHedged, s.RiseFastWins = g.riseCounts()
	if risen && (s.RiseHedged < need || float64(s.RiseFastWins) < share*float64(s.RiseHedged)) {
		shut |= GateSlowdown
	}

	// The caller's own evidence.
	if g.cfg.Load != nil {
		l := g.cfg.Load()
		s.Load = l
		shut |= g.trip(now, GateCapacity, l.InUse >= capacityShut || prev&GateCapacity != 0 && l.InUse >= capacityClear)
		shut |= g.trip(now, GateUnavailable, l.Unavailable > unavailableShut)
	}

	s.Probes = g.probes.Load()
	s.Unproven = s.HedgeWins == 0
	g.unproven.Store(s.Unproven)
	changed := shut != prev
	if changed {
		s.Shut = shut
		s.Since = now
		g.shut.Store(uint32(shut))
		switch {
		case shut == 0:
			g.probeGap.Store(g.probeFirst) // the next time it shuts, probe from the start
		case prev == 0:
			g.lastProbe.Store(int64(now.Sub(g.origin))) // the first probe a gap after shutting
		}
	}
	return *s, changed
}

// riseCounts returns the hedged operations, and those won at the old
// speed, since the median rose (in the last Window or two); zero while it
// has not. Called with g.mu held.
func (g *gate) riseCounts() (hedged, fast int64) {
	if !g.risen {
		return 0, 0
	}
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
// last call (those the window still holds), and sets the recent median
// and its baseline. Called with g.mu held.
func (g *gate) measure(now time.Time) {
	s := &g.state
	w := g.lat.SlotWidth()
	cur := g.lat.EpochAt(now)
	from := max(cur-int64(g.lat.Span()/w)+1, g.measured+1)
	if from < cur {
		for e := from; e < cur; e++ {
			g.lat.RecentInto(&g.snap, now.Add(-time.Duration(cur-e)*w), w)
			m := median(&g.snap, slotMinSamples)
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
	// The shortest look-back that holds enough samples: the current slot,
	// the last two, or the whole window.
	for _, span := range [...]time.Duration{w, 2 * w, g.lat.Span()} {
		g.lat.RecentInto(&g.snap, now, span)
		if s.RecentMedian = median(&g.snap, recentMinSamples); s.RecentMedian > 0 {
			break
		}
	}
}

// baseline returns the lower quartile of the known slot medians of the
// baselineSlots epochs before cur, leaving out those recorded while the
// median was up (a slowdown must not become its own baseline), or zero
// when none is known. The lower quartile rather than the least: a minimum
// of many noisy medians sits well below the typical one. Called with
// g.mu held.
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

// median is s's median, or zero when s holds fewer than min samples.
func median(s *latency.Snapshot, min uint64) time.Duration {
	if s.Count() < min {
		return 0
	}
	return s.Quantile(0.5)
}

// snapshot returns the gate's state at now, re-evaluated if that is due.
func (g *gate) snapshot(now time.Time) GateState {
	g.tick(now)
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.state
	t := g.counts.totals(now)
	st.Hedged, st.HedgeWins = t[countHedged], t[countWins]
	st.RiseHedged, st.RiseFastWins = g.riseCounts()
	st.Probes = g.probes.Load()
	st.Unproven = st.HedgeWins == 0
	return st
}
