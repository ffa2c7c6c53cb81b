// Command straggler measures the gateway on the workload of issue 3: two
// loopback replicas that serve 5% of requests in 40ms and the rest in 1ms,
// read directly and through the gateway, with the replicas' own counters
// of the work they did. It prints one JSON line per configuration.
//
//	go run ./bench/straggler [-requests 2000] [-rate 200]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab"
)

func main() {
	requests := flag.Int("requests", 2000, "requests per side")
	rate := flag.Float64("rate", 200, "offered load per second (open loop)")
	flag.Parse()
	straggle := lab.Straggler{Fraction: 0.05, Fast: time.Millisecond, Slow: 40 * time.Millisecond}
	configs := []struct {
		name   string
		model  lab.Model
		policy func() hedge.Policy
	}{
		{"straggler, adaptive delay (default)", straggle, func() hedge.Policy { return hedge.Policy{} }},
		{"straggler, fixed 5ms delay", straggle, func() hedge.Policy { return hedge.Policy{Delay: 5 * time.Millisecond} }},
		{"straggler, fixed 25ms delay (the seed command's)", straggle, func() hedge.Policy { return hedge.Policy{Delay: 25 * time.Millisecond} }},
		{"every request slow (40ms), fixed 5ms delay, fraction 0.1 burst 10", lab.Constant(40 * time.Millisecond), func() hedge.Policy {
			b, _ := hedge.NewBudget(0.1, 10)
			return hedge.Policy{Delay: 5 * time.Millisecond, Budget: b}
		}},
	}
	enc := json.NewEncoder(os.Stdout)
	for _, c := range configs {
		res, err := lab.RunStraggler(context.Background(), lab.StragglerConfig{
			Requests: *requests, Rate: *rate, Model: c.model,
			Gateway: gateway.Config{Policy: c.policy()},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "straggler:", err)
			os.Exit(1)
		}
		enc.Encode(struct {
			Name string `json:"name"`
			*lab.StragglerReport
		}{c.name, res})
	}
}
