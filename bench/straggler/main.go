// Command straggler measures the gateway on straggler workloads, read
// directly and through the gateway in-process, with the replicas' own
// counters of the work they did.
//
// By default it runs the workload of issue 3: two loopback replicas that
// serve 5% of requests in 40ms and the rest in 1ms (each replica draws its
// own stragglers), under four hedge settings, one JSON line each:
//
//	go run ./bench/straggler [-requests 2000] [-rate 200]
//
// With -shares it runs the reference experiment's shape instead: a share
// of the reads slow (40ms) on whichever replica serves them as a primary
// and fast (1ms) as a hedge, 500 reads at 100/s, primaries alternating
// when read directly; for each share, -seeds runs of the gateway with
// -hedge-delay 10ms and -hedge-fraction 0.25 or 0.2, and with the
// reference command's -hedge-delay 25ms -hedge-fraction 0.1, one line per
// setting with the medians of the runs, each run's ratio, and the CPU time
// the hypervisor stole during each run (what moves a p99 of 500 reads
// most on a shared virtual machine):
//
//	go run ./bench/straggler -shares 0.05,0.1,0.2 -seeds 5
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp/straggler"
	"github.com/tailgate-dev/tailgate/lab/fixture"
)

func main() {
	requests := flag.Int("requests", 2000, "requests per side (the issue-3 workload)")
	rate := flag.Float64("rate", 200, "offered load per second, open loop (the issue-3 workload)")
	shares := flag.String("shares", "", "comma-separated shares of slow reads: run the reference experiment's shape instead")
	seeds := flag.Int("seeds", 5, "runs per setting with -shares (medians are reported)")
	flag.Parse()
	var err error
	if *shares != "" {
		err = reference(*shares, *seeds)
	} else {
		err = issue3(*requests, *rate)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "straggler:", err)
		os.Exit(1)
	}
}

func issue3(requests int, rate float64) error {
	straggle := fixture.Straggler{Fraction: 0.05, Fast: time.Millisecond, Slow: 40 * time.Millisecond}
	configs := []struct {
		name   string
		model  fixture.Model
		policy func() hedge.Policy
	}{
		{"straggler, adaptive delay (default)", straggle, func() hedge.Policy { return hedge.Policy{} }},
		{"straggler, fixed 5ms delay", straggle, func() hedge.Policy { return hedge.Policy{Delay: 5 * time.Millisecond} }},
		{"straggler, fixed 25ms delay (the seed command's)", straggle, func() hedge.Policy { return hedge.Policy{Delay: 25 * time.Millisecond} }},
		{"every request slow (40ms), fixed 5ms delay, fraction 0.1 burst 10", fixture.Constant(40 * time.Millisecond), func() hedge.Policy {
			b, _ := hedge.NewBudget(0.1, 10)
			return hedge.Policy{Delay: 5 * time.Millisecond, Budget: b}
		}},
	}
	enc := json.NewEncoder(os.Stdout)
	for _, c := range configs {
		res, err := straggler.Run(context.Background(), straggler.Config{
			Requests: requests, Rate: rate, Model: c.model,
			Gateway: gateway.Config{Policy: c.policy()},
		})
		if err != nil {
			return err
		}
		if err := enc.Encode(struct {
			Name string `json:"name"`
			*straggler.Report
		}{c.name, res}); err != nil {
			return err
		}
	}
	return nil
}

// reference runs the reference experiment's shape at each share.
func reference(list string, seeds int) error {
	const requests = 500
	settings := []struct {
		delay    time.Duration
		fraction float64
	}{{10 * time.Millisecond, 0.25}, {10 * time.Millisecond, 0.2}, {25 * time.Millisecond, 0.1}}
	enc := json.NewEncoder(os.Stdout)
	for _, f := range strings.Split(list, ",") {
		share, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || share < 0 || share > 1 {
			return fmt.Errorf("-shares: %q is not a share in [0, 1]", f)
		}
		for _, s := range settings {
			var direct, hedged, ratio, attempts, stolen []float64
			for seed := 1; seed <= seeds; seed++ {
				b, _ := hedge.NewBudget(s.fraction, hedge.DefaultBudgetBurst)
				m, err := straggler.IDs(requests, share, time.Millisecond, 40*time.Millisecond)
				if err != nil {
					return err
				}
				res, err := straggler.Run(context.Background(), straggler.Config{
					Requests: requests, Rate: 100, Seed: uint64(seed),
					Model:   m,
					Gateway: gateway.Config{Policy: hedge.Policy{Delay: s.delay, Budget: b}},
				})
				if err != nil {
					return err
				}
				direct = append(direct, res.Baseline.P99Ms)
				hedged = append(hedged, res.Hedged.P99Ms)
				ratio = append(ratio, res.P99Ratio)
				attempts = append(attempts, res.Hedged.BackendAttemptsPerRequest)
				if res.Environment.StolenMs != nil {
					stolen = append(stolen, *res.Environment.StolenMs)
				}
			}
			if err := enc.Encode(struct {
				Share              float64   `json:"slowShare"`
				Delay              string    `json:"hedgeDelay"`
				Fraction           float64   `json:"hedgeFraction"`
				Runs               int       `json:"runs"`
				DirectP99          float64   `json:"directP99Ms"`
				GatewayP99         float64   `json:"gatewayP99Ms"`
				Ratio              float64   `json:"p99Ratio"`
				Ratios             []float64 `json:"p99Ratios"`
				AttemptsPerRequest float64   `json:"backendAttemptsPerRequest"`
				Stolen             []float64 `json:"stolenMs,omitempty"`
			}{share, s.delay.String(), s.fraction, seeds, median(direct), median(hedged), median(ratio), ratio, median(attempts), stolen}); err != nil {
				return err
			}
		}
	}
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
