package hedge

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/internal/latency"
)

// Limits and defaults of a Policy.
const (
	// DefaultMaxAttempts is the number of attempts (primary included) an
	// operation may make unless the Policy says otherwise.
	DefaultMaxAttempts = 2
	// MaxAttemptsCap is the hard cap on attempts per operation, as in gRPC.
	MaxAttemptsCap = 5
	// DefaultObserveWindow is how long losers are watched after an operation
	// ends, to report their fate in the Receipt.
	DefaultObserveWindow = 100 * time.Millisecond
	// maxObserveWindow bounds how long any goroutine of ours may linger.
	maxObserveWindow = time.Minute
)

// Policy configures a Hedger. The zero Policy is useful: an adaptive delay at
// the p90 of recent accepted latencies (the quantile follows the budget),
// at most 2 attempts, a budget of 10% extra attempts with a burst of 10,
// and the overload gate on.
type Policy struct {
	// Delay is a fixed hedge delay: a hedge is sent when an attempt has not
	// produced an acceptable result after Delay. Zero means adaptive (see
	// Adaptive). Negative is an error. The timer is armed at the delay, not
	// early: a hedge goes out when the process's timer fires, which on a
	// busy host may be a fraction of a millisecond after it.
	Delay time.Duration

	// Adaptive configures the adaptive delay used when Delay is zero.
	Adaptive Adaptive

	// MaxAttempts caps attempts per operation, the primary included.
	// Default 2; at most MaxAttemptsCap. One disables hedging.
	MaxAttempts int

	// Budget limits duplicate work. Nil means a private budget with
	// DefaultBudgetFraction and DefaultBudgetBurst. Share one Budget between
	// Hedgers to give them a common limit.
	Budget *Budget

	// Gate configures the overload gate.
	Gate Gate

	// ObserveWindow is how long the fate of losing attempts is observed
	// after an operation ends. Default 100ms; at most one minute.
	ObserveWindow time.Duration

	// Timeout bounds each operation, hedges included, on top of whatever
	// deadline the caller's context has; when it passes, the attempts are
	// cancelled and Do returns an error wrapping context.DeadlineExceeded.
	// Zero means none; negative is an error.
	Timeout time.Duration

	// IgnoreDeadline turns off deadline awareness. By default a hedge is not
	// sent when the context's remaining time is below the median latency of
	// recent accepted attempts: it could not finish in time. Until the
	// Hedger has recorded an attempt there is no median to compare with,
	// and hedges are not held back for the deadline (the budget still
	// bounds them).
	IgnoreDeadline bool

	// Observer, when non-nil, is told about every attempt, suppression, win
	// and receipt. It is called synchronously and must be fast and safe for
	// concurrent use.
	Observer Observer
}

// Adaptive configures a delay that follows a quantile of the latencies of
// recent accepted attempts, as Finagle's backup requests do. Losing attempts
// cancelled at time t are recorded as taking t: they took at least that long,
// and recording them keeps the tail from being censored away, which would
// otherwise pull the delay down every time a hedge wins.
type Adaptive struct {
	// Quantile of recent latencies used as the delay, in (0, 1). Zero
	// follows the budget: 1 − Budget.Fraction(), within [0.5, 0.999] (p90
	// for the default 10%), as Finagle's BackupRequestFilter picks its
	// delay from its extra-load budget: the share of operations late past
	// the delay is what the budget can pay for, so a straggler share just
	// under the budget is hedged in full rather than sitting on the
	// boundary, where a fixed p95 over 5% stragglers landed.
	Quantile float64
	// Floor is the smallest delay. Default 1ms. The delay also never
	// drops below twice the 90th percentile of how late the process's own
	// hedge-delay timers fire (measured over the last 10s, once 32 have
	// fired): a read late by no more than that may be late only because
	// the process was busy, and a hedge would meet the same lateness. A
	// timer that fires 1.5ms or more late, after a stall, waits 1ms more
	// for answers that came in meanwhile before its hedge goes.
	Floor time.Duration
	// Ceiling is the largest delay. Default 1s.
	Ceiling time.Duration
	// MinSamples is how many latencies the window must hold before the
	// quantile is trusted. Default 50. Until then the delay is twice the
	// median of those known, once there are warmMedianSamples of them:
	// a class slower than Warmup (a 20ms search) would otherwise hedge
	// every read while it warms up and spend the budget the other classes'
	// stragglers need, and a fast one would wait Warmup for its first
	// stragglers' hedges.
	MinSamples int
	// Warmup is the delay used until the first latencies are known.
	// Default 10ms, clamped into [Floor, Ceiling].
	Warmup time.Duration
	// Window is how far back latencies count. Default 10s.
	Window time.Duration
}

const (
	minFollowQuantile = 0.5
	maxFollowQuantile = 0.999
	defaultFloor      = time.Millisecond
	defaultCeiling    = time.Second
	defaultMinSamples = 50
	defaultWarmup     = 10 * time.Millisecond
	// warmMedianSamples is how many latencies a warming-up delay needs
	// before it follows their median rather than Warmup.
	warmMedianSamples = 10
	defaultWindow     = 10 * time.Second
	// refreshEvery is how often the adaptive delay is recomputed from the
	// window; computing it per operation would cost more than the call.
	refreshEvery = 100 * time.Millisecond
)

