package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/exp/demo"
	"github.com/tailgate-dev/tailgate/lab/exp/straggler"
	"github.com/tailgate-dev/tailgate/lab/exp/sweep"
)

const demoSynopsis = `Runs Tailgate on 127.0.0.1 with nothing to set up, in about 40 seconds:
  1. straggler: two replicas where a few reads straggle on their primary,
     read directly and through the hedging gateway;
  2. sweep: what each hedge delay costs in duplicate work, and where the knee is;
  3. overload: load past capacity, with and without the budget and gate.
Prints a summary and writes an HTML report with plots.`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo", demoSynopsis, stderr)
	html := fs.String("html", "tailgate-report.html", "where to write the HTML report")
	seed := fs.Uint64("seed", 1, "seed of arrivals and latency draws")
	asJSON := fs.Bool("json", false, "print the full results as JSON instead of a summary")
	short := fs.Bool("short", false, "run each experiment at about a quarter of its size, the sweep at a tenth (about 8 seconds; noisier figures)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	if *html == "" {
		return usageError(stderr, "demo", fmt.Errorf("-html needs a file name"))
	}
	if err := (&outputs{html: *html}).check(); err != nil {
		return usageError(stderr, "demo", err)
	}
	if !*asJSON {
		howLong := "about 40 seconds"
		if *short {
			howLong = "about 8 seconds"
		}
		fmt.Fprintf(stdout, "Tailgate demo: loopback replicas on 127.0.0.1, %s...\n", howLong)
	}
	var prog func(stage string, done, total int)
	if p := progress(stderr, "demo"); p != nil {
		start := time.Now()
		prog = func(stage string, done, total int) {
			fmt.Fprintf(stderr, "\r%-10s %d/%d (%s)   ", stage, done, total, time.Since(start).Round(time.Second))
		}
	}
	res, err := demo.Run(ctx, demo.Config{Seed: *seed, Progress: prog, Short: *short})
	if prog != nil {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tailgate demo: %v\n", err)
		return exitError
	}
	path, err := filepath.Abs(*html)
	if err != nil {
		path = *html
	}
	if err := writeFile(path, func(w io.Writer) error {
		return exp.WriteHTML(w, "Tailgate demo", res.Environment, res.Sections()...)
	}); err != nil {
		fmt.Fprintf(stderr, "tailgate demo: writing the report: %v\n", err)
		return exitError
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "tailgate demo: %v\n", err)
			return exitError
		}
		return exitOK
	}
	printDemo(stdout, res)
	fmt.Fprintf(stdout, "\nReport with plots: %s (open it in a browser)\n", path)
	return exitOK
}

func printDemo(w io.Writer, r *demo.Result) {
	s := r.Straggler
	fmt.Fprintf(w, "\n1. straggler: %d reads at %.0f/s; every 20th straggles %s\n", s.Requests, s.Rate, "80ms on its primary (2ms otherwise)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tp50\tp90\tp99\tp99.9\tbackend attempts/read\twasted/read\t")
	for _, side := range []struct {
		name string
		s    straggler.Side
	}{{"direct", s.Baseline}, {"gateway (" + s.HedgeDelay + ")", s.Hedged}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t\n", side.name, msText(side.s.P50Ms), msText(side.s.P90Ms), msText(side.s.P99Ms), msText(side.s.P999Ms),
			side.s.BackendAttemptsPerRequest, float64(side.s.Work.CompletedAfterCancel)/float64(s.Requests))
	}
	tw.Flush()
	ratio := ""
	if s.P99Ratio > 0 {
		ratio = fmt.Sprintf(" (%.1fx lower)", s.P99Ratio)
	}
	fmt.Fprintf(w, "   p99 %s -> %s%s for %.1f%% more backend attempts; the replicas finished %d cancelled losers anyway.\n",
		msText(s.Baseline.P99Ms), msText(s.Hedged.P99Ms), ratio, 100*(s.Hedged.BackendAttemptsPerRequest-1), s.Hedged.Work.CompletedAfterCancel)

	sw := r.Sweep
	fmt.Fprintf(w, "\n2. sweep: %d reads per point against %s; budget and gate open\n", sw.Requests, sw.Model)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tp50\tp99\t(95% CI)\textra attempts\twasted\t\t")
	for _, p := range append([]sweep.Point{sw.Baseline}, sw.Points...) {
		mark := ""
		if p.Label == sw.Knee {
			mark = "<- knee"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f%%\t%.1f%%\t%s\t\n", p.Label, msText(p.P50Ms), msText(p.P99Ms), p.P99CI(), p.ExtraAttemptsPct, p.WastedPct, mark)
	}
	tw.Flush()
	if sw.Knee == "" {
		fmt.Fprintln(w, "   "+sw.KneeText())
	}
	if s := sw.StallText(); s != "" {
		fmt.Fprintln(w, "   "+s)
	}

	o := r.Overload
	fmt.Fprintf(w, "\n3. overload: two replicas with FIFO queues, capacity %.0f reads/s\n", o.Capacity)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "offered\t\tattempts/read\tgoodput\tp99\tfailed\t")
	for _, p := range o.Points {
		fmt.Fprintf(tw, "%.0f/s\t%s\t%.2f\t%.0f/s\t%s\t%d\t\n", p.OfferedPerSec, p.Condition, p.AttemptsPerRequest, p.GoodputPerSec, msText(p.P99Ms), p.Failed+p.Dropped)
	}
	tw.Flush()
	fmt.Fprintf(w, "(%s, %d CPUs, seed %d; figures vary from run to run on a shared machine.)\n", r.Environment.GoVersion, r.Environment.CPUs, r.Environment.Seed)
}

// msText prints a latency in ms; a percentile that fell on a failed read is
// infinite and prints as "failed".
func msText(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "failed"
	case math.IsNaN(x):
		return "-"
	}
	return strconv.FormatFloat(x, 'f', 1, 64) + "ms"
}
