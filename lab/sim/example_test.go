package sim_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tailgate-dev/tailgate/lab/sim"
)

// The paper's arithmetic: leaves that take 1ms but 100ms one time in a
// hundred make 63% of the requests to 100 leaves slow (over 20ms). Waiting
// for 95 of them, or hedging after 10ms for 1% more shard requests,
// removes nearly all of that.
func Example() {
	leaf := func(rng *rand.Rand) time.Duration {
		if rng.Float64() < 0.01 {
			return 100 * time.Millisecond
		}
		return time.Millisecond
	}
	opts := sim.Options{Requests: 20_000, Seed: 1, SlowThreshold: 20 * time.Millisecond}
	for _, p := range []sim.Policy{
		{Name: "all 100", Fanout: 100},
		{Name: "95 of 100", Fanout: 100, Need: 95},
		{Name: "hedged at 10ms", Fanout: 100, HedgeAfter: 10 * time.Millisecond},
	} {
		r, err := sim.Run(p, leaf, opts)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-14s slow %3.0f%%  p50 %-6v extra %.0f%%\n", r.Policy, 100*r.SlowShare, r.P50, r.ExtraAttemptsPct)
	}
	// Output:
	// all 100        slow  63%  p50 100ms  extra 0%
	// 95 of 100      slow   0%  p50 1ms    extra 0%
	// hedged at 10ms slow   1%  p50 11ms   extra 1%
}
