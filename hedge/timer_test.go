package hedge

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A pooled delay timer whose previous firing is still on its way (Stop
// returned true for a later Reset) may be handed to another operation; that
// stale firing must not launch the new operation's hedge before its delay.
func TestPooledTimerNeverFiresEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 10 * time.Millisecond
		var c collector
		h := mustNew(t, Policy{Delay: d, MaxAttempts: 3, Budget: mustBudget(t, 1, 1e9), Gate: Gate{Disabled: true}})
		for i := range 2000 {
			// op1: the primary fails exactly at the delay; the failure hedge
			// re-arms the timer and wins at once.
			_, err := Do(t.Context(), h, Op[int]{
				Call: func(ctx context.Context, a Attempt) (int, error) {
					if a.Index == 0 {
						time.Sleep(d)
						return 0, errors.New("boom")
					}
					return 1, nil
				},
				Targets: []string{"a", "b", "c"},
			})
			_ = err
			// op2: slow primary; nothing may be hedged before d.
			start := time.Now()
			var early bool
			_, _ = Do(t.Context(), h, Op[int]{
				Call: func(ctx context.Context, a Attempt) (int, error) {
					if a.Index > 0 && time.Since(start) < d {
						early = true
					}
					if a.Index > 0 {
						return 2, nil
					}
					<-ctx.Done()
					return 0, ctx.Err()
				},
				Targets:   []string{"a", "b", "c"},
				OnReceipt: c.receipt,
			})
			synctest.Wait()
			if early {
				r := c.last(t)
				t.Fatalf("iteration %d: op2 hedged %v after its start, delay %v; receipt attempts %+v", i, r.Attempts[1].Start.Duration(), d, r.Attempts)
			}
		}
	})
}

// A delay firing that loses the race for the operation's lock to a
// failure-triggered hedge must not launch another hedge at once: the timer
// was re-armed for the next hedge, one delay later.
func TestStaleDelayFiringIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 10 * time.Millisecond
		h := mustNew(t, Policy{Delay: d, MaxAttempts: 3, Budget: mustBudget(t, 1, 1e9), Gate: Gate{Disabled: true}})
		for i := range 2000 {
			var c collector
			ctx, cancel := context.WithTimeout(t.Context(), 5*d)
			_, _ = Do(ctx, h, Op[int]{
				Call: func(ctx context.Context, a Attempt) (int, error) {
					if a.Index == 0 {
						time.Sleep(d)
						return 0, errors.New("boom")
					}
					<-ctx.Done()
					return 0, ctx.Err()
				},
				Targets:   []string{"a", "b", "c"},
				OnReceipt: c.receipt,
			})
			cancel()
			r := c.last(t)
			if r.AttemptsLaunched == 3 && r.Attempts[1].Trigger == TriggerFailure && r.Attempts[2].Trigger == TriggerDelay && r.Attempts[2].Start.Duration() < 2*d {
				t.Fatalf("iteration %d: hedges at %v and %v, want the second one delay after the first: %+v",
					i, r.Attempts[1].Start.Duration(), r.Attempts[2].Start.Duration(), r.Attempts)
			}
		}
	})
}

// A busy process's own lateness sets the adaptive delay's floor: once its
// delay timers have been seen to fire up to 3ms late, a class whose reads
// take 0.5ms is hedged after 6ms (twice the lateness's p90), not after its
// p90, which such lateness alone would cross; a fixed delay is left alone.
// The Hedgers of a Classes share what any of them measured.
func TestAdaptiveDelayFloorIsTheProcessLateness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustClasses(t, Policy{Adaptive: Adaptive{MinSamples: 10}})
		fast, quiet := c.Hedger("fast"), c.Hedger("quiet")
		now := time.Now()
		for range 100 {
			fast.record(now, 500*time.Microsecond)
			quiet.record(now, 500*time.Microsecond)
		}
		fast.delays.set(fast.Policy(), now)
		if d, _, _ := fast.delays.current(now); d != time.Millisecond {
			t.Fatalf("delay %v before any lateness is known, want the 1ms Floor", d)
		}
		for i := range 100 {
			fast.late.note(now, time.Duration(i%4)*time.Millisecond) // 0 to 3ms late
		}
		for _, h := range []*Hedger{fast, quiet} {
			h.delays.set(h.Policy(), now)
			if d, _, _ := h.delays.current(now); d < 5900*time.Microsecond || d > 6100*time.Microsecond {
				t.Errorf("%s: delay %v with timers up to 3ms late, want about 6ms", h.class, d)
			}
		}
		fixed := mustNew(t, Policy{Delay: 2 * time.Millisecond})
		fixed.late.note(now, 10*time.Millisecond)
		if d, _, _ := fixed.delays.current(now); d != 2*time.Millisecond {
			t.Errorf("fixed delay moved to %v", d)
		}
		// The floor follows the process: 10s later the lateness is gone.
		later := now.Add(11 * time.Second)
		fast.delays.set(fast.Policy(), later)
		for range 100 {
			fast.record(later, 500*time.Microsecond)
		}
		fast.delays.set(fast.Policy(), later)
		if d, _, _ := fast.delays.current(later); d != time.Millisecond {
			t.Errorf("delay %v once the lateness has passed, want 1ms", d)
		}
	})
}

