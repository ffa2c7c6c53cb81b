package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/exp/compare"
	"github.com/tailgate-dev/tailgate/lab/exp/overload"
	"github.com/tailgate-dev/tailgate/lab/exp/straggler"
	"github.com/tailgate-dev/tailgate/lab/exp/sweep"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
)

const labSynopsis = `Runs a lab experiment on 127.0.0.1 and reports it: JSON Lines on stdout,
the full report as JSON with -out, and an HTML page with plots with -html.

  compare    the lab's client: a primary alone, then hedged to a secondary (your
             endpoints, or fixtures: a slow primary and a fast secondary)
  straggler  two replicas, a few slow primaries: directly, then through the gateway
  sweep      the latency/work frontier: fixed delays and adaptive percentiles
  overload   offered load past capacity, with and without the budget and gate
  fanout     one request to many shards: wait for all, per-shard hedging, good
             enough (k of N), both; -simulate for fleet scale
  bigtable   the shape of the paper's benchmark: 1,000 keys from 100 servers,
             hedged after 10ms; -simulate for virtual servers
  tied       the shape of the paper's Table 2: an idle and a loaded cluster,
             without hedging, hedged, and with tied requests
  probation  one replica degrades mid-run and recovers: a p99 timeline through
             the gateway, with and without latency-induced probation
  skew       cache replicas under Zipf keys: no affinity, hash mod N, micro-
             partitions, and hot-key replication; -simulate for fleet scale
  classes    two kinds of read on one API (an item and a search), each with
             stragglers of its own: the gateway with one class, a class per
             kind, and routes, beside a per-endpoint p90 hedger

Run "tailgate lab <experiment> -h" for its flags.`

var experiments = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) int{
	"compare":   runLabCompare,
	"straggler": runLabStraggler,
	"sweep":     runLabSweep,
	"overload":  runLabOverload,
	"fanout":    runLabFanout,
	"bigtable":  runLabBigtable,
	"tied":      runLabTied,
	"probation": runLabProbation,
	"skew":      runLabSkew,
	"classes":   runLabClasses,
}

func runLab(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		w := stdout
		if len(args) == 0 {
			w = stderr
		}
		fmt.Fprintf(w, "Usage: tailgate lab <experiment> [flags]\n\n%s\n", labSynopsis)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	run, ok := experiments[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tailgate lab: unknown experiment %q: want compare, straggler, sweep, overload, fanout, probation, skew, bigtable, tied or classes\n", args[0])
		return exitUsage
	}
	return run(ctx, args[1:], stdout, stderr)
}

// outputs are the flags every experiment shares.
type outputs struct {
	out, html string
	seed      uint64
}

func (o *outputs) register(fs *flag.FlagSet) {
	fs.StringVar(&o.out, "out", "", "write the full report (receipts included where there are any) as JSON to this file")
	fs.StringVar(&o.html, "html", "", "write a self-contained HTML page with plots to this file")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of arrivals and latency draws (reproducible runs)")
}

// check makes sure -out and -html can be written before a run spends
// minutes on a report that could not be saved.
func (o *outputs) check() error {
	for _, f := range []struct{ flag, path string }{{"-out", o.out}, {"-html", o.html}} {
		if f.path == "" {
			continue
		}
		if fi, err := os.Stat(f.path); err == nil && fi.IsDir() {
			return fmt.Errorf("%s %s is a directory", f.flag, f.path)
		}
		tmp, err := os.CreateTemp(dirOf(f.path), ".tailgate-*")
		if err != nil {
			return fmt.Errorf("%s: cannot write to %s: %w", f.flag, dirOf(f.path), err)
		}
		tmp.Close()
		os.Remove(tmp.Name())
	}
	return nil
}

