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
	"github.com/tailgate-dev/tailgate/internal/lab"
)

const labSynopsis = `Runs a lab experiment on 127.0.0.1 and reports it: JSON Lines on stdout,
the full report as JSON with -out, and an HTML page with plots with -html.

  compare    the lab's client: one slow primary alone, then hedged to a fast secondary
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
		fmt.Fprintf(stderr, "tailgate lab: unknown experiment %q: want compare, straggler, sweep, overload, fanout, probation, bigtable or tied\n", args[0])
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

// write emits lines as JSON Lines and the report to -out and -html. Each
// line carries the run's environment (seed, Go version, cores) and, when
// given, its configuration, so a line read alone still says what produced
// it.
func (o *outputs) write(name string, stdout, stderr io.Writer, rep lab.Sectioner, env lab.Environment, config any, lines ...any) int {
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
			return lab.WriteHTML(w, "Tailgate lab: "+name, env, rep)
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
func withContext(line any, env lab.Environment, config any) ([]byte, error) {
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
	samples := fs.Int("samples", 200, "reads per side (1 to 100000)")
	delay := fs.Float64("delay-ms", 10, "hedge delay in milliseconds (> 0)")
	rate := fs.Float64("rate", 20, "offered load, reads per second (open loop; > 0)")
	primary := fs.String("primary", "", "primary endpoint URL (with -secondary)")
	secondary := fs.String("secondary", "", "secondary endpoint URL (with -primary)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	switch {
	case *samples < 1 || *samples > 100000:
		return usageError(stderr, "lab compare", fmt.Errorf("-samples %d must be within [1, 100000]", *samples))
	case !(*delay > 0 && *delay <= 60000):
		return usageError(stderr, "lab compare", fmt.Errorf("-delay-ms %v must be within (0, 60000]", *delay))
	case !(*rate > 0 && *rate <= 10000):
		return usageError(stderr, "lab compare", fmt.Errorf("-rate %v must be within (0, 10000]", *rate))
	case (*primary == "") != (*secondary == ""):
		return usageError(stderr, "lab compare", errors.New("-primary and -secondary go together"))
	}
	for _, u := range []string{*primary, *secondary} {
		if u == "" {
			continue
		}
		if _, err := hedge.ParseTarget(baseURL(u)); err != nil {
			return usageError(stderr, "lab compare", err)
		}
	}
	if err := o.check(); err != nil {
		return usageError(stderr, "lab compare", err)
	}
	rep, err := lab.RunCompare(ctx, lab.CompareConfig{Samples: *samples, Delay: time.Duration(*delay * float64(time.Millisecond)),
		Rate: *rate, Primary: *primary, Secondary: *secondary, Seed: o.seed, Progress: progress(stderr, "compare")})
	if err != nil {
		return failed(stderr, "compare", err)
	}
	line := struct {
		Experiment  string                `json:"experiment"`
		Baseline    lab.CompareSide       `json:"baseline"`
		Hedged      lab.CompareSide       `json:"hedged"`
		FixtureWork *lab.CompareWork      `json:"fixtureWork"`
		Config      lab.CompareConfigJSON `json:"config"`
	}{"compare", rep.Baseline, rep.Hedged, rep.FixtureWork, rep.Config}
	return o.write("compare", stdout, stderr, rep, rep.Environment, nil, line)
}

// baseURL trims a full URL to its scheme and host.
func baseURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
			return u[:i+3+j]
		}
	}
	return u
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
	requests := fs.Int("requests", 500, "reads per side (1 to 100000)")
	rate := fs.Float64("rate", 100, "offered load, reads per second (open loop; > 0)")
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
	switch {
	case !(*share >= 0 && *share <= 1):
		return usageError(stderr, "lab straggler", fmt.Errorf("-slow-share %v must be within [0, 1]", *share))
	case *slow <= 0 || *slow > time.Minute:
		return usageError(stderr, "lab straggler", fmt.Errorf("-slow %v must be within (0, 1m]", *slow))
	case *fast < 0 || *fast > *slow:
		return usageError(stderr, "lab straggler", fmt.Errorf("-fast %v must be within [0, -slow]", *fast))
	}
	budget, err := hedge.NewBudget(*fraction, *burst)
	if err != nil {
		return usageError(stderr, "lab straggler", fmt.Errorf("-hedge-fraction/-hedge-burst: %w", err))
	}
	if *requests < 1 || *requests > 100000 {
		return usageError(stderr, "lab straggler", fmt.Errorf("-requests %d must be within [1, 100000]", *requests))
	}
	if !(*rate > 0 && *rate <= 10000) {
		return usageError(stderr, "lab straggler", fmt.Errorf("-rate %v must be within (0, 10000]", *rate))
	}
	p, err := policyFlag(*delay)
	if err != nil {
		return usageError(stderr, "lab straggler", err)
	}
	p.Budget = budget
	m := lab.StragglerIDs(*requests, *share, *fast, *slow)
	if *model != "" {
		if m, err = lab.ParseModel(*model); err != nil {
			return usageError(stderr, "lab straggler", err)
		}
	}
	if err := o.check(); err != nil {
		return usageError(stderr, "lab straggler", err)
	}
	rep, err := lab.RunStraggler(ctx, lab.StragglerConfig{Requests: *requests, Rate: *rate, Model: m, Seed: o.seed,
		Gateway: gateway.Config{Policy: p}, Progress: progress(stderr, "straggler")})
	if err != nil {
		return failed(stderr, "straggler", err)
	}
	type line struct {
		Experiment string `json:"experiment"`
		lab.StragglerSide
	}
	config := struct {
		Requests      int     `json:"requests"`
		Rate          float64 `json:"rate"`
		Model         string  `json:"model"`
		HedgeDelay    string  `json:"hedgeDelay"`
		HedgeFraction float64 `json:"hedgeFraction"`
		HedgeBurst    float64 `json:"hedgeBurst"`
	}{rep.Requests, rep.Rate, rep.Model, rep.HedgeDelay, budget.Fraction(), budget.Burst()}
	return o.write("straggler", stdout, stderr, rep, rep.Environment, config,
		line{"straggler", rep.Baseline}, line{"straggler", rep.Hedged})
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
	requests := fs.Int("requests", 400, "reads per point (1 to 100000)")
	rate := fs.Float64("rate", 200, "offered load, reads per second (open loop; > 0)")
	model := fs.String("model", "lognormal:p50=4ms,p99=60ms", "latency model of both replicas; see tailgate fixture -h")
	delays := fs.String("delays", "1ms,2ms,3ms,5ms,8ms,13ms,20ms,30ms,50ms", "comma-separated fixed delays")
	quantiles := fs.String("quantiles", "p50,p75,p90,p95,p99", "comma-separated adaptive percentiles")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	if *requests < 1 || *requests > 100000 {
		return usageError(stderr, "lab sweep", fmt.Errorf("-requests %d must be within [1, 100000]", *requests))
	}
	if !(*rate > 0 && *rate <= 10000) {
		return usageError(stderr, "lab sweep", fmt.Errorf("-rate %v must be within (0, 10000]", *rate))
	}
	m, err := lab.ParseModel(*model)
	if err != nil {
		return usageError(stderr, "lab sweep", err)
	}
	cfg := lab.SweepConfig{Requests: *requests, Rate: *rate, Model: m, Seed: o.seed, Progress: progress(stderr, "sweep")}
	cfg.Delays = []time.Duration{}
	for _, s := range splitList(*delays) {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > time.Minute {
			return usageError(stderr, "lab sweep", fmt.Errorf("-delays: %q is not a duration within (0, 1m]", s))
		}
		cfg.Delays = append(cfg.Delays, d)
	}
	cfg.Quantiles = []float64{}
	for _, s := range splitList(*quantiles) {
		_, q, err := hedge.ParseDelay(s)
		if err != nil || q == 0 {
			return usageError(stderr, "lab sweep", fmt.Errorf("-quantiles: %q is not a percentile like p95", s))
		}
		cfg.Quantiles = append(cfg.Quantiles, q)
	}
	if len(cfg.Delays)+len(cfg.Quantiles) == 0 {
		return usageError(stderr, "lab sweep", errors.New("nothing to sweep: give -delays or -quantiles"))
	}
	if err := o.check(); err != nil {
		return usageError(stderr, "lab sweep", err)
	}
	rep, err := lab.RunSweep(ctx, cfg)
	if err != nil {
		return failed(stderr, "sweep", err)
	}
	type line struct {
		Experiment string `json:"experiment"`
		lab.SweepPoint
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
	return o.write("sweep", stdout, stderr, rep, rep.Environment, config, lines...)
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
	workers := fs.Int("workers", 2, "requests each fixture serves at once (1 to 64)")
	service := fs.Duration("service", 20*time.Millisecond, "service time of each request (up to 1s)")
	loads := fs.String("loads", "0.5,0.8,1,1.2,1.5,2", "offered loads, as multiples of capacity (each in (0, 5])")
	duration := fs.Duration("duration", 3*time.Second, "how long each load is offered (up to 1m)")
	delay := fs.Duration("hedge-delay", 30*time.Millisecond, "hedge delay")
	priority := fs.Bool("hedge-priority", true, "also run unbounded hedging against replicas that queue hedges behind primaries")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	switch {
	case *workers < 1 || *workers > 64:
		return usageError(stderr, "lab overload", fmt.Errorf("-workers %d must be within [1, 64]", *workers))
	case *service <= 0 || *service > time.Second:
		return usageError(stderr, "lab overload", fmt.Errorf("-service %v must be within (0, 1s]", *service))
	case *duration <= 0 || *duration > time.Minute:
		return usageError(stderr, "lab overload", fmt.Errorf("-duration %v must be within (0, 1m]", *duration))
	case *delay <= 0 || *delay > time.Minute:
		return usageError(stderr, "lab overload", fmt.Errorf("-hedge-delay %v must be within (0, 1m]", *delay))
	}
	cfg := lab.OverloadConfig{Workers: *workers, Service: *service, Duration: *duration, Delay: *delay, Seed: o.seed,
		HedgePriority: *priority, Progress: progress(stderr, "overload")}
	for _, s := range splitList(*loads) {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || !(x > 0 && x <= 5) {
			return usageError(stderr, "lab overload", fmt.Errorf("-loads: %q is not a multiple within (0, 5]", s))
		}
		cfg.Loads = append(cfg.Loads, x)
	}
	if len(cfg.Loads) == 0 {
		return usageError(stderr, "lab overload", errors.New("-loads is empty"))
	}
	if rps := 2 * float64(*workers) / service.Seconds() * maxOf(cfg.Loads); rps > 5000 {
		return usageError(stderr, "lab overload", fmt.Errorf("the highest load would offer %.0f reads/s: keep it under 5000 (fewer -workers, longer -service)", rps))
	}
	if err := o.check(); err != nil {
		return usageError(stderr, "lab overload", err)
	}
	rep, err := lab.RunOverload(ctx, cfg)
	if err != nil {
		return failed(stderr, "overload", err)
	}
	type line struct {
		Experiment string `json:"experiment"`
		lab.OverloadPoint
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
	return o.write("overload", stdout, stderr, rep, rep.Environment, config, lines...)
}

func maxOf(x []float64) float64 {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	return m
}
