package hedge

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Gate configures the overload gate. Hedging helps when a few attempts are
// slow for reasons of their own (variance); when the system is slow because
// it is saturated (overload), a duplicate only adds load. How many answers
// come late cannot tell the two apart: a workload where a tenth of the
// requests straggle looks the same at any load, and the budget already
// prices it. So the gate looks for evidence of overload, and pauses the
// hedges sent because an answer was late while it finds some:
//
//   - GateNoHelp: hedges do not help. Of the operations in the last Window
//     that sent such a hedge, the share a hedge won is below MinWinRate
//     with 95% confidence (the upper Wilson bound: eleven lost and none
//     won, say). Under variance a hedge to another replica often answers
//     before the slow primary; under saturation the alternate is as slow,
//     and a hedge that starts a delay later seldom overtakes. Operations
//     that ran out of time count as lost; hedges sent while an adaptive
//     delay still warms up count neither way.
//   - GateSlowdown: the typical attempt has slowed down, and hedges are
//     slow too. The median of the last 128 accepted latencies (those of
//     the last two seconds: two slots of the latency window, see
//     Adaptive.Window; at least 64 of them) has reached Slowdown times its
//     baseline and 1ms more; the baseline is the lower quartile of the
//     one-second medians of the last five minutes (slots of 20 attempts or
//     more), leaving out those recorded while the median was up, unless it
//     stays up four minutes: then it is the new normal. Once five
//     operations have sent a hedge since the median rose, the gate shuts
//     unless half of them (60% to reopen) were won by a hedge that
//     answered within Slowdown times the baseline. Hedges that win at the
//     old speed show healthy alternates (one replica slow, the others not):
//     variance, which a risen median does not make overload.
//   - GateCapacity: Load reports the caller's concurrency limit 90% full.
//   - GateUnavailable: Load reports more than half the targets unavailable.
//
// Until hedges have shown that they help (no hedge in the window has won
// yet, or the median has risen and fewer than five operations have sent a
// hedge since), the gate is unproven: late-answer hedges go one operation
// at a time (a turn lasts until that operation ends, or a tenth of Window),
// so that a cold start into saturation spends a hedge per outcome rather
// than the budget's burst. A surge makes it unproven too, at once, as the
// one sign of overload that comes before any answer: when more of the last
// 32 operations were late than the window's share of late operations
// would make by chance (p < 1e-7), queues are filling faster than the
// median can show (it rises only as the queued reads come back). A hedge
// sent since the surge began that wins at the old speed proves it variance
// (one replica slowed down, the others did not); it ends when the late
// operations among the last 32 fall to half that count.
//
// Each signal has hysteresis: hedges must win 1.5 times MinWinRate before
// GateNoHelp clears; the median must fall below three quarters of Slowdown
// times its baseline before GateSlowdown clears; Load's signals clear once
// InUse is below 75% and at most half the targets are unavailable, and
// then only after a tenth of Window (a second) without them.
//
// While the gate is shut for the first two signals, which only hedges can
// disprove, a wanted hedge still goes out now and then as a probe, within
// the budget: the first a tenth of Window (a second) after the gate shut,
// and each probe that is not won at the old speed doubles the gap, up to
// half the Window, so a steady overload costs a probe every five seconds.
// A probe won at the old speed resets the gap. The gate reopens by itself
// within about one Window of the overload ending.
//
// Hedges sent at once because an attempt failed are failover, not
// variability: they neither wait for the gate nor count towards it, and
// the budget alone bounds them. The budget bounds every hedge in every
// state of the gate.
type Gate struct {
	// Window is how far back the outcomes of hedges count. Default 10s.
	Window time.Duration
	// MinWinRate is the share of hedged operations a hedge must win for
	// hedges to count as helping. Default 0.2; in (0, 0.5].
	MinWinRate float64
	// Slowdown is how many times its baseline the recent median latency
	// must be to count as a slowdown. Default 2; at least 1.
	Slowdown float64
	// Load, when non-nil, reports the caller's own evidence of overload,
	// which the engine cannot see. It is called at most every Window/1000
	// (10ms by default), on the request path, with the gate's lock held:
	// it must be fast, safe for concurrent use, and must not call the
	// Hedger.
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
	DefaultGateMinWinRate = 0.2
	DefaultGateSlowdown   = 2.0
)

const (
	gateSlots = 10

	// wilsonZ: GateNoHelp needs the win rate below MinWinRate with 95%
	// confidence (one-sided), on the upper bound of the Wilson interval.
	wilsonZ = 1.645
	// reopenWinFactor: hedges must win this many times MinWinRate for
	// GateNoHelp to clear.
	reopenWinFactor = 1.5
	// riseNeed: hedged operations since the median rose before their
	// speed can shut the gate; until then it is unproven.
	riseNeed = 5
	// fastWinShare and fastWinClear: the share of hedged operations won by
	// a hedge at the old speed that keeps GateSlowdown from shutting the
	// gate, and that clears it.
	fastWinShare = 0.5
	fastWinClear = 0.6
	// reopenSlowdownFactor: the median must fall below this share of
	// Slowdown times the baseline for the rise to end.
	reopenSlowdownFactor = 0.75
	// slowdownFloor: a rise smaller than this is jitter, not saturation.
	slowdownFloor = time.Millisecond
	// recentSamples and recentMinSamples: the recent median is that of the
	// last recentSamples accepted latencies of the last two slots, and
	// needs recentMinSamples of them (the median of 64 lognormal samples
	// with p99 = 15 × p50 varies by about 20%, so a doubling is no noise).
	recentSamples    = 128
	recentMinSamples = 64
	// slotMinSamples: a slot's median joins the baseline with this many.
	slotMinSamples = 20
	// surgeChance and surgeMin: a surge is a count of late operations
	// among the last 32 that the window's late share reaches by chance
	// with probability below surgeChance (one operation in ten million
	// would start one on a steady workload), and at least surgeMin: 7
	// with 1% of operations late, 12 with 5%, 15 with 10%, 24 with 30%.
	surgeChance = 1e-7
	surgeMin    = 4
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
	// Changes counts the changes of Shut since the Hedger was created: of
	// two states, the one with more changes is the later.
	Changes uint64
	// Unproven is set while hedges have not shown that they help (see
	// Gate): late-answer hedges then go one operation at a time.
	Unproven bool
	// Surge is set while the late share of the last 32 operations has
	// surged (see Gate), whether or not a hedge has proved it variance.
	Surge bool
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

// String explains the state in a line: "open" (and "unproven: ..." while
// hedges go one at a time), or "shut:" and the evidence of each signal
// that keeps it shut.
func (s GateState) String() string {
	if s.Open() {
		switch {
		case s.Unproven && s.Surge:
			return "open, unproven: late answers surged; late-answer hedges go one at a time until one wins at the old speed"
		case s.Unproven:
			return "open, unproven: late-answer hedges go one at a time until they show they help"
		}
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

// wilsonUpper returns the upper bound of the Wilson score interval for a
// share of wins out of n at z standard deviations (one-sided).
func wilsonUpper(wins, n int64, z float64) float64 {
	if n <= 0 {
		return 1
	}
	nf, p := float64(n), float64(wins)/float64(n)
	z2 := z * z
	return (p + z2/(2*nf) + z*math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))) / (1 + z2/nf)
}
