package replica_test

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/tailgate-dev/tailgate/replica"
)

func Example() {
	set, err := replica.New([]string{"http://a.test", "http://b.test", "http://c.test"},
		replica.Config{FailureThreshold: 2, Cooldown: time.Second, Seed: 1})
	if err != nil {
		panic(err)
	}
	now := time.Unix(1_700_000_000, 0) // every method takes the time: no clock inside

	// One request: the primary, then, as it is slow, a hedge to a
	// different replica. The hedge answers first; the primary loses and is
	// cancelled: neutral for its breaker, but it took at least 25ms, and
	// its latency estimate says so.
	p, primary, _ := set.Pick(now, replica.Attempt{})
	h, hedge, _ := set.Pick(now.Add(20*time.Millisecond), replica.Attempt{Role: replica.Hedge, Exclude: []int{p}})
	fmt.Println("primary:", set.Name(p), "hedge:", set.Name(h))
	set.Done(hedge, replica.Success, now.Add(25*time.Millisecond))
	set.Done(primary, replica.Canceled, now.Add(25*time.Millisecond))

	// c fails twice in a row: its breaker opens for a second.
	for range 2 {
		_, t, _ := set.Pick(now, replica.Attempt{Role: replica.Hedge, Exclude: []int{0, 1}})
		set.Done(t, replica.Failure, now)
	}
	fmt.Println("available:", set.Available(now))

	// After the cooldown the next pick is c's single half-open probe; its
	// success closes the breaker.
	now = now.Add(time.Second)
	i, probe, _ := set.Pick(now, replica.Attempt{})
	fmt.Println("probe:", set.Name(i), set.Snapshot(now)[i].Breaker)
	set.Done(probe, replica.Success, now.Add(3*time.Millisecond))

	// a's EWMA is its 5ms sample, decayed for the second without news since.
	for _, st := range set.Snapshot(now.Add(3 * time.Millisecond)) {
		fmt.Printf("%s %-6v generation %d, ewma %.1fms, %d picks\n", st.Name, st.Breaker, st.Generation, st.EWMAMs, st.Picks)
	}
	// Output:
	// primary: http://b.test hedge: http://a.test
	// available: 2
	// probe: http://c.test half-open
	// http://a.test closed generation 0, ewma 4.5ms, 1 picks
	// http://b.test closed generation 0, ewma 22.7ms, 1 picks
	// http://c.test closed generation 3, ewma 3.0ms, 3 picks
}

// A hedge loser that finishes after its replica's breaker changed state
// carries a stale generation: it is counted, its latency is kept, but it
// cannot move the breaker.
func ExampleSet_Done() {
	set, _ := replica.New([]string{"http://a.test"}, replica.Config{FailureThreshold: 1, Cooldown: time.Second})
	now := time.Unix(1_700_000_000, 0)

	_, late, _ := set.Pick(now, replica.Attempt{}) // still running when...
	_, t, _ := set.Pick(now, replica.Attempt{})
	set.Done(t, replica.Failure, now) // ...this failure opens the breaker

	set.Done(late, replica.Success, now.Add(200*time.Millisecond))
	st := set.Snapshot(now.Add(200 * time.Millisecond))[0]
	fmt.Println(st.Breaker, st.Generation, "stale:", st.Stale, "ewma:", st.EWMA)
	// Output:
	// open 1 stale: 1 ewma: 200ms
}

func ExampleSet_Snapshot() {
	set, _ := replica.New([]string{"http://a.test", "http://b.test"}, replica.Config{Seed: 1})
	now := time.Unix(1_700_000_000, 0).UTC()
	_, t, _ := set.Pick(now, replica.Attempt{Role: replica.Hedge, Exclude: []int{1}})
	set.Done(t, replica.Success, now.Add(12*time.Millisecond))

	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(set.Snapshot(now.Add(12 * time.Millisecond))[0])
	// Output:
	// {
	//   "name": "http://a.test",
	//   "breaker": "closed",
	//   "generation": 0,
	//   "available": true,
	//   "ewmaMs": 12,
	//   "inFlight": 0,
	//   "successes": 1,
	//   "failures": 0,
	//   "canceled": 0,
	//   "staleOutcomes": 0,
	//   "picks": 1,
	//   "consecutiveFailures": 0
	// }
}

// A replica that turns slow and stays slow goes on probation: no more
// primaries, only shadow requests, whose answers bring it back once it
// has recovered.
func ExampleSet_Pick_shadow() {
	set, _ := replica.New([]string{"http://a.test", "http://b.test", "http://c.test"}, replica.Config{
		Probation: replica.Probation{Enabled: true, Window: time.Second, ShadowRate: 5}})
	now := time.Unix(1_700_000_000, 0)
	latency := []time.Duration{5 * time.Millisecond, 5 * time.Millisecond, 60 * time.Millisecond}
	others := [][]int{{1, 2}, {0, 2}, {0, 1}}
	status := func(i int) replica.ProbationStatus { return set.Snapshot(now)[i].Probation.Status }
	// Every 50ms each serving replica answers a request, and a shadow goes
	// out when one is due.
	step := func() {
		for i := range 3 {
			if !status(i).OnProbation() {
				_, t, _ := set.Pick(now, replica.Attempt{Role: replica.Retry, Exclude: others[i]}) // this replica's request
				set.Done(t, replica.Success, now.Add(latency[i]))
			}
		}
		if i, t, ok := set.Pick(now, replica.Attempt{Role: replica.Shadow}); ok {
			set.Done(t, replica.Success, now.Add(latency[i]))
		}
		now = now.Add(50 * time.Millisecond)
	}
	for range 40 {
		step()
	}
	p := set.Snapshot(now)[2].Probation
	fmt.Println(p.Status, "-", p.Reason)
	for range 20 {
		if i, t, _ := set.Pick(now, replica.Attempt{}); i == 2 {
			fmt.Println("a primary went to c")
		} else {
			set.Done(t, replica.Success, now.Add(5*time.Millisecond))
		}
	}

	// c recovers. Its shadows show it: once their median over the last 2s
	// (long enough for 2 × MinSamples shadows at 5/s) has stayed low for
	// the window, c serves again.
	latency[2] = 6 * time.Millisecond
	for range 80 {
		step()
	}
	p = set.Snapshot(now)[2].Probation
	fmt.Println(p.Status, "-", p.Reason)
	fmt.Println("shadows:", p.Shadows, "entries:", p.Entries, "exits:", p.Exits)
	// Output:
	// probation - p50 60ms is 12.0x peers' 5ms for 1s
	// serving - came off probation: p50 6ms is 1.2x peers' 5ms for 1s
	// shadows: 15 entries: 1 exits: 1
}
