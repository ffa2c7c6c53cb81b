package hedge_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// A lookup against two replicas, the first of which straggles: the hedge
// sent to the second after 10ms wins, and the receipt says so.
func Example() {
	h, err := hedge.New(hedge.Policy{Delay: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	latency := map[int]time.Duration{0: time.Second, 1: time.Millisecond}
	receipts := make(chan hedge.Receipt, 1)
	v, err := hedge.Do(context.Background(), h, hedge.Op[string]{
		Targets: []string{"replica-a", "replica-b"},
		Call: func(ctx context.Context, a hedge.Attempt) (string, error) {
			select {
			case <-time.After(latency[a.Target]):
				return fmt.Sprintf("answer from target %d (hedge: %v)", a.Target, hedge.IsHedge(ctx)), nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		},
		OnReceipt: func(r hedge.Receipt) { receipts <- r },
	})
	fmt.Println(v, err)
	r := <-receipts
	fmt.Printf("winner %s, %d attempts, %d loser cancelled and seen to stop\n",
		r.WinnerTargetName, r.AttemptsLaunched, r.CancellationsObserved)
	// Output:
	// answer from target 1 (hedge: true) <nil>
	// winner replica-b, 2 attempts, 1 loser cancelled and seen to stop
}
