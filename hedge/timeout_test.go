package hedge

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/internal/opctx"
)

// hang returns once its attempt's context ends.
func hang(ctx context.Context, _ Attempt) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// An operation on its own context (an opctx.Ctx: a parent never
// cancelled, or the gateway's) arms its Timeout's timer only when it
// runs past its hedge delay, hedges, or waits (armDeadline): each way an
// operation can be held up still ends at its Timeout.
func TestTimeoutEndsEveryHeldUpOperation(t *testing.T) {
	failFast := func(ctx context.Context, a Attempt) (string, error) {
		if a.Index == 0 {
			return "", errors.New("refused")
		}
		return hang(ctx, a)
	}
	for _, tc := range []struct {
		name string
		p    Policy
		call func(context.Context, Attempt) (string, error)
	}{
		// No hedge can go (the budget is empty): the delay arms it.
		{"primary hangs, no hedge", Policy{Delay: 5 * time.Millisecond, Timeout: 50 * time.Millisecond, Budget: mustBudget(t, 0.01, 1)}, hang},
		// Both hang: the delay, and the hedge's launch.
		{"primary and hedge hang", Policy{Delay: 5 * time.Millisecond, Timeout: 50 * time.Millisecond, Budget: mustBudget(t, 1, 1000)}, hang},
		// The primary fails at once and its retry hangs, before the delay.
		{"retry hangs", Policy{Delay: 30 * time.Millisecond, Timeout: 50 * time.Millisecond, Budget: mustBudget(t, 1, 1000)}, failFast},
		// The delay is past the Timeout: armed as the operation starts.
		{"delay past the timeout", Policy{Delay: time.Second, Timeout: 50 * time.Millisecond, Budget: mustBudget(t, 1, 1000)}, hang},
		// No hedge at all: armed as it starts.
		{"one attempt", Policy{MaxAttempts: 1, Timeout: 50 * time.Millisecond}, hang},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if tc.p.Budget != nil {
					tc.p.Budget.TrySpend() // an empty budget stays empty
				}
				h := mustNew(t, tc.p)
				start := time.Now()
				_, err := Do(context.Background(), h, Op[string]{Call: tc.call, Targets: []string{"a", "b"}})
				if d := time.Since(start); d != 50*time.Millisecond {
					t.Errorf("Do returned after %v, want the Timeout's 50ms", d)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Do: %v, want DeadlineExceeded", err)
				}
				synctest.Wait() // every attempt has returned
			})
		})
	}
}

// A read's context of the gateway's server (an opctx.Ctx) cancelled
// midway cancels the operation over it, and its attempts.
func TestOperationOverAnOpctxParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{Delay: 5 * time.Millisecond, Timeout: time.Second, Budget: mustBudget(t, 1, 1000)})
		parent := opctx.New(context.Background())
		time.AfterFunc(20*time.Millisecond, parent.Cancel)
		start := time.Now()
		var rc Receipt
		_, err := Do(parent, h, Op[string]{Call: hang, Targets: []string{"a", "b"}, OnReceipt: func(r Receipt) { rc = r }})
		if d := time.Since(start); d != 20*time.Millisecond || !errors.Is(err, context.Canceled) {
			t.Errorf("Do: %v after %v, want Canceled after 20ms", err, d)
		}
		synctest.Wait()
		if rc.Outcome != OutcomeCanceled || rc.AttemptsLaunched != 2 {
			t.Errorf("receipt: %v, %d attempts; want canceled, 2", rc.Outcome, rc.AttemptsLaunched)
		}
	})
}
