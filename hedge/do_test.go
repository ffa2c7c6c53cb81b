package hedge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// collector gathers receipts and events for assertions.
type collector struct {
	mu       sync.Mutex
	receipts []Receipt
	events   []Event
}

func (c *collector) receipt(r Receipt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.receipts = append(c.receipts, r)
}

func (c *collector) Observe(e Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.Receipt = nil // not ours to keep
	c.events = append(c.events, e)
}

// last returns the latest receipt once every goroutine of the bubble has
// settled: receipts may be delivered after Do returns.
func (c *collector) last(t *testing.T) Receipt {
	t.Helper()
	synctest.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.receipts) == 0 {
		t.Fatal("no receipt delivered")
	}
	return c.receipts[len(c.receipts)-1]
}

func (c *collector) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.receipts)
}

func (c *collector) count(k EventKind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func mustNew(t *testing.T, p Policy) *Hedger {
	t.Helper()
	h, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// sleepy returns a call that answers "target-N" after lat[target], honouring
// cancellation.
func sleepy(lat ...time.Duration) func(ctx context.Context, a Attempt) (string, error) {
	return func(ctx context.Context, a Attempt) (string, error) {
		t := time.NewTimer(lat[a.Target])
		defer t.Stop()
		select {
		case <-t.C:
			return fmt.Sprintf("target-%d", a.Target), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

func checkInvariant(t *testing.T, r Receipt) {
	t.Helper()
	if r.CancellationsRequested != r.CancellationsObserved+r.LateCompletions+r.Unobserved {
		t.Errorf("receipt: requested %d != observed %d + late %d + unobserved %d",
			r.CancellationsRequested, r.CancellationsObserved, r.LateCompletions, r.Unobserved)
	}
	if r.AttemptsLaunched != len(r.Attempts) {
		t.Errorf("receipt: launched %d but %d attempt records", r.AttemptsLaunched, len(r.Attempts))
	}
	for _, a := range r.Attempts {
		if a.Fate == FateRunning {
			t.Errorf("final receipt holds a running attempt: %+v", a)
		}
	}
}

func TestFixedDelayHedgeWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c collector
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond, Observer: &c})
		start := time.Now()
		v, err := Do(t.Context(), h, Op[string]{
			Call:      sleepy(50*time.Millisecond, 5*time.Millisecond),
			Targets:   []string{"a", "b"},
			OnReceipt: c.receipt,
		})
		if err != nil || v != "target-1" {
			t.Fatalf("got %q, %v; want target-1", v, err)
		}
		if got := time.Since(start); got != 15*time.Millisecond {
			t.Errorf("latency %v, want exactly 15ms (10ms delay + 5ms hedge)", got)
		}
		synctest.Wait()
		r := c.last(t)
		checkInvariant(t, r)
		if r.Outcome != OutcomeWon || r.WinnerAttempt != 1 || r.WinnerTarget != 1 || r.WinnerTargetName != "b" {
			t.Errorf("winner: %+v", r)
		}
		if r.WinnerLatency.Duration() != 15*time.Millisecond || r.Delay.Duration() != 10*time.Millisecond {
			t.Errorf("latency %v delay %v", r.WinnerLatency.Duration(), r.Delay.Duration())
		}
		if r.AttemptsLaunched != 2 || r.CancellationsRequested != 1 || r.CancellationsObserved != 1 {
			t.Errorf("counts: %+v", r)
		}
		if a := r.Attempts[1]; a.Trigger != TriggerDelay || a.Start.Duration() != 10*time.Millisecond || a.Fate != FateWon {
			t.Errorf("hedge record: %+v", a)
		}
		if a := r.Attempts[0]; a.Fate != FateCanceled || a.Duration.Duration() != 15*time.Millisecond {
			t.Errorf("primary record: %+v", a)
		}
		if c.count(EventLaunch) != 2 || c.count(EventWin) != 1 || c.count(EventReceipt) != 1 || c.count(EventStart) != 1 {
			t.Errorf("events: %+v", c.events)
		}
	})
}

func TestFastPrimaryNoHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c collector
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond})
		v, err := Do(t.Context(), h, Op[string]{Call: sleepy(3*time.Millisecond, time.Millisecond), Targets: []string{"a", "b"}, OnReceipt: c.receipt})
		if err != nil || v != "target-0" {
			t.Fatalf("got %q, %v", v, err)
		}
		r := c.last(t)
		checkInvariant(t, r)
		if r.AttemptsLaunched != 1 || r.CancellationsRequested != 0 || r.HedgesSuppressed.Total() != 0 {
			t.Errorf("receipt: %+v", r)
		}
	})
}

func TestAttemptFromMarksContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{Delay: time.Millisecond})
		var marks [2]atomic.Bool
		_, err := Do(t.Context(), h, Op[int]{Call: func(ctx context.Context, a Attempt) (int, error) {
			got, ok := AttemptFrom(ctx)
			marks[a.Index].Store(ok && got.IsHedge())
			if !ok || got != a {
				t.Errorf("AttemptFrom = %+v, %v; want %+v", got, ok, a)
			}
			if a.Index == 0 {
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return 1, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if marks[0].Load() || !marks[1].Load() {
			t.Errorf("IsHedge: primary %v hedge %v", marks[0].Load(), marks[1].Load())
		}
		if _, ok := AttemptFrom(context.Background()); ok {
			t.Error("AttemptFrom(Background) found an attempt")
		}
	})
}

func TestAdaptiveDelayFollowsQuantile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{Adaptive: Adaptive{Warmup: 7 * time.Millisecond, MinSamples: 20, Floor: time.Millisecond, Ceiling: 40 * time.Millisecond}})
		if got := h.Stats().Delay; got != 7*time.Millisecond {
			t.Fatalf("warm-up delay %v, want 7ms", got)
		}
		run := func(n int, lat time.Duration) {
			for range n {
				if _, err := Do(t.Context(), h, Op[string]{Call: sleepy(lat)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		run(warmMedianSamples-1, 4*time.Millisecond)
		time.Sleep(refreshEvery)
		if got := h.Stats().Delay; got != 7*time.Millisecond {
			t.Fatalf("delay %v with %d samples, want warm-up 7ms", got, warmMedianSamples-1)
		}
		// From warmMedianSamples on, twice their median: above Warmup
		// here, so that a class slower than Warmup does not hedge every
		// read while it warms up.
		run(19-(warmMedianSamples-1), 4*time.Millisecond)
		time.Sleep(refreshEvery)
		if got := h.Stats().Delay; got < 7800*time.Microsecond || got > 8200*time.Microsecond {
			t.Fatalf("delay %v with 19 of 20 samples, want ~8ms (twice their 4ms median)", got)
		}
		run(1, 4*time.Millisecond)
		time.Sleep(refreshEvery)
		st := h.Stats()
		if st.Delay < 3900*time.Microsecond || st.Delay > 4100*time.Microsecond {
			t.Errorf("delay %v after warm-up, want ~4ms (p95 of 4ms samples)", st.Delay)
		}
		if st.Expected < 3900*time.Microsecond || st.Expected > 4100*time.Microsecond {
			t.Errorf("expected latency %v, want ~4ms", st.Expected)
		}
		// Ceiling clamps: every attempt now takes 100ms, but hedges (to the
		// same single target) also take 100ms, so losers are censored.
		h2 := mustNew(t, Policy{Adaptive: Adaptive{MinSamples: 5, Ceiling: 40 * time.Millisecond}, Gate: Gate{Disabled: true}})
		for range 10 {
			if _, err := Do(t.Context(), h2, Op[string]{Call: sleepy(100 * time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(refreshEvery)
		if got := h2.Stats().Delay; got != 40*time.Millisecond {
			t.Errorf("delay %v, want the 40ms ceiling", got)
		}
		// Floor clamps.
		h3 := mustNew(t, Policy{Adaptive: Adaptive{MinSamples: 5, Floor: 2 * time.Millisecond}})
		for range 10 {
			if _, err := Do(t.Context(), h3, Op[string]{Call: sleepy(100 * time.Microsecond)}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(refreshEvery)
		if got := h3.Stats().Delay; got != 2*time.Millisecond {
			t.Errorf("delay %v, want the 2ms floor", got)
		}
		synctest.Wait()
	})
}

// TestAdaptiveDelayNotCensored checks that hedges winning does not drag the
// adaptive delay down: cancelled slow primaries count at their elapsed time.
func TestAdaptiveDelayNotCensored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{
			Adaptive: Adaptive{Quantile: 0.9, MinSamples: 10, Warmup: 20 * time.Millisecond},
			Budget:   mustBudget(t, 1, 1000),
			Gate:     Gate{Disabled: true},
		})
		// 20% of primaries take 100ms, the rest 10ms; hedges take 10ms.
		for i := range 200 {
			slow := i%5 == 0
			_, err := Do(t.Context(), h, Op[string]{
				Targets: []string{"a", "b"},
				Call: func(ctx context.Context, a Attempt) (string, error) {
					lat := 10 * time.Millisecond
					if a.Index == 0 && slow {
						lat = 100 * time.Millisecond
					}
					return sleepy(lat, lat)(ctx, a)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Without the censored samples, p90 of accepted attempts is 10ms and
		// the delay would collapse onto the body of the distribution.
		if got := h.Stats().Delay; got < 15*time.Millisecond {
			t.Errorf("delay %v: collapsed onto the fast mode; slow cancelled primaries must count", got)
		}
		synctest.Wait()
	})
}

func mustBudget(t *testing.T, fraction, burst float64) *Budget {
	t.Helper()
	b, err := NewBudget(fraction, burst)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestErrorLaunchesHedgeAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c collector
		h := mustNew(t, Policy{Delay: 50 * time.Millisecond})
		start := time.Now()
		v, err := Do(t.Context(), h, Op[string]{
			Targets: []string{"a", "b"},
			Call: func(ctx context.Context, a Attempt) (string, error) {
				if a.Index == 0 {
					time.Sleep(2 * time.Millisecond)
					return "", errors.New("connection reset")
				}
				return sleepy(0, 3*time.Millisecond)(ctx, a)
			},
			OnReceipt: c.receipt,
		})
		if err != nil || v != "target-1" {
			t.Fatalf("got %q, %v", v, err)
		}
		if got := time.Since(start); got != 5*time.Millisecond {
			t.Errorf("latency %v, want 5ms: the hedge must go at once, not after the 50ms delay", got)
		}
		r := c.last(t)
		checkInvariant(t, r)
		if a := r.Attempts[1]; a.Trigger != TriggerFailure || a.Start.Duration() != 2*time.Millisecond {
			t.Errorf("hedge record %+v", a)
		}
		if a := r.Attempts[0]; a.Fate != FateFailed || a.Error != "connection reset" {
			t.Errorf("primary record %+v", a)
		}
	})
}

func TestRefusedFastResultLosesToSlowAcceptable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var released []int
		var mu sync.Mutex
		h := mustNew(t, Policy{Delay: 50 * time.Millisecond})
		v, err := Do(t.Context(), h, Op[int]{
			Targets: []string{"a", "b"},
			Call: func(ctx context.Context, a Attempt) (int, error) {
				if a.Index == 0 {
					time.Sleep(time.Millisecond)
					return 500, nil
				}
				time.Sleep(30 * time.Millisecond)
				return 200, nil
			},
			Accept: func(status int, err error) error {
				if err == nil && status >= 500 {
					return fmt.Errorf("status %d", status)
				}
				return err
			},
			Release: func(status int) {
				mu.Lock()
				released = append(released, status)
				mu.Unlock()
			},
		})
		if err != nil || v != 200 {
			t.Fatalf("got %d, %v; want the slow 200", v, err)
		}
		synctest.Wait() // Release may run after Do returns
		mu.Lock()
		defer mu.Unlock()
		if len(released) != 1 || released[0] != 500 {
			t.Errorf("released %v, want the refused 500", released)
		}
	})
}

func TestAllAttemptsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c collector
		h := mustNew(t, Policy{Delay: 50 * time.Millisecond, MaxAttempts: 3})
		boom := errors.New("boom")
		_, err := Do(t.Context(), h, Op[int]{
			Targets:   []string{"a", "b"},
			Call:      func(ctx context.Context, a Attempt) (int, error) { return 0, boom },
			OnReceipt: c.receipt,
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err %v, want boom", err)
		}
		r := c.last(t)
		checkInvariant(t, r)
		if r.Outcome != OutcomeFailed || r.AttemptsLaunched != 3 || r.HedgesSuppressed.MaxAttempts != 1 || r.WinnerAttempt != -1 {
			t.Errorf("receipt %+v", r)
		}
		// Targets wrap around once every target has been tried.
		if r.Attempts[0].Target != 0 || r.Attempts[1].Target != 1 || r.Attempts[2].Target != 0 {
			t.Errorf("targets %+v", r.Attempts)
		}

		// A refused result comes back, unreleased, with ErrNotAccepted.
		var releases atomic.Int32
		v, err := Do(t.Context(), h, Op[int]{
			Call:    func(ctx context.Context, a Attempt) (int, error) { return 503, nil },
			Accept:  func(v int, err error) error { return fmt.Errorf("status %d", v) },
			Release: func(int) { releases.Add(1) },
		})
		if !errors.Is(err, ErrNotAccepted) || v != 503 {
			t.Fatalf("got %d, %v; want 503 with ErrNotAccepted", v, err)
		}
		synctest.Wait() // Release may run after Do has returned (its contract): let the attempts end
		if got := releases.Load(); got != 2 {
			t.Errorf("released %d refused results, want 2 (all but the returned one)", got)
		}
	})
}

func TestLateCompletionAndUnobserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c collector
		var released atomic.Int32
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond, MaxAttempts: 3, ObserveWindow: 100 * time.Millisecond})
		// The primary, told to stop, returns its result anyway (its work
		// was done); the first hedge ignores cancellation for 500ms; the
		// second wins.
		lat := []time.Duration{60 * time.Millisecond, 520 * time.Millisecond, 0}
		start := time.Now()
		v, err := Do(t.Context(), h, Op[int]{
			Targets: []string{"a", "b", "c"},
			Call: func(ctx context.Context, a Attempt) (int, error) {
				if a.Index == 0 {
					select {
					case <-time.After(lat[0]):
					case <-ctx.Done():
					}
					return 0, nil
				}
				time.Sleep(lat[a.Index])
				return a.Index, nil
			},
			Release:   func(int) { released.Add(1) },
			OnReceipt: c.receipt,
		})
		if err != nil || v != 2 {
			t.Fatalf("got %d, %v", v, err)
		}
		if d := time.Since(start); d != 20*time.Millisecond {
			t.Fatalf("winner after %v, want 20ms", d)
		}
		time.Sleep(99 * time.Millisecond)
		synctest.Wait()
		if c.n() != 0 {
			t.Fatal("receipt delivered before the window closed")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		r := c.last(t)
		checkInvariant(t, r)
		if r.CancellationsRequested != 2 || r.LateCompletions != 1 || r.Unobserved != 1 || r.CancellationsObserved != 0 {
			t.Errorf("receipt %+v", r)
		}
		if r.Attempts[0].Fate != FateLate || r.Attempts[0].Duration.Duration() != 20*time.Millisecond {
			t.Errorf("primary %+v", r.Attempts[0])
		}
		if r.Attempts[1].Fate != FateUnobserved || r.Attempts[1].Duration != 0 {
			t.Errorf("first hedge %+v", r.Attempts[1])
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := released.Load(); got != 2 {
			t.Errorf("released %d results, want 2: late and unobserved results are freed too", got)
		}
		if r2 := c.last(t); r2.Attempts[1].Fate != FateUnobserved {
			t.Errorf("receipt changed after delivery: %+v", r2.Attempts[1])
		}
	})
}

func TestParentCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c collector
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond})
		ctx, cancel := context.WithTimeout(t.Context(), 25*time.Millisecond)
		defer cancel()
		_, err := Do(ctx, h, Op[string]{Call: sleepy(time.Second, time.Second), Targets: []string{"a", "b"}, OnReceipt: c.receipt})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
		synctest.Wait()
		r := c.last(t)
		checkInvariant(t, r)
		if r.Outcome != OutcomeCanceled || r.CancellationsRequested != 2 || r.CancellationsObserved != 2 {
			t.Errorf("receipt %+v", r)
		}
		// An already-ended context launches nothing.
		calls := 0
		_, err = Do(ctx, h, Op[string]{Call: func(context.Context, Attempt) (string, error) { calls++; return "", nil }})
		if !errors.Is(err, context.DeadlineExceeded) || calls != 0 {
			t.Errorf("err %v calls %d", err, calls)
		}
	})
}

func TestDeadlineSuppressesHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c collector
		h := mustNew(t, Policy{Delay: 5 * time.Millisecond})
		// Teach the hedger that attempts take 30ms.
		for range 5 {
			if _, err := Do(t.Context(), h, Op[string]{Call: sleepy(30 * time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(refreshEvery)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, _ = Do(ctx, h, Op[string]{Call: sleepy(30*time.Millisecond, time.Millisecond), Targets: []string{"a", "b"}, OnReceipt: c.receipt})
		synctest.Wait()
		r := c.last(t)
		if r.HedgesSuppressed.Deadline != 1 || r.AttemptsLaunched != 1 {
			t.Errorf("receipt %+v: 15ms left is less than the 30ms an attempt takes", r)
		}
		// With IgnoreDeadline the hedge goes.
		// (The gate off: these lessons send hedges as slow as their
		// primaries, which would shut it.)
		h2 := mustNew(t, Policy{Delay: 5 * time.Millisecond, IgnoreDeadline: true, Gate: Gate{Disabled: true}})
		for range 5 {
			_, _ = Do(t.Context(), h2, Op[string]{Call: sleepy(30 * time.Millisecond)})
		}
		time.Sleep(refreshEvery)
		ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel2()
		v, err := Do(ctx2, h2, Op[string]{Call: sleepy(30*time.Millisecond, time.Millisecond), Targets: []string{"a", "b"}})
		if err != nil || v != "target-1" {
			t.Errorf("got %q, %v", v, err)
		}
		synctest.Wait()
	})
}

func TestBudgetLimitsHedgesThroughDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c collector
		const n, fraction, burst = 200, 0.1, 3
		h := mustNew(t, Policy{Delay: time.Millisecond, Budget: mustBudget(t, fraction, burst), Gate: Gate{Disabled: true}})
		for range n {
			_, err := Do(t.Context(), h, Op[string]{Call: sleepy(5*time.Millisecond, 2*time.Millisecond), Targets: []string{"a", "b"}, OnReceipt: c.receipt})
			if err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		hedges, suppressed := 0, 0
		for _, r := range c.receipts {
			hedges += r.AttemptsLaunched - 1
			suppressed += r.HedgesSuppressed.Budget
		}
		if limit := burst + fraction*n; float64(hedges) > limit {
			t.Errorf("%d hedges, over the budget's %v", hedges, limit)
		}
		if hedges < 20 || hedges+suppressed != n {
			t.Errorf("hedges %d suppressed %d: every operation wanted one and the budget allowed ~23", hedges, suppressed)
		}
	})
}

func TestCapacityAndNoTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c collector
		h := mustNew(t, Policy{Delay: time.Millisecond})
		budget := h.budget.Credits()
		_, err := Do(t.Context(), h, Op[string]{
			Call: sleepy(5*time.Millisecond, time.Millisecond), Targets: []string{"a", "b"},
			Steering: steerFuncs{pick: func(a Attempt, _ []int) (int, error) {
				if a.Index > 0 {
					return 0, ErrNoCapacity
				}
				return 0, nil
			}},
			OnReceipt: c.receipt,
		})
		if err != nil {
			t.Fatal(err)
		}
		r := c.last(t)
		if r.HedgesSuppressed.Capacity != 1 || r.AttemptsLaunched != 1 {
			t.Errorf("receipt %+v", r)
		}
		if got := h.budget.Credits(); got < budget {
			t.Errorf("credits %v after a refused hedge, want the refund back to %v", got, budget)
		}
		_, err = Do(t.Context(), h, Op[string]{
			Call: sleepy(5*time.Millisecond, time.Millisecond), Targets: []string{"a", "b"},
			Steering: steerFuncs{pick: func(a Attempt, used []int) (int, error) {
				if a.Index == 0 {
					return 0, nil
				}
				return 0, ErrNoTarget
			}},
			OnReceipt: c.receipt,
		})
		if err != nil {
			t.Fatal(err)
		}
		if r := c.last(t); r.HedgesSuppressed.NoTarget != 1 {
			t.Errorf("receipt %+v", r)
		}
		_, err = Do(t.Context(), h, Op[string]{
			Call:     sleepy(time.Millisecond),
			Steering: steerFuncs{pick: func(Attempt, []int) (int, error) { return 0, ErrNoTarget }},
		})
		if !errors.Is(err, ErrNoTarget) {
			t.Errorf("err %v, want ErrNoTarget", err)
		}
		// A picker returning an out-of-range target is treated as none.
		_, err = Do(t.Context(), h, Op[string]{
			Call:     sleepy(time.Millisecond),
			Steering: steerFuncs{pick: func(Attempt, []int) (int, error) { return 3, nil }},
		})
		if !errors.Is(err, ErrNoTarget) {
			t.Errorf("err %v, want ErrNoTarget", err)
		}
		synctest.Wait()
	})
}

