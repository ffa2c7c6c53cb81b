package lab

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tailgate-dev/tailgate/internal/lab/report"
)

// DefaultArithmeticFanouts are the fan-outs SimulateFanout checks against
// the arithmetic, besides the configured one.
var DefaultArithmeticFanouts = []int{1, 10, 100, 1000, 2000}

// DefaultTable1Fanout is the fan-out of SimulateFanout's Table 1, and
// DefaultSharedSpread the spread of its shared per-request factor.
const (
	DefaultTable1Fanout = 2000
	DefaultSharedSpread = 0.8
)

// SimulateOptions are the parts of a simulated fanout run that a loopback
// run does not have. Zero fields take the defaults.
type SimulateOptions struct {
	// ArithmeticFanouts to check; default DefaultArithmeticFanouts plus
	// the configured fan-out.
	ArithmeticFanouts []int
	// Table1Fanout is the fan-out of the Table 1 rows; default
	// DefaultTable1Fanout.
	Table1Fanout int
	// SharedSpread is the sigma of the per-request factor of the second
	// Table 1; default DefaultSharedSpread; negative skips it.
	SharedSpread float64
}

// FanoutSimReport is the simulated fanout experiment's report.
type FanoutSimReport struct {
	FanoutSetup
	Policies    []SimulatedPolicy `json:"policies"`
	Arithmetic  []ArithmeticCheck `json:"arithmetic"`
	Table1      []Table1          `json:"table1"`
	PaperTable1 []Table1Row       `json:"paperTable1"`
}

// SimulateFanout runs the fanout experiment's policies in the simulator
// (cfg.SimRequests requests each, at any fan-out), checks the simulator
// against the arithmetic of fan-out, and reproduces the shape of Table 1.
// Requests, Rate and Progress's granularity of cfg are those of a loopback
// run and are not used, except that Progress is told as each part ends.
func SimulateFanout(ctx context.Context, cfg FanoutConfig, opts SimulateOptions) (*FanoutSimReport, error) {
	// The options first: they are cheap to check, the defaults are not.
	if opts.ArithmeticFanouts == nil {
		opts.ArithmeticFanouts = DefaultArithmeticFanouts
	}
	fanouts := slices.Clone(opts.ArithmeticFanouts)
	if opts.Table1Fanout == 0 {
		opts.Table1Fanout = DefaultTable1Fanout
	}
	if opts.SharedSpread == 0 {
		opts.SharedSpread = DefaultSharedSpread
	}
	for _, n := range append(fanouts, opts.Table1Fanout, max(cfg.Shards, 1)) {
		if n < 1 || n > maxSimFanout {
			return nil, fmt.Errorf("lab: simulated fan-out %d is outside [1, %d]", n, maxSimFanout)
		}
	}
	if !(opts.SharedSpread <= maxSharedSpread) { // NaN too
		return nil, fmt.Errorf("lab: shared spread %v is above %v", opts.SharedSpread, maxSharedSpread)
	}
	cfg, sample, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	lat, err := simLatency(cfg.Model)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(fanouts, cfg.Shards) {
		fanouts = append(fanouts, cfg.Shards)
	}
	slices.Sort(fanouts)
	rep := &FanoutSimReport{FanoutSetup: newFanoutSetup("fanout-simulated", cfg, sample, cfg.SimRequests, 0), PaperTable1: PaperTable1}
	steps, step := 3, 0
	progress := func() error {
		step++
		if cfg.Progress != nil {
			cfg.Progress(step, steps)
		}
		return ctx.Err()
	}
	if rep.Policies, err = simulatePolicies(cfg, lat, cfg.SimRequests); err != nil {
		return nil, err
	}
	if err := progress(); err != nil {
		return nil, err
	}
	for i, n := range fanouts {
		c, err := checkArithmetic(lat, sample, n, cfg.SimRequests, cfg.Seed*7_919+uint64(i))
		if err != nil {
			return nil, err
		}
		rep.Arithmetic = append(rep.Arithmetic, c)
	}
	if err := progress(); err != nil {
		return nil, err
	}
	spreads := []float64{0}
	if opts.SharedSpread > 0 {
		spreads = append(spreads, opts.SharedSpread)
	}
	for _, s := range spreads {
		t, err := simulateTable1(lat, opts.Table1Fanout, cfg.SimRequests, s, cfg.Seed)
		if err != nil {
			return nil, err
		}
		rep.Table1 = append(rep.Table1, t)
	}
	if err := progress(); err != nil {
		return nil, err
	}
	rep.Environment.finish()
	return rep, nil
}

