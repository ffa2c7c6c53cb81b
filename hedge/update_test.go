package hedge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// doTimed runs one operation over a target per latency given, and
// returns how long it took and how many attempts it launched.
func doTimed(t *testing.T, h *Hedger, lat ...time.Duration) (time.Duration, int, error) {
	t.Helper()
	var c collector
	start := time.Now()
	_, err := Do(t.Context(), h, Op[string]{Call: sleepy(lat...), Targets: []string{"a", "b", "c"}[:len(lat)], OnReceipt: c.receipt})
	took := time.Since(start)
	return took, c.last(t).AttemptsLaunched, err
}

// A new delay and attempt limit apply from the next operation; an
// operation under way keeps the policy it began with.
func TestUpdateDelayAndAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond})
		if took, n, err := doTimed(t, h, 50*time.Millisecond, 5*time.Millisecond); err != nil || took != 15*time.Millisecond || n != 2 {
			t.Fatalf("before: %v, %d attempts, %v; want 15ms, 2", took, n, err)
		}
		// An operation under way when the delay and limit change.
		var during time.Duration
		var wg sync.WaitGroup
		wg.Go(func() { during, _, _ = doTimed(t, h, 50*time.Millisecond, 5*time.Millisecond) })
		time.Sleep(5 * time.Millisecond)
		if err := h.Update(Policy{Delay: 30 * time.Millisecond, MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if during != 15*time.Millisecond {
			t.Errorf("operation under way at the change took %v, want 15ms: its own delay", during)
		}
		if d := h.Stats().Delay; d != 30*time.Millisecond {
			t.Errorf("delay after Update %v, want 30ms", d)
		}
		if took, n, _ := doTimed(t, h, 100*time.Millisecond, 100*time.Millisecond, 5*time.Millisecond); took != 65*time.Millisecond || n != 3 {
			t.Errorf("after: %v, %d attempts; want 65ms (a hedge at 30ms, another at 60ms), 3", took, n)
		}
		if err := h.Update(Policy{Delay: 30 * time.Millisecond, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		if took, n, _ := doTimed(t, h, 50*time.Millisecond, 5*time.Millisecond); took != 50*time.Millisecond || n != 1 {
			t.Errorf("one attempt: %v, %d attempts; want 50ms, 1", took, n)
		}
	})
}

// Switching from a fixed delay to an adaptive one keeps the latencies
// seen: the quantile applies at once, with no new warm-up.
func TestUpdateToAdaptiveKeepsTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{Delay: time.Second})
		for range 60 {
			doTimed(t, h, 4*time.Millisecond, 4*time.Millisecond)
		}
		if err := h.Update(Policy{Adaptive: Adaptive{Quantile: 0.5}}); err != nil {
			t.Fatal(err)
		}
		if d := h.Stats().Delay; d != 4*time.Millisecond {
			t.Errorf("adaptive p50 right after the change: %v, want 4ms from the latencies already seen (not the 10ms warm-up)", d)
		}
	})
}

// A shorter Timeout bounds the next operation.
func TestUpdateTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{Delay: time.Second})
		if err := h.Update(Policy{Delay: time.Second, Timeout: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		took, _, err := doTimed(t, h, 50*time.Millisecond, 50*time.Millisecond)
		if !errors.Is(err, context.DeadlineExceeded) || took != 20*time.Millisecond {
			t.Errorf("%v after %v, want DeadlineExceeded at 20ms", err, took)
		}
	})
}

