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
			<-ctx.Done() // a straggler, until the fan-out has enough and cancels it
			return "", ctx.Err()
		}
		return fmt.Sprintf("hits from shard %d", shard), nil
	})
	fmt.Println(err, res.Partial, res.Missing, res.Values[0])
	// Output: <nil> true [3] hits from shard 0
}

// Each shard is hedged on its own: with two replicas per shard, a shard
// whose primary replica straggles gets a hedge to its other replica after
// the delay, and the fan-out still has every answer. Every shard's primary
// goes to the same replica (replica 0 for the first request), so the
// replica a shard answered from shows which one was hedged.
func ExampleDo_hedged() {
	f, err := fanout.New(fanout.Config{
		Shards:   3,
		Replicas: 2,
		Policy:   hedge.Policy{Delay: 50 * time.Millisecond}, // well above an answer from memory, so only the straggler is hedged
	})
	if err != nil {
		panic(err)
	}
	res, err := fanout.Do(context.Background(), f, func(ctx context.Context, shard int, a hedge.Attempt) (string, error) {
		if shard == 1 && a.Target == 0 {
			<-ctx.Done() // shard 1's replica 0 straggles until the hedge wins
			return "", ctx.Err()
		}
		return fmt.Sprintf("shard %d from replica %d (hedge: %v)", shard, a.Target, a.IsHedge()), nil
	})
	fmt.Println("error:", err, "partial:", res.Partial)
	for _, v := range res.Values {
		fmt.Println(v)
	}
	// Output:
	// error: <nil> partial: false
	// shard 0 from replica 0 (hedge: false)
	// shard 1 from replica 1 (hedge: true)
	// shard 2 from replica 0 (hedge: false)
}