func mustClasses(t *testing.T, p Policy) *Classes {
	t.Helper()
	c, err := NewClasses(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A hedge never goes out before its delay, however late the process's
// timers have been seen to fire: arming them early to make up for it sent
// hedges for reads that would have made it (see lateness).
func TestHedgeNotBeforeItsDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 10 * time.Millisecond
		h := mustNew(t, Policy{Delay: d, Budget: mustBudget(t, 1, 1e9), Gate: Gate{Disabled: true}})
		for range 100 {
			time.Sleep(2 * time.Millisecond)
			h.late.note(time.Now(), time.Millisecond) // every timer a millisecond late
		}
		r := hedgedReceipt(t, h, time.Hour)
		if len(r.Attempts) != 2 || r.Attempts[1].Start.Duration() < d {
			t.Errorf("hedge attempts %+v; want the hedge at %v or later", r.Attempts, d)
		}
	})
}

// A delay timer that fires late because the process stalled waits once
// more before its hedge, so that an answer that came in during the stall
// is read first: the read is then decided by its primary, with no hedge
// sent and no budget spent. A read still undecided after the grace is
// hedged. Only an adaptive delay waits so: a fixed one's hedge goes at its
// delay. (Virtual time fires timers on time: the test has stallGrace grant
// a grace to every firing. The adaptive delay here is its warm-up guess.)
func TestStalledTimerGivesTheAnswerAChance(t *testing.T) {
	const d, g = 10 * time.Millisecond, 2 * time.Millisecond
	defer func(f func(time.Duration) time.Duration) { stallGrace = f }(stallGrace)
	stallGrace = func(time.Duration) time.Duration { return g }
	adaptive := Policy{Adaptive: Adaptive{Warmup: d}}
	fixed := Policy{Delay: d}
	for _, tc := range []struct {
		name       string
		p          Policy
		primary    time.Duration // how long the primary takes
		wantHedged bool
		wantStart  time.Duration // the hedge's start
	}{
		{"answer within the grace", adaptive, d + g/2, false, 0},
		{"answer after the grace", adaptive, d + 3*g, true, d + g},
		{"fixed delay", fixed, d + g/2, true, d},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := tc.p
				p.MaxAttempts, p.Budget, p.Gate = 2, mustBudget(t, 1, 1e9), Gate{Disabled: true}
				r := hedgedReceipt(t, mustNew(t, p), tc.primary)
				if hedged := len(r.Attempts) > 1; hedged != tc.wantHedged {
					t.Fatalf("hedged %v, want %v: attempts %+v", hedged, tc.wantHedged, r.Attempts)
				}
				if tc.wantHedged {
					if s := r.Attempts[1].Start.Duration(); s != tc.wantStart {
						t.Errorf("hedge started at %v, want %v", s, tc.wantStart)
					}
				}
			})
		})
	}
}

// hedgedReceipt runs one Do under h, in a synctest bubble, whose primary
// answers after primary (or when the operation ends) and whose hedge
// answers at once, and returns its final receipt.
func hedgedReceipt(t *testing.T, h *Hedger, primary time.Duration) Receipt {
	t.Helper()
	var c collector
	_, err := Do(t.Context(), h, Op[int]{
		Call: func(ctx context.Context, a Attempt) (int, error) {
			if a.Index > 0 {
				return 2, nil
			}
			select {
			case <-time.After(primary):
				return 1, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		},
		Targets:   []string{"a", "b"},
		OnReceipt: c.receipt,
	})
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return c.last(t)
}

// stallGrace grants a grace only to a firing late by stallLag or more:
// not to one the poller's whole-millisecond sleeps made late.
func TestStallGrace(t *testing.T) {
	for _, tc := range []struct{ lag, want time.Duration }{
		{0, 0},
		{time.Millisecond + 100*time.Microsecond, 0},
		{stallLag - time.Microsecond, 0},
		{stallLag, graceWait},
		{50 * time.Millisecond, graceWait},
	} {
		if got := stallGrace(tc.lag); got != tc.want {
			t.Errorf("stallGrace(%v) = %v, want %v", tc.lag, got, tc.want)
		}
	}
}

// A delay timer is handed to the next operation still armed for the one
// before (see delayTimer): it fires early into the new operation, which
// arms it again, and the hedge leaves exactly one delay after the new
// operation began, every time.
func TestDelayTimerHandedOverArmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{Delay: 10 * time.Millisecond, Budget: mustBudget(t, 1, 100), Gate: Gate{Disabled: true}})
		for i := range 20 {
			// Each operation's primary answers at 1ms, well before its
			// delay, but for every third, which straggles; the next one
			// begins 3ms after, while the timer is still armed for an
			// operation before: the straggler's fires 2ms after it began.
			primary := time.Millisecond
			if i%3 == 2 {
				primary = 50 * time.Millisecond
			}
			r := hedgedReceipt(t, h, primary)
			hedged := r.AttemptsLaunched == 2
			if hedged != (i%3 == 2) {
				t.Fatalf("operation %d: %d attempts, primary %v", i, r.AttemptsLaunched, primary)
			}
			if hedged && time.Duration(r.Attempts[1].Start) != 10*time.Millisecond {
				t.Errorf("operation %d: hedge at %v, want 10ms", i, time.Duration(r.Attempts[1].Start))
			}
			time.Sleep(3 * time.Millisecond)
		}
	})
}