// Limits of a simulated run, beyond lab/sim's own: a fan-out of a million
// at order statistics costs what 60 does, but Table 1's exact rows and the
// budgeted bigtable run draw every shard.
const (
	maxSimFanout    = 1_000_000
	maxSharedSpread = 3
)

// Section implements Sectioner.
func (r *FanoutSimReport) Section() report.Section {
	rows := [][]string{{"predicted: wait for all", f1(r.WaitForAll.P50Ms), "", f1(r.WaitForAll.P99Ms), f1(r.WaitForAll.P999Ms), "", "0.00", "0.00"}}
	for _, p := range r.Policies {
		rows = append(rows, []string{p.Policy, f1(p.P50Ms), f1(p.P90Ms), f1(p.P99Ms), f1(p.P999Ms), f1(p.MaxMs), f2(p.ExtraAttemptsPct), f2(p.PartialShare)})
	}
	pred := report.Series{Name: "1 - (1 - p)^N", Dashed: true}
	simd := report.Series{Name: "simulated", Marker: true, NoLine: true}
	arith := [][]string{}
	share := func(x float64) string { return strconv.FormatFloat(x, 'g', 5, 64) }
	for _, a := range r.Arithmetic {
		simd.Points = append(simd.Points, report.Point{X: float64(a.Fanout), Y: a.SimulatedSlowShare})
		arith = append(arith, []string{strconv.Itoa(a.Fanout), share(a.PredictedSlowShare), share(a.SimulatedSlowShare),
			share(a.StdErr), yesNo(a.Agrees)})
	}
	if n := len(r.Arithmetic); n > 0 {
		// The arithmetic as a curve: 1 - (1 - p)^N at 50 fan-outs per decade.
		p, hi := r.Arithmetic[0].ShardSlowShare, float64(r.Arithmetic[n-1].Fanout)
		for x := 1.0; x <= hi*1.0001; x *= math.Pow(10, 1.0/50) {
			pred.Points = append(pred.Points, report.Point{X: x, Y: 1 - math.Pow(1-p, x)})
		}
	}
	tables := []report.Table{
		{Title: "Simulated policies", Columns: append(append([]string{}, latencyColumns...), "extra attempts %", "partial share"), Rows: rows},
		{Title: fmt.Sprintf("Requests that wait on a shard slower than its p99 (%.1f ms)", r.PerShard.P99Ms),
			Columns: []string{"fan-out", "predicted", "simulated", "std. error", fmt.Sprintf("within %d SE", ArithmeticSigmas)}, Rows: arith},
	}
	for _, t := range r.Table1 {
		title := fmt.Sprintf("Table 1 at fan-out %d, independent leaves", t.Fanout)
		if t.SharedSpread > 0 {
			title = fmt.Sprintf("Table 1 at fan-out %d, leaves sharing a per-request factor (lognormal, sigma %.2g)", t.Fanout, t.SharedSpread)
		}
		tables = append(tables, table1(title, t.Rows))
	}
	tables = append(tables, table1("Table 1 of the paper (its service, for shape only)", r.PaperTable1))
	return report.Section{
		Heading: fmt.Sprintf("fanout, simulated: %d shards, %d requests per policy", r.Shards, r.Requests),
		Text: fmt.Sprintf("The fanout policies against virtual servers (%s per shard; one shard: p50 %.1f ms, p99 %.1f ms), no sockets. "+
			"The simulator reproduces the arithmetic of fan-out: the share of requests that meet a shard slower than its p99 is 1 - (1 - p)^N. "+
			"Table 1's shape: waiting for 95%% or all of the leaves is far slower than one leaf; with independent leaves the 95%% row's p99 stays near a leaf's p95, and only a cause the leaves share lifts it as high as the paper's.",
			r.Model, r.PerShard.P50Ms, r.PerShard.P99Ms),
		Plots: []report.Plot{{
			Title: "Share of requests slowed by a slow shard", XLabel: "fan-out (log scale)", YLabel: "share of requests", LogX: true,
			YMin: 0, YMax: 1, Series: []report.Series{pred, simd},
			Caption: "The line is the arithmetic, the markers the simulation: with 100 shards each slow 1% of the time, 63% of requests are slow.",
		}},
		Tables: tables,
	}
}

func table1(title string, rows []Table1Row) report.Table {
	t := report.Table{Title: title, Columns: []string{"", "p50 ms", "p95 ms", "p99 ms"}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{r.Name, f1(r.P50Ms), f1(r.P95Ms), f1(r.P99Ms)})
	}
	return t
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