// run is what every lab experiment does once its flags are parsed into a
// configuration: validate it (the experiment's own rules, reported against
// the flags), check the outputs, run, and write what the run returns.
func (o *outputs) run(ctx context.Context, name string, stdout, stderr io.Writer, validate func() error, run func(context.Context) (exp.Report, any, []any, error)) int {
	if err := validate(); err != nil {
		return configError(stderr, name, err)
	}
	if err := o.check(); err != nil {
		return usageError(stderr, "lab "+name, err)
	}
	rep, config, lines, err := run(ctx)
	if errors.Is(err, exp.ErrConfig) {
		return configError(stderr, name, err)
	}
	if err != nil {
		return failed(stderr, name, err)
	}
	return o.write(name, stdout, stderr, rep, config, lines...)
}

// configError reports a wrong configuration as a usage error: a setting
// the experiment refuses is named as its flag.
func configError(stderr io.Writer, name string, err error) int {
	if fe, ok := errors.AsType[*exp.FieldError](err); ok {
		err = errors.New(fe.Describe("-"))
	}
	return usageError(stderr, "lab "+name, err)
}

// write emits lines as JSON Lines and the report to -out and -html. Each
// line carries the run's environment (seed, Go version, cores) and, when
// given, its configuration, so a line read alone still says what produced
// it.
func (o *outputs) write(name string, stdout, stderr io.Writer, rep exp.Report, config any, lines ...any) int {
	env := rep.Head().Environment
	enc := json.NewEncoder(stdout)
	for _, l := range lines {
		b, err := withContext(l, env, config)
		if err == nil {
			err = enc.Encode(json.RawMessage(b))
		}
		if err != nil {
			fmt.Fprintf(stderr, "tailgate lab %s: %v\n", name, err)
			return exitError
		}
	}
	if o.out != "" {
		if err := writeFile(o.out, func(w io.Writer) error {
			e := json.NewEncoder(w)
			e.SetIndent("", "  ")
			return e.Encode(rep)
		}); err != nil {
			fmt.Fprintf(stderr, "tailgate lab %s: -out: %v\n", name, err)
			return exitError
		}
	}
	if o.html != "" {
		if err := writeFile(o.html, func(w io.Writer) error {
			return exp.WriteHTML(w, "Tailgate lab: "+name, env, rep)
		}); err != nil {
			fmt.Fprintf(stderr, "tailgate lab %s: -html: %v\n", name, err)
			return exitError
		}
		fmt.Fprintf(stderr, "tailgate lab %s: wrote %s\n", name, o.html)
	}
	return exitOK
}

// withContext returns line as a JSON object with "environment" and, when
// config is not nil, "config" appended.
func withContext(line any, env exp.Environment, config any) ([]byte, error) {
	b, err := json.Marshal(line)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("JSON line %.40s is not an object", b)
	}
	extra, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	out := append(b[:len(b)-1:len(b)-1], `,"environment":`...)
	out = append(out, extra...)
	if config != nil {
		if extra, err = json.Marshal(config); err != nil {
			return nil, err
		}
		out = append(append(out, `,"config":`...), extra...)
	}
	if len(b) == 2 { // an empty object: no comma before the first field
		out = append([]byte{'{'}, out[2:]...)
	}
	return append(out, '}'), nil
}

// writeFile writes through a temporary file and renames it into place, so
// a failed run never leaves half a report. The file is readable by all
// (0644), as a report written by any other tool would be.
func writeFile(path string, fill func(io.Writer) error) error {
	tmp, err := os.CreateTemp(dirOf(path), ".tailgate-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := fill(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i+1]
	}
	return "."
}

// progress returns a callback that keeps one status line on stderr when it
// is a terminal, and nil otherwise (a log file gets no carriage returns).
func progress(stderr io.Writer, what string) func(done, total int) {
	f, ok := stderr.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	start := time.Now()
	return func(done, total int) {
		fmt.Fprintf(stderr, "\r%s: %d/%d (%s)", what, done, total, time.Since(start).Round(time.Second))
		if done == total {
			fmt.Fprintln(stderr)
		}
	}
}