func TestPickSeesUsedTargets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{Delay: time.Millisecond, MaxAttempts: 3, Gate: Gate{Disabled: true}})
		var seen [][]int
		_, err := Do(t.Context(), h, Op[string]{
			Call:    sleepy(10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond),
			Targets: []string{"a", "b", "c"},
			Steering: steerFuncs{pick: func(a Attempt, used []int) (int, error) {
				seen = append(seen, append([]int(nil), used...))
				return 2 - a.Index, nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if fmt.Sprint(seen) != "[[] [2] [2 1]]" {
			t.Errorf("Pick saw %v", seen)
		}
	})
}

func TestFirstRotatesTargets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c collector
		h := mustNew(t, Policy{Delay: time.Millisecond})
		_, err := Do(t.Context(), h, Op[string]{Call: sleepy(time.Millisecond, 5*time.Millisecond, 5*time.Millisecond), Targets: []string{"a", "b", "c"}, First: -1, OnReceipt: c.receipt})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		r := c.last(t)
		if r.Attempts[0].Target != 2 || r.Attempts[1].Target != 0 {
			t.Errorf("First -1 over 3 targets: attempts %+v", r.Attempts)
		}
	})
}

func TestConcurrentOperations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c collector
		h := mustNew(t, Policy{Delay: 2 * time.Millisecond, Budget: mustBudget(t, 1, 1000), Gate: Gate{Disabled: true}, Observer: &c})
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				lat := time.Duration(i%7) * time.Millisecond
				if _, err := Do(t.Context(), h, Op[string]{Call: sleepy(lat, time.Millisecond), Targets: []string{"a", "b"}, OnReceipt: c.receipt}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		if c.n() != 50 {
			t.Fatalf("%d receipts", c.n())
		}
		for _, r := range c.receipts {
			checkInvariant(t, r)
		}
	})
}

