package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tailgate-dev/tailgate/fanout"
)

const calcSynopsis = `The fan-out arithmetic of "The Tail at Scale". A request that waits on N
servers, each slow with probability p, is slow with probability 1-(1-p)^N:
with 100 servers slow 1% of the time, 63.4% of requests are slow.

  tailgate calc -fanout 100 -p 0.01      share of slow requests
  tailgate calc -fanout 60 -target 0.99  the per-server percentile needed
  tailgate calc -fanout 60 -wait 57      waiting for 57 of 60 instead of all`

type calcRow struct {
	Fanout    int     `json:"fanout"`
	SlowShare float64 `json:"slowShare"`
}

type calcReport struct {
	Fanout                int     `json:"fanout"`
	ServerSlowProbability float64 `json:"serverSlowProbability"`
	SlowShare             float64 `json:"slowShare"`
	// Set with -target.
	Target                   *float64 `json:"target,omitempty"`
	MaxServerSlowProbability *float64 `json:"maxServerSlowProbability,omitempty"`
	ServerPercentile         string   `json:"serverPercentile,omitempty"`
	// Set with -wait.
	Wait          int       `json:"wait,omitempty"`
	WaitSlowShare *float64  `json:"waitSlowShare,omitempty"`
	Table         []calcRow `json:"table"`
}

func runCalc(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("calc", calcSynopsis, stderr)
	n := fs.Int("fanout", 100, "number of servers a request waits on (>= 1)")
	p := fs.Float64("p", 0.01, "probability that one server is slow, in [0, 1] (0.01: slower than its p99)")
	target := fs.Float64("target", 0, "wanted share of fast requests, in (0, 1]; prints the per-server percentile it needs")
	wait := fs.Int("wait", 0, "wait for this many of the servers (a good-enough result) instead of all")
	table := fs.String("table", "1,2,5,10,20,50,100,200,500,1000,2000", "comma-separated fan-outs for the table")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	targetSet := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "target" {
			targetSet = true
		}
	})
	rep := calcReport{Fanout: *n, ServerSlowProbability: *p}
	var err error
	if rep.SlowShare, err = fanout.SlowShare(*n, *p); err != nil {
		return usageError(stderr, "calc", err)
	}
	if targetSet {
		if *target <= 0 || *target > 1 {
			return usageError(stderr, "calc", fmt.Errorf("-target %v must be within (0, 1]", *target))
		}
		maxP, err := fanout.MaxServerSlowProbability(*n, *target)
		if err != nil {
			return usageError(stderr, "calc", err)
		}
		rep.Target, rep.MaxServerSlowProbability = target, &maxP
		rep.ServerPercentile = fanout.Percentile(maxP)
	}
	if *wait != 0 {
		s, err := fanout.SlowShareGoodEnough(*n, *wait, *p)
		if err != nil {
			return usageError(stderr, "calc", err)
		}
		rep.Wait, rep.WaitSlowShare = *wait, &s
	}
	for _, f := range strings.Split(*table, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		fn, err := strconv.Atoi(f)
		if err != nil {
			return usageError(stderr, "calc", fmt.Errorf("-table: %q is not a whole number", f))
		}
		s, err := fanout.SlowShare(fn, *p)
		if err != nil {
			return usageError(stderr, "calc", fmt.Errorf("-table: %w", err))
		}
		rep.Table = append(rep.Table, calcRow{fn, s})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "tailgate calc: %v\n", err)
			return exitError
		}
		return exitOK
	}
	printCalc(stdout, rep)
	return exitOK
}

func printCalc(w io.Writer, r calcReport) {
	fmt.Fprintf(w, "Fan-out %d, each server slow with probability %g (slower than its %s):\n",
		r.Fanout, r.ServerSlowProbability, fanout.Percentile(r.ServerSlowProbability))
	fmt.Fprintf(w, "  %s of requests are slow: they wait on at least one slow server.\n", pct(r.SlowShare))
	if r.Target != nil {
		fmt.Fprintf(w, "\nFor %s of requests to be fast at fan-out %d:\n", pct(*r.Target), r.Fanout)
		fmt.Fprintf(w, "  each server must be fast at %s (slow with p <= %.2g).\n", r.ServerPercentile, *r.MaxServerSlowProbability)
	}
	if r.WaitSlowShare != nil {
		fmt.Fprintf(w, "\nWaiting for %d of the %d servers (a good-enough result):\n", r.Wait, r.Fanout)
		fmt.Fprintf(w, "  %s of requests are slow, instead of %s.\n", pct(*r.WaitSlowShare), pct(r.SlowShare))
	}
	if len(r.Table) > 0 {
		fmt.Fprintf(w, "\nSlow requests by fan-out, servers slow with p = %g:\n", r.ServerSlowProbability)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "fan-out\tslow requests\t")
		for _, row := range r.Table {
			fmt.Fprintf(tw, "%d\t%s\t\n", row.Fanout, pct(row.SlowShare))
		}
		tw.Flush()
	}
}

// pct formats a share as a percentage with precision where it matters,
// truncating near 100% so that 99.996% never prints as 100.0%.
func pct(x float64) string {
	v := 100 * x
	switch {
	case v >= 100 || v == 0:
		return strconv.FormatFloat(v, 'f', 1, 64) + "%"
	case v > 99.9:
		decimals := int(math.Ceil(-math.Log10(100-v))) + 1
		scale := math.Pow(10, float64(decimals))
		return strconv.FormatFloat(math.Floor(v*scale)/scale, 'f', decimals, 64) + "%"
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64) + "%"
	case v >= 0.1:
		return strconv.FormatFloat(v, 'f', 2, 64) + "%"
	default:
		return strconv.FormatFloat(v, 'g', 2, 64) + "%"
	}
}