func failed(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "tailgate lab %s: %v\n", name, err)
	return exitError
}

func runLabCompare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lab compare", `The lab's bounded client (2 attempts, 64 KiB, 2 s) reading from the primary
alone, then hedging to the secondary after -delay-ms. Without -primary and
-secondary, two fixtures are started on 127.0.0.1: a primary taking 80 ms and
a secondary taking 5 ms. External endpoints must answer GET with 200 and JSON
{"value": "<non-empty>"}; any other answer is reported per attempt.`, stderr)
	var o outputs
	o.register(fs)
	d := compare.Defaults()
	samples := fs.Int("samples", d.Samples, fmt.Sprintf("reads per side (1 to %d)", compare.MaxSamples))
	delay := fs.Float64("delay-ms", load.Ms(d.Delay), "hedge delay in milliseconds (> 0)")
	rate := fs.Float64("rate", d.Rate, "offered load, reads per second (open loop; > 0)")
	primary := fs.String("primary", "", "primary endpoint URL (with -secondary)")
	secondary := fs.String("secondary", "", "secondary endpoint URL (with -primary)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	cfg := compare.Config{Samples: *samples, Delay: time.Duration(*delay * float64(time.Millisecond)),
		Rate: *rate, Primary: *primary, Secondary: *secondary, Seed: o.seed, Progress: progress(stderr, "compare")}
	return o.run(ctx, "compare", stdout, stderr, cfg.Validate, func(ctx context.Context) (exp.Report, any, []any, error) {
		rep, err := compare.Run(ctx, cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		line := struct {
			Experiment  string               `json:"experiment"`
			Baseline    compare.Side         `json:"baseline"`
			Hedged      compare.Side         `json:"hedged"`
			FixtureWork *compare.FixtureWork `json:"fixtureWork"`
			Config      compare.Setup        `json:"config"`
		}{"compare", rep.Baseline, rep.Hedged, rep.FixtureWork, rep.Config}
		return rep, nil, []any{line}, nil
	})
}

func runLabStraggler(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lab straggler", `Two fixtures on 127.0.0.1; a share of the request IDs (-slow-share, spread
evenly: every 20th by default) straggle on whichever replica serves them as a
primary and are fast as a hedge. The same reads go directly with alternating
primaries (baseline), then through the real gateway in-process (hedged).
Latency is measured from each read's scheduled time; attempts and wasted work
are the replicas' counts.

