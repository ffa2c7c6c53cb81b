package hedge

import (
	"context"
	"testing"
)

// OnReceipt receives the final receipt once, also when the context is done
// before anything is launched: a caller waiting for its receipt must not hang.
func TestReceiptForAlreadyCancelledContext(t *testing.T) {
	h := mustNew(t, Policy{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	_, err := Do(ctx, h, Op[int]{Call: func(context.Context, Attempt) (int, error) { return 1, nil }, OnReceipt: func(Receipt) { n++ }})
	if err == nil {
		t.Fatal("no error")
	}
	if n != 1 {
		t.Errorf("%d receipts delivered, want 1 (outcome canceled)", n)
	}
}
