package hedge

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// eventCounts counts a Hedger's events: hedges launched because an answer
// was late, hedges held by the gate or the budget, and gate changes.
type eventCounts struct {
	mu                    sync.Mutex
	lateHedges, failovers int
	gated, budget         int
	changes               []GateState
}

func (c *eventCounts) Observe(e Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.Kind {
	case EventLaunch:
		switch e.Attempt.Trigger {
		case TriggerDelay:
			c.lateHedges++
		case TriggerFailure:
			c.failovers++
		}
	case EventSuppress:
		switch e.Reason {
		case SuppressGate:
			c.gated++
		case SuppressBudget:
			c.budget++
		}
	case EventGate:
		c.changes = append(c.changes, *e.Gate)
	}
}

// read returns the counts so far, and resets them when reset is set.
func (c *eventCounts) read(reset bool) (hedged, gated, budget int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hedged, gated, budget = c.lateHedges, c.gated, c.budget
	if reset {
		c.lateHedges, c.gated, c.budget = 0, 0, 0
	}
	return
}

func (c *eventCounts) gateChanges() []GateState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]GateState(nil), c.changes...)
}

// latencies answers "ok" after lat(a), or returns early on cancellation.
func latencies(lat func(a Attempt) time.Duration) func(ctx context.Context, a Attempt) (string, error) {
	return func(ctx context.Context, a Attempt) (string, error) {
		t := time.NewTimer(lat(a))
		defer t.Stop()
		select {
		case <-t.C:
			return "ok", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// openLoop starts op(i) for i in [from, to) every `every`, each in its own
// goroutine as an open-loop client would, and returns when all have
// returned.
func openLoop(from, to int, every time.Duration, op func(i int)) {
	var wg sync.WaitGroup
	for i := from; i < to; i++ {
		wg.Go(func() { op(i) })
		time.Sleep(every)
	}
	wg.Wait()
}

// do runs one operation on h over targets a and b, primaries alternating.
func gateDo(t *testing.T, h *Hedger, i int, lat func(a Attempt) time.Duration) {
	_, err := Do(context.Background(), h, Op[string]{Call: latencies(lat), Targets: []string{"a", "b"}, First: i % 2})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Error(err)
	}
}

// A hedge that starts a delay after a primary as slow as itself never
// overtakes: the hedges do not help, the signature of saturation. Once the
// win rate is below MinWinRate with 95% confidence (eleven lost, none won),
// the gate shuts; it lets a probe through a second later and then ever
// more rarely while they lose, and reopens when the probes show hedges
// winning again: within one window. It says so once each way.
func TestGateShutsWhenHedgesDoNotHelp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c eventCounts
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond, Budget: mustBudget(t, 1, 1000), Observer: &c})
		same := func(Attempt) time.Duration { return 30 * time.Millisecond }
		for i := range 20 { // 50ms apart
			gateDo(t, h, i, same)
			time.Sleep(20 * time.Millisecond)
		}
		if hedged, gated, _ := c.read(true); hedged != 11 || gated != 9 {
			t.Fatalf("first 20 operations: %d hedged, %d gated; want 11 (all lost) and 9", hedged, gated)
		}
		for i := 20; i < 200; i++ { // 180 operations: 9s
			gateDo(t, h, i, same)
			time.Sleep(20 * time.Millisecond)
		}
		hedged, gated, _ := c.read(true)
		if hedged != 3 || gated != 177 {
			// A second after it shut, then 2s and 4s later: each loss doubles the gap.
			t.Errorf("gate shut for 9s: %d probes and %d gated of 180; want 3 probes (1, 3 and 7s after it shut)", hedged, gated)
		}
		st := h.Stats().Gate
		if st.Shut != GateNoHelp || st.HedgeWins != 0 || st.Hedged == 0 || st.Probes != int64(hedged) {
			t.Errorf("stats: %+v; want shut for noHelp by lost hedges, %d probes", st, hedged)
		}
		if s := st.String(); !strings.Contains(s, "hedges won 0 of") {
			t.Errorf("explanation %q", s)
		}

		// The alternates get fast again: probes win, and the gate reopens
		// within one window.
		recovered := time.Now()
		var reopened time.Duration
		for i := 200; i < 400 && reopened == 0; i++ {
			gateDo(t, h, i, func(a Attempt) time.Duration {
				if a.Index == 0 {
					return 40 * time.Millisecond
				}
				return time.Millisecond
			})
			time.Sleep(20 * time.Millisecond)
			if h.Stats().Gate.Open() {
				reopened = time.Since(recovered)
			}
		}
		t.Logf("reopened %v after the alternates got fast", reopened)
		if reopened == 0 || reopened > 10*time.Second {
			t.Fatalf("gate reopened %v after hedges helped again; want within the 10s window", reopened)
		}
		changes := c.gateChanges()
		if len(changes) != 2 || changes[0].Shut != GateNoHelp || !changes[1].Open() {
			t.Errorf("gate changes %+v; want one shut (noHelp) and one reopening", changes)
		}
		c.read(true)
		for i := range 20 {
			gateDo(t, h, i, func(a Attempt) time.Duration {
				return [2]time.Duration{40 * time.Millisecond, time.Millisecond}[min(a.Index, 1)]
			})
		}
		if hedged, gated, _ := c.read(false); hedged != 20 || gated != 0 {
			t.Errorf("after reopening: %d hedged, %d gated of 20", hedged, gated)
		}
	})
}

