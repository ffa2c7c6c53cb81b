package fanout_test

import (
	"fmt"

	"github.com/tailgate-dev/tailgate/fanout"
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