The reference experiment's shape (one of its two hedge settings):
  tailgate lab straggler -slow-share 0.2 -slow 40ms -fast 1ms -hedge-delay 25ms -hedge-fraction 0.1`, stderr)
	var o outputs
	o.register(fs)
	d := straggler.Defaults()
	requests := fs.Int("requests", d.Requests, fmt.Sprintf("reads per side (1 to %d)", straggler.MaxRequests))
	rate := fs.Float64("rate", d.Rate, "offered load, reads per second (open loop; > 0)")
	delay := fs.String("hedge-delay", "auto", `gateway hedge delay: a duration, "auto" or a percentile ("p90")`)
	fraction := fs.Float64("hedge-fraction", hedge.DefaultBudgetFraction, "gateway hedge budget: extra attempts earned per read, in [0, 1]")
	burst := fs.Float64("hedge-burst", hedge.DefaultBudgetBurst, "gateway hedge budget: most hedges in a row (>= 1)")
	share := fs.Float64("slow-share", 0.05, "share of the request IDs slow on their primary, in [0, 1]")
	slow := fs.Duration("slow", 80*time.Millisecond, "a slow primary's latency (> 0, at most 1m)")
	fast := fs.Duration("fast", 2*time.Millisecond, "every other attempt's latency (>= 0, at most -slow)")
	model := fs.String("model", "", "latency model of both replicas instead of -slow-share, -slow and -fast; see tailgate fixture -h")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if *model != "" && (given["slow-share"] || given["slow"] || given["fast"]) {
		return usageError(stderr, "lab straggler", errors.New("-model replaces -slow-share, -slow and -fast: give one or the other"))
	}
	budget, err := hedge.NewBudget(*fraction, *burst)
	if err != nil {
		return usageError(stderr, "lab straggler", fmt.Errorf("-hedge-fraction/-hedge-burst: %w", err))
	}
	p, err := policyFlag(*delay)
	if err != nil {
		return usageError(stderr, "lab straggler", err)
	}
	p.Budget = budget
	m, err := straggler.IDs(*requests, *share, *fast, *slow)
	if *model != "" {
		m, err = fixture.ParseModel(*model)
	}
	if err != nil {
		return configError(stderr, "straggler", err)
	}
	cfg := straggler.Config{Requests: *requests, Rate: *rate, Model: m, Seed: o.seed,
		Gateway: gateway.Config{Policy: p}, Progress: progress(stderr, "straggler")}
	return o.run(ctx, "straggler", stdout, stderr, cfg.Validate, func(ctx context.Context) (exp.Report, any, []any, error) {
		rep, err := straggler.Run(ctx, cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		type line struct {
			Experiment string `json:"experiment"`
			straggler.Side
		}
		config := struct {
			Requests      int     `json:"requests"`
			Rate          float64 `json:"rate"`
			Model         string  `json:"model"`
			HedgeDelay    string  `json:"hedgeDelay"`
			HedgeFraction float64 `json:"hedgeFraction"`
			HedgeBurst    float64 `json:"hedgeBurst"`
		}{rep.Requests, rep.Rate, rep.Model, rep.HedgeDelay, budget.Fraction(), budget.Burst()}
		return rep, config, []any{line{"straggler", rep.Baseline}, line{"straggler", rep.Hedged}}, nil
	})
}

// policyFlag turns a -hedge-delay value into a policy.
func policyFlag(delay string) (hedge.Policy, error) {
	fixed, q, err := hedge.ParseDelay(delay)
	if err != nil {
		return hedge.Policy{}, fmt.Errorf("-hedge-delay: %w", err)
	}
	return hedge.Policy{Delay: fixed, Adaptive: hedge.Adaptive{Quantile: q}}, nil
}

func runLabSweep(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lab sweep", `The latency/work frontier: the same reads through the lab's hedging client
at each fixed delay and each adaptive percentile, against two fixtures, with
the budget and gate opened wide so each point shows its delay's own cost. For
each: p50/p99/p99.9, extra attempts and wasted server work; names the knee.`, stderr)
	var o outputs
	o.register(fs)
	d := sweep.Defaults()
	var delayList, quantileList []string
	for _, x := range d.Delays {
		delayList = append(delayList, x.String())
	}
	for _, q := range d.Quantiles {
		quantileList = append(quantileList, "p"+strconv.FormatFloat(100*q, 'g', -1, 64))
	}
	requests := fs.Int("requests", d.Requests, fmt.Sprintf("reads per point (1 to %d)", sweep.MaxRequests))
	rate := fs.Float64("rate", d.Rate, "offered load, reads per second (open loop; > 0)")
	model := fs.String("model", d.Model.String(), "latency model of both replicas; see tailgate fixture -h")
	delays := fs.String("delays", strings.Join(delayList, ","), "comma-separated fixed delays")
	quantiles := fs.String("quantiles", strings.Join(quantileList, ","), "comma-separated adaptive percentiles")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	m, err := fixture.ParseModel(*model)
	if err != nil {
		return usageError(stderr, "lab sweep", err)
	}
	cfg := sweep.Config{Requests: *requests, Rate: *rate, Model: m, Seed: o.seed, Progress: progress(stderr, "sweep"),
		Delays: []time.Duration{}, Quantiles: []float64{}}
	for _, s := range splitList(*delays) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return usageError(stderr, "lab sweep", fmt.Errorf("-delays: %q is not a duration", s))
		}
		cfg.Delays = append(cfg.Delays, d)
	}
	for _, s := range splitList(*quantiles) {
		_, q, err := hedge.ParseDelay(s)
		if err != nil || q == 0 {
			return usageError(stderr, "lab sweep", fmt.Errorf("-quantiles: %q is not a percentile like p95", s))
		}
		cfg.Quantiles = append(cfg.Quantiles, q)
	}
	return o.run(ctx, "sweep", stdout, stderr, cfg.Validate, func(ctx context.Context) (exp.Report, any, []any, error) {
		rep, err := sweep.Run(ctx, cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		type line struct {
			Experiment string `json:"experiment"`
			sweep.Point
			Knee bool `json:"knee,omitempty"`
		}
		lines := []any{line{"sweep", rep.Baseline, false}}
		for _, p := range rep.Points {
			lines = append(lines, line{"sweep", p, p.Label == rep.Knee})
		}
		config := struct {
			Requests int     `json:"requests"`
			Rate     float64 `json:"rate"`
			Model    string  `json:"model"`
		}{rep.Requests, rep.Rate, rep.Model}
		return rep, config, lines, nil
	})
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func runLabOverload(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lab overload", `Open-loop load from below to above two fixtures' capacity (each serves
-workers requests at once, the rest queue), read without hedging, with
hedging bounded by the budget and gate, and with hedging unbounded, against
FIFO replicas and (-hedge-priority) against replicas that serve queued hedges
only when no primary waits: attempts per read, goodput and p99 at each load.`, stderr)
	var o outputs
	o.register(fs)
	d := overload.Defaults()
	var loadList []string
	for _, l := range d.Loads {
		loadList = append(loadList, strconv.FormatFloat(l, 'g', -1, 64))
	}
	workers := fs.Int("workers", d.Workers, fmt.Sprintf("requests each fixture serves at once (1 to %d)", overload.MaxWorkers))
	service := fs.Duration("service", d.Service, "service time of each request (up to 1s)")
	loads := fs.String("loads", strings.Join(loadList, ","), fmt.Sprintf("offered loads, as multiples of capacity (each in (0, %d])", overload.MaxLoad))
	duration := fs.Duration("duration", d.Duration, "how long each load is offered (up to 1m)")
	delay := fs.Duration("hedge-delay", d.Delay, "hedge delay")
	priority := fs.Bool("hedge-priority", true, "also run unbounded hedging against replicas that queue hedges behind primaries")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	cfg := overload.Config{Workers: *workers, Service: *service, Duration: *duration, Delay: *delay, Seed: o.seed,
		HedgePriority: *priority, Progress: progress(stderr, "overload"), Loads: []float64{}}
	for _, s := range splitList(*loads) {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return usageError(stderr, "lab overload", fmt.Errorf("-loads: %q is not a number", s))
		}
		cfg.Loads = append(cfg.Loads, x)
	}
	return o.run(ctx, "overload", stdout, stderr, cfg.Validate, func(ctx context.Context) (exp.Report, any, []any, error) {
		rep, err := overload.Run(ctx, cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		type line struct {
			Experiment string `json:"experiment"`
			overload.Point
		}
		var lines []any
		for _, p := range rep.Points {
			lines = append(lines, line{"overload", p})
		}
		config := struct {
			Workers        int     `json:"workers"`
			ServiceMs      float64 `json:"serviceMs"`
			DurationMs     float64 `json:"durationMs"`
			CapacityPerSec float64 `json:"capacityPerSec"`
			DelayMs        float64 `json:"delayMs"`
			HedgePriority  bool    `json:"hedgePriority"`
		}{*workers, float64(*service) / 1e6, float64(*duration) / 1e6, rep.Capacity, rep.DelayMs, *priority}
		return rep, config, lines, nil
	})
}