// The seeds' straggler workloads: a share of reads is slow on its primary
// and fast on the alternate. However large the share, the gate never holds
// such hedges; up to the budget's fraction every one is sent, and beyond it
// the budget (not the gate) says no.
func TestGateNeverHoldsHedgesThatHelp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   Policy
		every    int // one read in every is slow on its primary
		budgeted bool
	}{
		{"5% stragglers, fixed 10ms, default budget", Policy{Delay: 10 * time.Millisecond}, 20, false},
		{"5% stragglers, adaptive p95, default budget", Policy{}, 20, false},
		{"10% stragglers, fixed 10ms, budget 0.2", Policy{Delay: 10 * time.Millisecond, Budget: budget(0.2, 10)}, 10, false},
		{"20% stragglers, fixed 10ms, budget 0.25", Policy{Delay: 10 * time.Millisecond, Budget: budget(0.25, 10)}, 5, false},
		{"50% stragglers, fixed 10ms, default budget", Policy{Delay: 10 * time.Millisecond}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var c eventCounts
				p := tc.policy
				p.Observer = &c
				h := mustNew(t, p)
				const n = 2000 // 20s at 100/s: two gate windows
				openLoop(0, n, 10*time.Millisecond, func(i int) {
					gateDo(t, h, i, func(a Attempt) time.Duration {
						if a.Index == 0 && i%tc.every == tc.every-1 {
							return 40 * time.Millisecond
						}
						return time.Millisecond
					})
				})
				hedged, gated, budgeted := c.read(false)
				if gated != 0 || len(c.gateChanges()) != 0 {
					t.Errorf("%d hedges held by the gate, %d gate changes (%+v); want none", gated, len(c.gateChanges()), c.gateChanges())
				}
				slow := n / tc.every
				if !tc.budgeted && (hedged < slow-2 || budgeted > 2) {
					// The adaptive delay learns from the first 50 reads: a straggler among them may finish first.
					t.Errorf("%d of %d slow reads hedged, %d held by the budget", hedged, slow, budgeted)
				}
				if tc.budgeted {
					b := h.Policy().Budget
					limit := int(math.Ceil(b.Burst() + b.Fraction()*n))
					if hedged > limit || budgeted == 0 {
						t.Errorf("%d hedged (budget allows %d), %d held by the budget", hedged, limit, budgeted)
					}
				}
				if st := h.Stats().Gate; !st.Open() || st.WinRate() < 0.9 {
					t.Errorf("gate %+v", st)
				}
			})
		})
	}
}

func budget(fraction, burst float64) *Budget {
	b, err := NewBudget(fraction, burst)
	if err != nil {
		panic(err)
	}
	return b
}

