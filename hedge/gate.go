package hedge

import (
	"sync"
	"sync/atomic"
	"time"
)

// Gate configures the overload gate. Hedging helps when a few attempts are
// slow; when many are, the system is overloaded rather than variable and a
// duplicate only adds load. The gate watches the share of operations that
// wanted a hedge because an answer was late (the delay expired) over a
// recent window, and pauses such hedges while that share exceeds Threshold
// (default 5%). With a fixed delay that is the whole rule. An adaptive delay
// at quantile q makes 1-q of operations late by construction (5% at the
// default p95), so a bare 5% limit would shut the gate on a healthy system
// about half the time; there the gate allows Threshold beyond those 1-q
// (10% for p95), and a workload with a steady 5% of stragglers keeps
// hedging while one where every request turns slow stops within
// MinOperations. The gate resumes by itself once the share falls back.
// Hedges sent at once because an attempt failed are failover, not
// variability: they neither count towards the gate nor wait for it, and
// are bounded by the budget alone.
type Gate struct {
	// Threshold is the share of operations that may want a hedge before
	// hedging pauses, counted beyond the 1-q an adaptive delay at quantile
	// q makes late by construction. Default 0.05; must be in (0, 1].
	Threshold float64
	// Window is how far back the share is measured. Default 10s.
	Window time.Duration
	// MinOperations is how many operations the window must hold before the
	// gate may close, so one slow request at start-up does not shut it.
	// Default 20.
	MinOperations int
	// Disabled turns the gate off (the budget still applies).
	Disabled bool
}

const (
	defaultGateThreshold = 0.05
	defaultGateWindow    = 10 * time.Second
	defaultGateMinOps    = 20
	gateSlots            = 10
)

// rateWindow counts operations and wanted hedges in rotating sub-windows.
// Adds are lock-free on the fast path; rotating into a stale slot takes a
// mutex, which happens once per slot width.
type rateWindow struct {
	width int64 // nanoseconds per slot
	mu    sync.Mutex
	slots [gateSlots]rateSlot
}

type rateSlot struct {
	epoch  atomic.Int64
	ops    atomic.Int64
	wanted atomic.Int64
}

func newRateWindow(span time.Duration) *rateWindow {
	w := int64(span) / gateSlots
	if w <= 0 {
		w = 1
	}
	return &rateWindow{width: w}
}

// slot returns the slot for now, cleared if it held an older epoch, or nil if
// now is older than the slot's epoch (a caller with a stale clock reading).
func (r *rateWindow) slot(now time.Time) *rateSlot {
	e := now.UnixNano() / r.width
	s := &r.slots[e%gateSlots]
	cur := s.epoch.Load()
	if cur == e {
		return s
	}
	if cur > e {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur = s.epoch.Load(); cur < e {
		s.ops.Store(0)
		s.wanted.Store(0)
		s.epoch.Store(e)
	} else if cur > e {
		return nil
	}
	return s
}

func (r *rateWindow) addOp(now time.Time) {
	if s := r.slot(now); s != nil {
		s.ops.Add(1)
	}
}

func (r *rateWindow) addWanted(now time.Time) {
	if s := r.slot(now); s != nil {
		s.wanted.Add(1)
	}
}

// totals sums the slots whose epoch lies within the window ending at now.
func (r *rateWindow) totals(now time.Time) (ops, wanted int64) {
	e := now.UnixNano() / r.width
	for i := range r.slots {
		s := &r.slots[i]
		if ep := s.epoch.Load(); ep > e-gateSlots && ep <= e {
			ops += s.ops.Load()
			wanted += s.wanted.Load()
		}
	}
	return ops, wanted
}

// gate is the runtime form of Gate.
type gate struct {
	disabled bool
	limit    float64 // intended share + threshold
	minOps   int64
	rates    *rateWindow
}

// newGate returns the gate for cfg, given the share of operations the
// delay makes late by construction (1-q for an adaptive delay, else 0).
func newGate(cfg Gate, intended float64) *gate {
	return &gate{
		disabled: cfg.Disabled,
		limit:    intended + cfg.Threshold,
		minOps:   int64(cfg.MinOperations),
		rates:    newRateWindow(cfg.Window),
	}
}

// open reports whether hedging may proceed at now.
func (g *gate) open(now time.Time) bool {
	if g.disabled {
		return true
	}
	ops, wanted := g.rates.totals(now)
	if ops < g.minOps || ops == 0 {
		return true
	}
	return float64(wanted)/float64(ops) <= g.limit
}
