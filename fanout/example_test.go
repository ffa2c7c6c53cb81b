package fanout_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tailgate-dev/tailgate/fanout"
	"github.com/tailgate-dev/tailgate/hedge"
)

func Example() {
	slow, _ := fanout.SlowShare(100, 0.01)
	fmt.Printf("fan-out 100, servers slow 1%% of the time: %.1f%% of requests slow\n", 100*slow)

	p, _ := fanout.MaxServerSlowProbability(60, 0.99)
	fmt.Printf("for 99%% fast at fan-out 60, each server must be fast at %s (p ≤ %.1e)\n", fanout.Percentile(p), p)

	good, _ := fanout.SlowShareGoodEnough(60, 57, 0.01)
	fmt.Printf("waiting for 57 of 60 instead: %.3f%% slow\n", 100*good)
	// Output:
	// fan-out 100, servers slow 1% of the time: 63.4% of requests slow
	// for 99% fast at fan-out 60, each server must be fast at p99.98 (p ≤ 1.7e-04)
	// waiting for 57 of 60 instead: 0.312% slow
}

// A search across five shards that needs four answers: shard 3 straggles,
// the result comes back without it and says so.
func ExampleDo() {
	f, err := fanout.New(fanout.Config{Shards: 5, Completion: fanout.Completion{Need: 4}, Policy: hedge.Policy{MaxAttempts: 1}})
	if err != nil {
		panic(err)
	}
	res, err := fanout.Do(context.Background(), f, func(ctx context.Context, shard int, a hedge.Attempt) (string, error) {
		if shard == 3 {
			select { // a straggler, until cancelled
			case <-time.After(time.Minute):
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return fmt.Sprintf("hits from shard %d", shard), nil
	})
	fmt.Println(err, res.Partial, res.Missing, res.Values[0])
	// Output: <nil> true [3] hits from shard 0
}
