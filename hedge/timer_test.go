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
