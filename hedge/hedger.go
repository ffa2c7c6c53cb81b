package hedge

import (
	"sync"
	"sync/atomic"
	"time"
)

// Hedger runs hedged operations under one Policy and keeps the state they
// share: the latency window behind the adaptive delay, the budget and the
// overload gate. Create one per logical endpoint (latencies of different
// endpoints should not mix) and share it between goroutines: it is safe for
// concurrent use. Update changes its policy while it runs.
type Hedger struct {
	class string // its name in a Classes, for the Observer's events

	// cur is the policy in force and the gate that goes with it. An
	// operation loads it once, as it starts, and keeps it to the end, so
	// that an Update never changes the rules of an operation under way.
	cur    atomic.Pointer[settings]
	update sync.Mutex // serialises Update
	budget *Budget
	delays *delayState
	obs    Observer
	wants  uint16 // bit k set: obs wants events of kind k
	notify func(GateState)

	// late is how late delay timers fire in this process (see lateness),
	// shared with the other Hedgers of a Classes.
	late *lateness

	// lastUsed is when an operation last started (coarse: Unix seconds),
	// for Classes to forget idle classes.
	lastUsed atomic.Int64

	// timers pools hedge-delay timers, possibly still armed: an operation
	// that never hedges then costs no timer allocation, and mostly no
	// timer operation at all (see delayTimer).
	timers sync.Pool // *delayTimer
}

// New returns a Hedger for p, or an error wrapping ErrInvalid that
// names the first invalid field.
func New(p Policy) (*Hedger, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	return newHedger(p, newLateness()), nil
}

// newHedger returns a Hedger for p, defaults filled in, whose timers are
// judged by late.
func newHedger(p Policy, late *lateness) *Hedger {
	d := newDelayState(p, late)
	h := &Hedger{
		budget: p.Budget,
		delays: d,
		obs:    p.Observer,
		late:   late,
	}
	if h.obs != nil {
		f, filtered := h.obs.(eventFilter)
		for k := EventStart; k <= EventGate; k++ {
			if !filtered || f.Wants(k) {
				h.wants |= 1 << k
			}
		}
	}
	if h.observes(EventGate) {
		h.notify = func(st GateState) { h.observe(Event{Kind: EventGate, Gate: &st}) }
	}
	h.cur.Store(&settings{p: p, gate: newGate(p.Gate, d.lat, h.notify)})
	return h
}

// settings are what an Update replaces at once: the policy and its gate.
type settings struct {
	p    Policy
	gate *gate
}

// Class returns the Hedger's class in its Classes ("" for a Hedger of its
// own).
func (h *Hedger) Class() string { return h.class }

// Policy returns the policy in force, with defaults filled in.
func (h *Hedger) Policy() Policy { return h.cur.Load().p }

// Stats is a point-in-time view of a Hedger's shared state.
type Stats struct {
	// Delay is the hedge delay new operations would use.
	Delay time.Duration
	// Expected is the median latency of recent accepted attempts (zero
	// until one is known); hedges are not sent with less time than this left.
	Expected time.Duration
	// P95 and P99 are the 95th and 99th percentiles of the latencies the
	// delay is learnt from (accepted attempts, and cancelled losers' lower
	// bounds) over the adaptive window; zero while none is known.
	P95, P99 time.Duration
	// Credits is the budget's current credit.
	Credits float64
	// Operations and WantedHedges count the operations in the gate's window
	// and how many of them wanted a hedge because an answer was late.
	Operations, WantedHedges int64
	// Gate is the overload gate's state: whether it is open, and its
	// evidence.
	Gate GateState
}

// Stats reports the Hedger's state now. It re-evaluates the gate if that
// is due, so the view is current even when no operation runs.
func (h *Hedger) Stats() Stats {
	now := time.Now()
	h.cur.Load().gate.tick(now)
	return h.statsAt(now)
}

// statsAt reports the Hedger's state at now: the gate as last evaluated,
// the counts of the window ending at now. It evaluates nothing, so a time
// far from the present cannot move the Hedger's clocks.
func (h *Hedger) statsAt(now time.Time) Stats {
	delay, expected, _ := h.delays.current(now)
	g := h.cur.Load().gate
	t := g.counts.totals(now)
	var p95, p99 time.Duration
	if s := h.delays.lat.SnapshotAt(now); s.Count() > 0 {
		p95, p99 = s.Quantile(0.95), s.Quantile(0.99)
	}
	return Stats{
		Delay:        delay,
		Expected:     expected,
		P95:          p95,
		P99:          p99,
		Credits:      h.budget.Credits(),
		Operations:   t[countOps],
		WantedHedges: t[countWanted],
		Gate:         g.snapshot(now),
	}
}