// The typical attempt slows down against its own baseline: saturation,
// unless hedges sent since then win at the old speed. When the primaries
// slow but the alternates answer as fast as before (one replica slow), the
// gate is unproven for a moment (hedges one at a time), then five fast wins
// keep it open; when every attempt is slower, alternates included, it
// shuts and stays so; when the median falls back it reopens.
func TestGateSlowdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c eventCounts
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond, Budget: mustBudget(t, 1, 1000), Observer: &c})
		fast := func(Attempt) time.Duration { return time.Millisecond }
		// Three seconds at 1ms: the baseline.
		openLoop(0, 300, 10*time.Millisecond, func(i int) { gateDo(t, h, i, fast) })
		if st := h.Stats().Gate; !st.Open() || st.BaselineMedian == 0 || st.BaselineMedian > 1100*time.Microsecond {
			t.Fatalf("after 3s at 1ms: %+v", st)
		}
		// Primaries take 4ms now, one in 20 takes 40ms; hedges answer in
		// 1ms, as everything did before.
		slowPrimaries := func(i int) func(a Attempt) time.Duration {
			return func(a Attempt) time.Duration {
				switch {
				case a.Index > 0:
					return time.Millisecond
				case i%20 == 19:
					return 40 * time.Millisecond
				}
				return 4 * time.Millisecond
			}
		}
		c.read(true)
		var sawRise bool
		var mu sync.Mutex // the reads run in goroutines of their own
		openLoop(300, 1300, 10*time.Millisecond, func(i int) {
			gateDo(t, h, i, slowPrimaries(i))
			st := h.Stats().Gate
			mu.Lock()
			defer mu.Unlock()
			sawRise = sawRise || st.Unproven && st.RecentMedian > 3*st.BaselineMedian
		})
		st := h.Stats().Gate
		if hedged, gated, _ := c.read(false); !sawRise || gated != 0 || hedged != 50 || len(c.gateChanges()) != 0 {
			t.Errorf("slower primaries, alternates as fast as before: rise seen %v, %d hedged, %d gated, changes %v; want the rise, all 50 hedged, no change",
				sawRise, hedged, gated, c.gateChanges())
		}
		if !st.Open() || st.Unproven || st.RecentMedian < 3900*time.Microsecond || st.RiseFastWins < 5 || st.RiseFastWins != st.RiseHedged {
			t.Errorf("end of the phase: %v, median %v, %d of %d won at the old speed; want open, proven, the median still 4ms",
				st, st.RecentMedian, st.RiseFastWins, st.RiseHedged)
		}

		// Now every attempt takes 4ms, alternates too: hedges still win
		// against the 40ms primaries, but slowly. Once their outcomes
		// outweigh the old ones, the gate shuts and stays so.
		slower := func(i int) func(a Attempt) time.Duration {
			return func(a Attempt) time.Duration {
				if a.Index == 0 && i%20 == 19 {
					return 40 * time.Millisecond
				}
				return 4 * time.Millisecond
			}
		}
		openLoop(1300, 3800, 10*time.Millisecond, func(i int) { gateDo(t, h, i, slower(i)) })
		if st := h.Stats().Gate; st.Shut != GateSlowdown || st.HedgeWins == 0 {
			t.Errorf("alternates as slow as the primaries, median 4x its baseline: %v; want shut for the slowdown alone", st)
		}
		// Back to 1ms: the recent median falls and the gate reopens.
		openLoop(3800, 4100, 10*time.Millisecond, func(i int) { gateDo(t, h, i, fast) })
		if st := h.Stats().Gate; st.Shut&GateSlowdown != 0 {
			t.Errorf("3s after the slowdown ended: %v", st)
		}
	})
}

