package hedge

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// When the caller's deadline passes, attempts see DeadlineExceeded, not a
// generic Canceled: downstream timeout handling depends on it.
func TestAttemptSeesCallerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{Delay: time.Second})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		var seen error
		_, err := Do(ctx, h, Op[int]{Call: func(ctx context.Context, a Attempt) (int, error) {
			<-ctx.Done()
			seen = ctx.Err()
			return 0, seen
		}})
		synctest.Wait()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Do err %v", err)
		}
		if !errors.Is(seen, context.DeadlineExceeded) {
			t.Errorf("attempt ctx.Err() = %v after the caller's deadline passed, want DeadlineExceeded", seen)
		}
	})
}