// Expected returns the median latency of recent accepted attempts (zero
// while unknown): a hedge is not sent with less time than this left, and
// a caller may refuse work that cannot finish within the client's
// deadline. It costs two atomic loads (refreshed every 100ms).
func (h *Hedger) Expected() time.Duration {
	_, expected, _ := h.delays.current(time.Now())
	return expected
}

// record notes the latency of an accepted attempt, or the lower bound of
// a cancelled loser's, for the delay and the gate in force (an operation
// that began under an earlier policy still measures the endpoint).
func (h *Hedger) record(now time.Time, l time.Duration) {
	h.delays.record(now, l)
	h.cur.Load().gate.record(now, l)
}

func (h *Hedger) observe(e Event) {
	if h.wants&(1<<e.Kind) != 0 {
		e.Class = h.class
		h.obs.Observe(e)
	}
}

// observes reports whether the observer wants events of kind k.
func (h *Hedger) observes(k EventKind) bool { return h.wants&(1<<k) != 0 }

// delayTimer returns a hedge-delay timer aimed at target, to be armed
// (delayTimer.arm).
func (h *Hedger) delayTimer(target *delayTarget) *delayTimer {
	d, ok := h.timers.Get().(*delayTimer)
	if !ok {
		d = &delayTimer{epoch: time.Now()}
		d.t = time.AfterFunc(time.Hour, d.fire)
		d.t.Stop()
	}
	d.target.Store(target)
	return d
}

// putDelayTimer takes d from its operation and pools it, armed or not,
// unless its function may be running into the operation: then it reports
// false, and leaves d to the garbage collector.
func (h *Hedger) putDelayTimer(d *delayTimer) bool {
	d.target.Store(nil)
	if d.firing.Load() != 0 {
		// fire may have loaded the target before it was cleared. (It adds
		// to firing before it loads the target, and both are sequentially
		// consistent: a fire that has not yet added finds no target.)
		return false
	}
	h.timers.Put(d)
	return true
}

// touch notes that an operation starts at now (see lastUsed). It writes
// only when the second changes, so that the operations of a busy Hedger
// do not take turns owning the cache line.
func (h *Hedger) touch(now time.Time) {
	if s := now.Unix(); h.lastUsed.Load() != s {
		h.lastUsed.Store(s)
	}
}

// delayTimer is a reusable hedge-delay timer. Its function is fixed when
// the timer is made, so the operation it serves is looked up at firing time.
//
// It is not stopped when its operation ends, and it is re-armed only when
// it is due later than the operation that takes it next needs it: most
// operations never touch the runtime's timers (arming and stopping one
// took 0.15-0.3 µs of BenchmarkInMemory's requests: see
// docs/performance.md). So it may fire early into an operation (see
// operation.onDelay), which arms it again for the rest of its delay, or
// into no operation at all, which costs a goroutine of the runtime's
// that finds no target: under a steady flow of requests about one firing
// per delay per timer in use; with a request now and then, about one per
// request.
type delayTimer struct {
	t      *time.Timer
	target atomic.Pointer[delayTarget]
	firing atomic.Int32 // fire calls under way (see putDelayTimer)
	due    atomic.Int64 // when t is armed to fire (ns from epoch); <= 0: not armed
	epoch  time.Time
}

// arm makes d fire wait after now, or earlier.
func (d *delayTimer) arm(now time.Time, wait time.Duration) {
	at := int64(now.Sub(d.epoch) + wait)
	if due := d.due.Load(); due > 0 && due <= at {
		return // it will fire by then, and be armed again if early
	}
	d.due.Store(at)
	d.t.Reset(wait)
}

// delayTarget is what a delayTimer fires into; an operation embeds one.
type delayTarget struct {
	op interface{ onDelay() }
}

func (d *delayTimer) fire() {
	d.firing.Add(1)
	d.due.Store(0) // fired: whoever arms it next arms it
	if t := d.target.Load(); t != nil {
		t.op.onDelay()
	}
	d.firing.Add(-1)
}