// The caller's own evidence: a concurrency limit 90% full, or most
// targets unavailable, shuts the gate with no probes; each clears with
// hysteresis and then only after a tenth of the window without it.
func TestGateLoadSignals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var load atomic.Pointer[Load]
		load.Store(&Load{})
		var c eventCounts
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond, Budget: mustBudget(t, 1, 1000), Observer: &c,
			Gate: Gate{Load: func() Load { return *load.Load() }}})
		// One read in five is slow on its primary; hedges are fast.
		late := func(i int) func(a Attempt) time.Duration {
			return func(a Attempt) time.Duration {
				if a.Index == 0 && i%5 == 4 {
					return 40 * time.Millisecond
				}
				return time.Millisecond
			}
		}
		phase := func(l Load, d time.Duration) (hedged, gated int) {
			load.Store(&l)
			c.read(true)
			openLoop(0, int(d/(4*time.Millisecond)), 4*time.Millisecond, func(i int) { gateDo(t, h, i, late(i)) })
			hedged, gated, _ = c.read(false)
			return
		}
		for _, step := range []struct {
			load      Load
			d         time.Duration
			shut      GateSignals // at the end of the step
			allHedged bool
		}{
			{Load{InUse: 0.5}, time.Second, 0, true},
			{Load{InUse: 0.95}, time.Second, GateCapacity, false},
			{Load{InUse: 0.8}, 3 * time.Second, GateCapacity, false}, // hysteresis: not below 75%
			{Load{InUse: 0.5}, 500 * time.Millisecond, GateCapacity, false},
			{Load{InUse: 0.5}, time.Second, 0, false}, // a second after it last tripped
			{Load{InUse: 0.5}, time.Second, 0, true},
			{Load{Unavailable: 2.0 / 3}, time.Second, GateUnavailable, false},
			{Load{Unavailable: 0.5, InUse: 0.9}, 500 * time.Millisecond, GateUnavailable | GateCapacity, false},
			{Load{Unavailable: 0.5}, 2 * time.Second, 0, false},
		} {
			hedged, gated := phase(step.load, step.d)
			st := h.Stats().Gate
			if st.Shut != step.shut || st.Load != step.load {
				t.Errorf("load %+v for %v: gate %v, load seen %+v; want %v", step.load, step.d, st.Shut, st.Load, step.shut)
			}
			if step.allHedged && gated != 0 {
				t.Errorf("load %+v: %d hedges gated", step.load, gated)
			}
			if step.shut != 0 && st.Probes != 0 {
				t.Errorf("load %+v: %d probes; the caller's evidence is not for hedges to disprove", step.load, st.Probes)
			}
			_ = hedged
		}
		if s := h.Stats().Gate.String(); s != "open" {
			t.Errorf("open gate explained as %q", s)
		}
	})
}

// Operations that run out of time with a hedge out count as hedges that did
// not help; callers who leave count as nothing.
func TestGateCountsTimeoutsAsLosses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// IgnoreDeadline: with the deadline check, hedges that cannot
		// finish in time are not sent at all.
		h := mustNew(t, Policy{Delay: 5 * time.Millisecond, Budget: mustBudget(t, 1, 1000), IgnoreDeadline: true})
		slow := latencies(func(Attempt) time.Duration { return 50 * time.Millisecond })
		for range 10 {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			Do(ctx, h, Op[string]{Call: slow, Targets: []string{"a", "b"}})
			time.Sleep(30 * time.Millisecond)
		}
		if st := h.Stats().Gate; st.Hedged != 0 || !st.Open() {
			t.Errorf("callers who left: %d hedged, gate %v; want no evidence", st.Hedged, st)
		}
		for range 11 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			Do(ctx, h, Op[string]{Call: slow, Targets: []string{"a", "b"}})
			cancel()
			time.Sleep(30 * time.Millisecond)
		}
		if st := h.Stats().Gate; st.Hedged != 11 || st.HedgeWins != 0 || st.Shut != GateNoHelp {
			t.Errorf("deadlines that passed: %d hedged, %d won, gate %v; want 11 lost hedges, shut", st.Hedged, st.HedgeWins, st)
		}
		// The policy's own Timeout counts the same.
		h = mustNew(t, Policy{Delay: 5 * time.Millisecond, Timeout: 20 * time.Millisecond, Budget: mustBudget(t, 1, 1000), IgnoreDeadline: true})
		for range 11 {
			Do(context.Background(), h, Op[string]{Call: slow, Targets: []string{"a", "b"}})
			time.Sleep(30 * time.Millisecond)
		}
		if st := h.Stats().Gate; st.Hedged != 11 || st.HedgeWins != 0 || st.Shut != GateNoHelp {
			t.Errorf("policy timeouts: %d hedged, %d won, gate %v; want 11 lost hedges, shut", st.Hedged, st.HedgeWins, st)
		}
	})
}