// withDefaults returns p with zero fields replaced by defaults, or an error
// naming the first invalid field.
func (p Policy) withDefaults() (Policy, error) {
	if p.Delay < 0 {
		return p, fmt.Errorf("%w: negative delay %v", ErrInvalid, p.Delay)
	}
	if p.Timeout < 0 {
		return p, fmt.Errorf("%w: negative timeout %v", ErrInvalid, p.Timeout)
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxAttemptsCap {
		return p, fmt.Errorf("%w: max attempts %d outside [1, %d]", ErrInvalid, p.MaxAttempts, MaxAttemptsCap)
	}
	if p.ObserveWindow == 0 {
		p.ObserveWindow = DefaultObserveWindow
	}
	if p.ObserveWindow < 0 || p.ObserveWindow > maxObserveWindow {
		return p, fmt.Errorf("%w: observe window %v outside (0, %v]", ErrInvalid, p.ObserveWindow, maxObserveWindow)
	}
	a := &p.Adaptive
	if math.IsNaN(a.Quantile) || a.Quantile < 0 || a.Quantile >= 1 {
		return p, fmt.Errorf("%w: adaptive quantile %v outside (0, 1)", ErrInvalid, a.Quantile)
	}
	if a.Floor == 0 {
		a.Floor = defaultFloor
	}
	if a.Ceiling == 0 {
		a.Ceiling = defaultCeiling
	}
	if a.Floor < 0 || a.Ceiling < a.Floor {
		return p, fmt.Errorf("%w: adaptive floor %v and ceiling %v out of order", ErrInvalid, a.Floor, a.Ceiling)
	}
	if a.MinSamples == 0 {
		a.MinSamples = defaultMinSamples
	}
	if a.MinSamples < 0 {
		return p, fmt.Errorf("%w: negative adaptive min samples %d", ErrInvalid, a.MinSamples)
	}
	if a.Warmup == 0 {
		a.Warmup = defaultWarmup
	}
	if a.Warmup < 0 {
		return p, fmt.Errorf("%w: negative adaptive warm-up delay %v", ErrInvalid, a.Warmup)
	}
	a.Warmup = min(max(a.Warmup, a.Floor), a.Ceiling)
	if a.Window == 0 {
		a.Window = defaultWindow
	}
	if a.Window < 0 {
		return p, fmt.Errorf("%w: negative adaptive window %v", ErrInvalid, a.Window)
	}
	g := &p.Gate
	if g.Window == 0 {
		g.Window = DefaultGateWindow
	}
	if g.Window < 0 {
		return p, fmt.Errorf("%w: negative gate window %v", ErrInvalid, g.Window)
	}
	if g.MinWinRate == 0 {
		g.MinWinRate = DefaultGateMinWinRate
	}
	if math.IsNaN(g.MinWinRate) || g.MinWinRate < 0 || g.MinWinRate > fastWinShare {
		return p, fmt.Errorf("%w: gate min win rate %v outside (0, %v]", ErrInvalid, g.MinWinRate, fastWinShare)
	}
	if g.Slowdown == 0 {
		g.Slowdown = DefaultGateSlowdown
	}
	if math.IsNaN(g.Slowdown) || g.Slowdown < 1 {
		return p, fmt.Errorf("%w: gate slowdown %v below 1", ErrInvalid, g.Slowdown)
	}
	if p.Budget == nil {
		b, err := NewBudget(DefaultBudgetFraction, DefaultBudgetBurst)
		if err != nil {
			return p, err
		}
		p.Budget = b
	}
	return p, nil
}

// delayState computes and caches the hedge delay and the expected latency of
// an attempt. Reads are two atomic loads; a recomputation from the latency
// window happens at most every refreshEvery, by whichever caller wins a CAS.
type delayState struct {
	lat    *latency.Window
	origin time.Time // next counts nanoseconds from here
	budget *Budget   // an adaptive quantile of zero follows its fraction
	late   *lateness // the process's timer lateness: an adaptive delay's floor

	// mu guards the settings, which Hedger.Update changes, and orders
	// recomputations (one every refreshEvery: the lock costs nothing), so
	// that one under the old settings cannot store its delay after the
	// new settings' is in.
	mu       sync.Mutex
	fixed    time.Duration // > 0: fixed delay
	adaptive Adaptive

	next     atomic.Int64 // nanoseconds from origin of the next refresh
	delay    atomic.Int64 // current delay
	expected atomic.Int64 // median latency of recent accepted attempts; 0 unknown
	warm     atomic.Bool  // the delay is the adaptive warm-up guess
}

func newDelayState(p Policy, late *lateness) *delayState {
	d := &delayState{
		budget:   p.Budget,
		late:     late,
		origin:   time.Now(),
		fixed:    p.Delay,
		adaptive: p.Adaptive,
		lat:      latency.NewWindow(p.Adaptive.Window, 10),
	}
	if d.fixed > 0 {
		d.delay.Store(int64(d.fixed))
	} else {
		d.delay.Store(int64(p.Adaptive.Warmup))
		d.warm.Store(true)
	}
	return d
}

// set changes the delay's settings to p's and recomputes the delay at now
// from the latency window.
func (d *delayState) set(p Policy, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fixed, d.adaptive = p.Delay, p.Adaptive
	d.refreshLocked(now)
}

// record adds the latency of an accepted (or cancelled-losing) attempt.
func (d *delayState) record(now time.Time, l time.Duration) {
	d.lat.RecordAt(now, l)
}

// current returns the hedge delay and expected attempt latency at now, and
// whether the delay is an adaptive delay's warm-up guess.
func (d *delayState) current(now time.Time) (delay, expected time.Duration, warm bool) {
	n := int64(now.Sub(d.origin)) // the monotonic clock: a wall-clock step must not stop refreshes
	if next := d.next.Load(); n >= next && d.next.CompareAndSwap(next, n+int64(refreshEvery)) {
		d.mu.Lock()
		d.refreshLocked(now)
		d.mu.Unlock()
	}
	return time.Duration(d.delay.Load()), time.Duration(d.expected.Load()), d.warm.Load()
}

// refreshLocked recomputes the delay and expected latency at now. Called
// with d.mu held.
func (d *delayState) refreshLocked(now time.Time) {
	s := d.lat.SnapshotAt(now)
	if s.Count() > 0 {
		d.expected.Store(int64(s.Quantile(0.5)))
	} else {
		d.expected.Store(0)
	}
	if d.fixed > 0 {
		d.delay.Store(int64(d.fixed))
		d.warm.Store(false)
		return
	}
	a := d.adaptive
	floor := max(a.Floor, d.late.floor(now))
	delay, warm := a.Warmup, true
	switch n := s.Count(); {
	case n >= uint64(a.MinSamples):
		delay, warm = min(max(delayQuantile(s, d.quantile()), floor), a.Ceiling), false
	case n >= warmMedianSamples:
		delay = min(max(2*s.Quantile(0.5), floor), a.Ceiling)
	}
	d.delay.Store(int64(delay))
	d.warm.Store(warm)
}

// delayQuantile returns s's q-quantile as a hedge delay: interpolated
// within its bucket, the samples taken as spread evenly over it, rather
// than the bucket's midpoint Snapshot.Quantile reports. Over a class whose
// reads all take about the same time most of them share a bucket or two
// of the log-linear histogram (each 1/64 to 1/32 of its value wide: half
// a millisecond at 20ms), and a midpoint there can sit at the class's
// median: a delay at its p90 then hedged a quarter of its reads, and the
// budget they spent was the other classes' (lab classes' /search).
func delayQuantile(s *latency.Snapshot, q float64) time.Duration {
	rank := q * float64(s.Count())
	var seen float64
	out, found := s.Max(), false
	s.Buckets(func(lo, hi time.Duration, c uint64) {
		if found {
			return
		}
		if seen+float64(c) < rank {
			seen += float64(c)
			return
		}
		out, found = lo+time.Duration((rank-seen)/float64(c)*float64(hi-lo)), true
	})
	return min(max(out, s.Min()), s.Max())
}

// quantile returns the adaptive delay's quantile: the policy's, or the
// one that follows the budget. Called with d.mu held.
func (d *delayState) quantile() float64 {
	if q := d.adaptive.Quantile; q > 0 {
		return q
	}
	return min(max(1-d.budget.Fraction(), minFollowQuantile), maxFollowQuantile)
}

// ParseDelay parses a hedge delay as written on a command line: a Go
// duration ("25ms") for a fixed delay, "auto" for the default adaptive
// delay (its quantile follows the budget: fixed and quantile both zero), or
// "pNN" ("p95", "p99.9") for an adaptive delay at that percentile.
func ParseDelay(s string) (fixed time.Duration, quantile float64, err error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "auto":
		return 0, 0, nil
	case strings.HasPrefix(s, "p"):
		pct, perr := strconv.ParseFloat(s[1:], 64)
		if perr != nil || math.IsNaN(pct) || pct <= 0 || pct >= 100 || strings.ContainsAny(s[1:], "+-eExXpP_") {
			return 0, 0, fmt.Errorf("%w: delay %q: percentile must be a number in (0, 100), like p95 or p99.9", ErrInvalid, s)
		}
		return 0, pct / 100, nil
	}
	d, perr := time.ParseDuration(s)
	if perr != nil {
		return 0, 0, fmt.Errorf("%w: delay %q: want a duration like 25ms, auto, or a percentile like p95", ErrInvalid, s)
	}
	if d <= 0 {
		return 0, 0, fmt.Errorf("%w: delay %q must be positive", ErrInvalid, s)
	}
	return d, 0, nil
}
