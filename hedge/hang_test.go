package hedge

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// A losing inline primary that keeps deriving contexts (as a Call making
// several net/http requests does) while the hedge wins must not hang Do.
func TestDerivingContextsWhileLosingNeverHangs(t *testing.T) {
	h := mustNew(t, Policy{Delay: time.Microsecond, Budget: mustBudget(t, 1, 1e9), Gate: Gate{Disabled: true}})
	for i := range 2000 {
		res := make(chan error, 1)
		go func() {
			_, err := Do(context.Background(), h, Op[int]{
				Call: func(ctx context.Context, a Attempt) (int, error) {
					if a.Index == 1 {
						return 1, nil
					}
					for {
						c2, cancel := context.WithCancel(ctx)
						err := c2.Err()
						cancel()
						if err != nil {
							return 0, err
						}
					}
				}})
			res <- err
		}()
		select {
		case err := <-res:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(3 * time.Second):
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Logf("%s", buf[:n])
			t.Fatalf("iteration %d: Do with inline primary hung forever", i)
		}
	}
}