// New gate settings start a fresh gate, whose changes count on from the
// old one's: a shut gate's replacement is reported as its reopening, and
// an observer that orders states by Changes never takes an old state for
// a newer one. Settings left as they are keep the gate, shut or not; a nil
// Load keeps the caller's function.
func TestUpdateGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var full atomic.Bool
		full.Store(true)
		var c eventCounts
		load := func() Load {
			if full.Load() {
				return Load{InUse: 1}
			}
			return Load{}
		}
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond, Observer: &c, Gate: Gate{Load: load}})
		for i := range 5 {
			gateDo(t, h, i, func(Attempt) time.Duration { return time.Millisecond })
			time.Sleep(20 * time.Millisecond)
		}
		shut := h.Stats().Gate
		if shut.Shut != GateCapacity {
			t.Fatalf("gate %v with the limit full, want shut for capacity", shut)
		}
		if err := h.Update(Policy{Delay: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats().Gate; st.Shut != GateCapacity || st.Changes != shut.Changes {
			t.Errorf("gate settings unchanged: %v, want the same gate, still shut", st)
		}
		if err := h.Update(Policy{Delay: 20 * time.Millisecond, Gate: Gate{Slowdown: 3}}); err != nil {
			t.Fatal(err)
		}
		changes := c.gateChanges()
		last := changes[len(changes)-1]
		if !last.Open() || last.Changes != shut.Changes+1 {
			t.Errorf("reported on new settings: %+v, want open, change %d", last, shut.Changes+1)
		}
		if p := h.Policy(); p.Gate.Slowdown != 3 || p.Gate.Load == nil {
			t.Errorf("policy gate %+v, want slowdown 3 and the load function kept", p.Gate)
		}
		// The load function is still weighed: the limit is still full.
		time.Sleep(20 * time.Millisecond)
		if st := h.Stats().Gate; st.Shut != GateCapacity || st.Changes != shut.Changes+2 {
			t.Errorf("fresh gate with the limit full: %v (change %d), want shut again, change %d", st, st.Changes, shut.Changes+2)
		}
		full.Store(false)
		if err := h.Update(Policy{Delay: 20 * time.Millisecond, Gate: Gate{Disabled: true}}); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			gateDo(t, h, i, func(a Attempt) time.Duration {
				return [2]time.Duration{40 * time.Millisecond, time.Millisecond}[min(a.Index, 1)]
			})
		}
		if hedged, _, _ := c.read(false); hedged < 5 {
			t.Errorf("gate turned off: %d late hedges of 5 reads", hedged)
		}
	})
}

// What cannot change is refused, and a refusal changes nothing.
func TestUpdateRejects(t *testing.T) {
	h := mustNew(t, Policy{Delay: 10 * time.Millisecond})
	for name, p := range map[string]Policy{
		"invalid":         {MaxAttempts: 9},
		"another budget":  {Budget: mustBudget(t, 0.5, 5)},
		"adaptive window": {Adaptive: Adaptive{Window: time.Minute}},
	} {
		if err := h.Update(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if p := h.Policy(); p.Delay != 10*time.Millisecond || p.MaxAttempts != 2 {
		t.Errorf("policy after refusals: %+v", p)
	}
	if err := h.Update(Policy{Budget: h.Policy().Budget, Delay: 5 * time.Millisecond}); err != nil {
		t.Errorf("its own budget: %v", err)
	}
}

// SetRates keeps the credits held, cut to a smaller burst, and never fills
// the budget for a larger one.
func TestBudgetSetRates(t *testing.T) {
	b := mustBudget(t, 0.1, 10)
	for range 4 {
		b.TrySpend()
	}
	if err := b.SetRates(0.5, 4); err != nil {
		t.Fatal(err)
	}
	if b.Credits() != 4 || b.Fraction() != 0.5 || b.Burst() != 4 {
		t.Errorf("after a smaller burst: %v credits, rates %v/%v; want 4, 0.5/4", b.Credits(), b.Fraction(), b.Burst())
	}
	if err := b.SetRates(0.5, 20); err != nil {
		t.Fatal(err)
	}
	if b.Credits() != 4 {
		t.Errorf("a larger burst filled the budget: %v credits, want 4", b.Credits())
	}
	b.Admit()
	b.Admit()
	if b.Credits() != 5 {
		t.Errorf("two admissions at 0.5: %v credits, want 5", b.Credits())
	}
	for _, bad := range [][2]float64{{-0.1, 5}, {1.1, 5}, {0.5, 0.5}} {
		if err := b.SetRates(bad[0], bad[1]); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetRates(%v, %v): %v", bad[0], bad[1], err)
		}
	}
	if b.Fraction() != 0.5 || b.Burst() != 20 {
		t.Errorf("refused rates changed the budget: %v/%v", b.Fraction(), b.Burst())
	}
}

// Updates while operations run, on real time under the race detector.
func TestUpdateConcurrentWithOperations(t *testing.T) {
	h := mustNew(t, Policy{Delay: time.Millisecond})
	b := h.Policy().Budget
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				Do(context.Background(), h, Op[string]{Call: sleepy(2*time.Millisecond, time.Millisecond), Targets: []string{"a", "b"}})
			}
		})
	}
	for i := range 50 {
		p := Policy{Delay: time.Duration(1+i%3) * time.Millisecond, MaxAttempts: 1 + i%3, Gate: Gate{Slowdown: float64(2 + i%2)}}
		if i%4 == 0 {
			p.Delay = 0
		}
		if err := h.Update(p); err != nil {
			t.Fatal(err)
		}
		if err := b.SetRates(float64(i%10)/10, float64(1+i%5)); err != nil {
			t.Fatal(err)
		}
		h.Stats()
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
}