// A disabled gate never holds a hedge back, whatever the evidence.
func TestGateDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c eventCounts
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond, Budget: mustBudget(t, 1, 1000), Observer: &c,
			Gate: Gate{Disabled: true, Load: func() Load { return Load{InUse: 1, Unavailable: 1} }}})
		for i := range 50 {
			gateDo(t, h, i, func(Attempt) time.Duration { return 30 * time.Millisecond })
			time.Sleep(20 * time.Millisecond)
		}
		if hedged, gated, _ := c.read(false); hedged != 50 || gated != 0 || !h.Stats().Gate.Open() {
			t.Errorf("disabled gate: %d hedged, %d gated, %+v", hedged, gated, h.Stats().Gate)
		}
	})
}

func TestGateSignalsString(t *testing.T) {
	for s, want := range map[GateSignals]string{
		0:                            "none",
		GateNoHelp:                   "noHelp",
		GateSlowdown | GateCapacity:  "slowdown+capacity",
		GateNoHelp | GateUnavailable: "noHelp+unavailable",
	} {
		if got := s.String(); got != want {
			t.Errorf("%08b: %q, want %q", s, got, want)
		}
	}
	if got := (GateNoHelp | GateSlowdown | GateCapacity | GateUnavailable).Names(); len(got) != 4 || got[3] != "unavailable" {
		t.Errorf("Names: %v", got)
	}
}

// Until a hedge in the window has won, late-answer hedges go one operation
// at a time: twenty reads late at once on a cold gate send one hedge, not
// twenty. Once one has won, the next twenty all hedge at once.
func TestGateUnprovenHedgesGoOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c eventCounts
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond, Budget: mustBudget(t, 1, 1000), Observer: &c})
		if !h.Stats().Gate.Unproven {
			t.Error("a new gate is not unproven")
		}
		wave := func() (hedged, gated int) {
			c.read(true)
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Go(func() {
					gateDo(t, h, i, func(a Attempt) time.Duration {
						return [2]time.Duration{40 * time.Millisecond, time.Millisecond}[min(a.Index, 1)]
					})
				})
			}
			wg.Wait()
			hedged, gated, _ = c.read(false)
			return
		}
		if hedged, gated := wave(); hedged != 1 || gated != 19 {
			t.Errorf("cold, twenty late at once: %d hedged, %d gated; want 1 and 19", hedged, gated)
		}
		time.Sleep(20 * time.Millisecond) // past the next evaluation
		if st := h.Stats().Gate; st.Unproven || !st.Open() {
			t.Errorf("after a hedge won: %+v", st)
		}
		if hedged, gated := wave(); hedged != 20 || gated != 0 {
			t.Errorf("proven, twenty late at once: %d hedged, %d gated; want 20 and 0", hedged, gated)
		}
	})
}

// Variance with a heavy tail, at a low rate and with the default adaptive
// delay: every attempt draws its latency from one lognormal (p99 about 5x
// the median), so a hedge to the other target wins about 40% of the time,
// and helps. Over ten minutes at 10 reads a second the gate holds next to
// none of them: a few losses in a row are chance, not evidence. With a
// median of 20ms, the adaptive delay's 10ms warm-up guess makes the first
// fifty reads late; their hedges lose, and count for nothing.
func TestGateHeavyTailVarianceStaysOpen(t *testing.T) {
	for _, p50 := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			var c eventCounts
			h := mustNew(t, Policy{Observer: &c})
			rng := rand.New(rand.NewPCG(7, 8))
			var mu sync.Mutex
			draw := func() time.Duration {
				mu.Lock()
				defer mu.Unlock()
				return time.Duration(float64(p50) * math.Exp(0.7*rng.NormFloat64()))
			}
			openLoop(0, 6000, 100*time.Millisecond, func(i int) {
				d := [2]time.Duration{draw(), draw()}
				gateDo(t, h, i, func(a Attempt) time.Duration { return d[min(a.Index, 1)] })
			})
			hedged, gated, _ := c.read(false)
			if gated*100 > hedged+gated {
				t.Errorf("p50 %v: %d hedges held by the gate of %d wanted, %d gate changes; want under 1%%", p50, gated, hedged+gated, len(c.gateChanges()))
			}
			t.Logf("p50 %v: %d hedged, %d held, %d gate changes", p50, hedged, gated, len(c.gateChanges()))
		})
	}
}

