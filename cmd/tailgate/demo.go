package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab"
)

const demoSynopsis = `Starts two replicas on 127.0.0.1 whose requests occasionally straggle, then
sends the same reads twice: plainly, and through Tailgate's hedging client,
which sends a duplicate to the other replica when an answer is late. Prints
latency percentiles, attempts, and the work the servers really did.`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo", demoSynopsis, stderr)
	requests := fs.Int("requests", 600, "reads per run (1 to 100000)")
	concurrency := fs.Int("concurrency", 4, "reads in flight at once (1 to 256)")
	delay := fs.String("hedge-delay", "auto", `hedge delay: a duration ("10ms"), "auto" (adaptive p95) or a percentile ("p90")`)
	fraction := fs.Float64("hedge-fraction", hedge.DefaultBudgetFraction, "hedge budget: extra attempts per request, in [0, 1]")
	slowShare := fs.Float64("slow-share", 0.03, "share of requests a replica serves slowly, in [0, 1]")
	slow := fs.Duration("slow", 50*time.Millisecond, "latency of a slow request (at most 10s)")
	fast := fs.Duration("fast", time.Millisecond, "latency of the other requests (at most 10s)")
	seed := fs.Uint64("seed", 1, "seed of the replicas' latency draws")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	switch {
	case *requests < 1 || *requests > 100000:
		return usageError(stderr, "demo", fmt.Errorf("-requests %d must be within [1, 100000]", *requests))
	case *concurrency < 1 || *concurrency > 256:
		return usageError(stderr, "demo", fmt.Errorf("-concurrency %d must be within [1, 256]", *concurrency))
	case !(*slowShare >= 0 && *slowShare <= 1):
		return usageError(stderr, "demo", fmt.Errorf("-slow-share %v must be within [0, 1]", *slowShare))
	case *slow < 0 || *slow > 10*time.Second || *fast < 0 || *fast > 10*time.Second:
		return usageError(stderr, "demo", fmt.Errorf("-slow and -fast must be within [0, 10s]"))
	}
	fixed, q, err := hedge.ParseDelay(*delay)
	if err != nil {
		return usageError(stderr, "demo", err)
	}
	budget, err := hedge.NewBudget(*fraction, hedge.DefaultBudgetBurst)
	if err != nil {
		return usageError(stderr, "demo", err)
	}
	cfg := lab.DemoConfig{
		Requests:    *requests,
		Concurrency: *concurrency,
		Model:       lab.Straggler{Fraction: *slowShare, Fast: *fast, Slow: *slow},
		Seed:        *seed,
		Policy:      hedge.Policy{Delay: fixed, Adaptive: hedge.Adaptive{Quantile: q}, Budget: budget},
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "Tailgate demo: two replicas on 127.0.0.1; %s.\n", cfg.Model)
		fmt.Fprintf(stdout, "Sending %d reads plainly, then %d through the hedging client (%d at a time)...\n\n", cfg.Requests, cfg.Requests, cfg.Concurrency)
	}
	res, err := lab.RunDemo(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "tailgate demo: %v\n", err)
		return exitError
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
		return exitOK
	}
	printDemo(stdout, res, *delay)
	return exitOK
}

func printDemo(w io.Writer, r lab.DemoResult, delay string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tp50\tp90\tp99\tmax\tattempts/read\tserver work/read\twasted work/read\t")
	for _, s := range []lab.RunSummary{r.Baseline, r.Hedged} {
		n := float64(s.Requests)
		fmt.Fprintf(tw, "%s\t%.1fms\t%.1fms\t%.1fms\t%.1fms\t%.3f\t%.3f\t%.3f\t\n", s.Name, s.P50Ms, s.P90Ms, s.P99Ms, s.MaxMs,
			float64(s.Attempts)/n, float64(s.ServerCompleted)/n, float64(s.ServerWasted)/n)
	}
	tw.Flush()
	h, b := r.Hedged, r.Baseline
	hedges := h.Attempts - h.Requests
	fmt.Fprintf(w, "\nHedging (delay %s, settled at %.1fms): %d hedges sent (%.1f%% extra attempts), %d won;\n",
		delay, h.FinalHedgeDelayMs, hedges, 100*float64(hedges)/float64(h.Requests), h.HedgesWon)
	fmt.Fprintf(w, "%d hedges held back by the budget or gate. Of %d losers cancelled, %d stopped at the client,\n",
		h.HedgesSuppressed, h.CancelsRequested, h.CancelsObserved)
	fmt.Fprintf(w, "yet the replicas finished %d of them anyway: wasted work the client never saw.\n", h.ServerWasted)
	if h.P99Ms > 0 {
		fmt.Fprintf(w, "\nResult: p99 %.1fms -> %.1fms (%.1fx lower) for %.1f%% more server work.\n",
			b.P99Ms, h.P99Ms, b.P99Ms/h.P99Ms, 100*(float64(h.ServerCompleted)/float64(b.ServerCompleted)-1))
	}
	fmt.Fprintf(w, "(%s, %d CPUs; figures vary from run to run on a shared machine.)\n", r.GoVersion, r.CPUs)
}