func TestDoRejectsNilCall(t *testing.T) {
	h := mustNew(t, Policy{})
	if _, err := Do(context.Background(), h, Op[int]{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("err %v", err)
	}
}

// TestDerivedContextsFollowCancellation: contexts derived from an attempt's
// context (as net/http derives one per round trip) and context.AfterFunc
// callbacks see the attempt's cancellation.
func TestDerivedContextsFollowCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{Delay: time.Millisecond})
		var afterRan atomic.Bool
		var childErr atomic.Value
		_, err := Do(t.Context(), h, Op[int]{
			Targets: []string{"a", "b"},
			Call: func(ctx context.Context, a Attempt) (int, error) {
				if a.Index == 1 {
					return 1, nil
				}
				child, cancel := context.WithCancel(ctx)
				defer cancel()
				context.AfterFunc(ctx, func() { afterRan.Store(true) })
				<-child.Done()
				childErr.Store(child.Err())
				return 0, child.Err()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !afterRan.Load() || childErr.Load() != context.Canceled {
			t.Errorf("AfterFunc ran %v, derived context error %v", afterRan.Load(), childErr.Load())
		}
		// After the operation, a new derivation is born cancelled.
		var late context.Context
		_, _ = Do(t.Context(), h, Op[int]{Call: func(ctx context.Context, a Attempt) (int, error) { late = ctx; return 1, nil }})
		synctest.Wait()
		child, cancel := context.WithCancel(late)
		defer cancel()
		if child.Err() == nil {
			t.Error("context derived after the operation is not cancelled")
		}
		select {
		case <-late.Done():
		default:
			t.Error("attempt context not done after Do returned")
		}
	})
}

// A refused result whose verdict wraps ErrNotAnAnswer ranks below any
// other outcome when nothing wins: a later error or refused result is
// returned instead of it (and it is released), it never displaces one, and
// it is returned only when every attempt ended so.
func TestNotAnAnswerRanksLast(t *testing.T) {
	boom := errors.New("boom")
	void := fmt.Errorf("dropped: %w", ErrNotAnAnswer)
	const dropped, refused = 1, 503
	cases := []struct {
		name     string
		attempts []int // per attempt, in order: dropped, refused, or 0 for boom
		wantV    int
		wantErr  error
		released int
	}{
		{"void then error", []int{dropped, 0}, 0, boom, 1},
		{"error then void", []int{0, dropped}, 0, boom, 1},
		{"void then refused", []int{dropped, refused}, refused, ErrNotAccepted, 1},
		{"refused then void", []int{refused, dropped}, refused, ErrNotAccepted, 1},
		{"only void", []int{dropped, dropped}, dropped, ErrNotAccepted, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := mustNew(t, Policy{Delay: 50 * time.Millisecond})
				var releases atomic.Int32
				v, err := Do(t.Context(), h, Op[int]{
					Targets: []string{"a", "b"},
					Call: func(ctx context.Context, a Attempt) (int, error) {
						time.Sleep(time.Duration(a.Index) * time.Millisecond) // in order
						if c.attempts[a.Index] == 0 {
							return 0, boom
						}
						return c.attempts[a.Index], nil
					},
					Accept: func(v int, err error) error {
						switch {
						case err != nil:
							return err
						case v == dropped:
							return void
						}
						return fmt.Errorf("status %d", v)
					},
					Release: func(int) { releases.Add(1) },
				})
				synctest.Wait()
				if !errors.Is(err, c.wantErr) || v != c.wantV || int(releases.Load()) != c.released {
					t.Errorf("got %d, %v, %d released; want %d, %v, %d", v, err, releases.Load(), c.wantV, c.wantErr, c.released)
				}
			})
		})
	}
}

// steerFuncs is a Steering made of functions, for tests; nil done does
// nothing.
type steerFuncs struct {
	pick func(a Attempt, used []int) (int, error)
	done func(a Attempt, r Result)
}

func (s steerFuncs) Pick(a Attempt, used []int) (int, error) { return s.pick(a, used) }

func (s steerFuncs) Done(a Attempt, r Result) {
	if s.done != nil {
		s.done(a, r)
	}
}