// A median that hovers about the slowdown threshold while hedges keep
// winning at the old speed (primaries at 2.2ms for 8s, then 1.9ms for 2s,
// over and over, on a 1ms baseline; one read in ten straggles) must not
// make the gate flap: the rise holds until the median falls to 1.5x, and
// the fast wins since it rose keep the gate open throughout.
func TestGateSlowdownDoesNotFlapNearItsThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c eventCounts
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond, Budget: mustBudget(t, 1, 1000), Observer: &c})
		openLoop(0, 300, 10*time.Millisecond, func(i int) {
			gateDo(t, h, i, func(Attempt) time.Duration { return time.Millisecond })
		})
		c.read(true)
		start := time.Now()
		openLoop(300, 6300, 10*time.Millisecond, func(i int) {
			primary := 2200 * time.Microsecond
			if time.Since(start)%(10*time.Second) >= 8*time.Second {
				primary = 1900 * time.Microsecond
			}
			gateDo(t, h, i, func(a Attempt) time.Duration {
				switch {
				case a.Index > 0:
					return time.Millisecond
				case i%10 == 9:
					return 40 * time.Millisecond
				}
				return primary
			})
		})
		if hedged, gated, _ := c.read(false); gated != 0 || len(c.gateChanges()) != 0 {
			t.Errorf("a minute about the threshold: %d hedged, %d held, gate changes %v; want none held, no change", hedged, gated, c.gateChanges())
		}
	})
}

// A surge of late answers is the first sign of an overload, before any
// slow answer has come back to raise the median: after a steady spell with
// one read in twenty late, every read turns late. When the alternates are
// as slow (the queues are filling everywhere), hedges go one at a time
// once the late reads among the last 32 are more than chance would make
// (11 or 12 here); when only the primaries slowed down, the first hedge sent in
// the surge wins at the old speed and the rest go freely.
func TestGateSurge(t *testing.T) {
	for _, tc := range []struct {
		name      string
		alternate time.Duration // the hedges' latency once every read is late
		most      int           // late-answer hedges at most, of 30 late reads
		least     int           // at least
	}{
		{"alternates as slow: overload", 200 * time.Millisecond, 14, 10},
		{"alternates fast: one replica slowed down", time.Millisecond, 30, 29},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var c eventCounts
				h := mustNew(t, Policy{Delay: 10 * time.Millisecond, Budget: mustBudget(t, 1, 1000), Observer: &c})
				openLoop(0, 1000, 10*time.Millisecond, func(i int) {
					gateDo(t, h, i, func(a Attempt) time.Duration {
						if a.Index == 0 && i%20 == 19 {
							return 40 * time.Millisecond
						}
						return time.Millisecond
					})
				})
				if st := h.Stats().Gate; st.Unproven || st.Surge || !st.Open() {
					t.Fatalf("after the steady spell: %+v", st)
				}
				c.read(true)
				openLoop(1000, 1030, 10*time.Millisecond, func(i int) {
					gateDo(t, h, i, func(a Attempt) time.Duration {
						if a.Index == 0 {
							return 200 * time.Millisecond
						}
						return tc.alternate
					})
				})
				hedged, gated, _ := c.read(false)
				if hedged > tc.most || hedged < tc.least || hedged+gated != 30 {
					t.Errorf("30 late reads: %d hedged, %d held by the gate; want %d to %d hedged", hedged, gated, tc.least, tc.most)
				}
				if st := h.Stats().Gate; !st.Surge {
					t.Errorf("no surge seen: %+v", st)
				}
			})
		})
	}
}
