package fanout

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/report"
)

// SimReport is the simulated fanout experiment's report.
type SimReport struct {
	Setup
	Policies    []Simulated       `json:"policies"`
	Arithmetic  []ArithmeticCheck `json:"arithmetic"`
	Table1      []Table1          `json:"table1"`
	PaperTable1 []Table1Row       `json:"paperTable1"`
}

// Simulate runs the fanout experiment's policies in the simulator
// (cfg.SimRequests requests each, at any fan-out), checks the simulator
// against the arithmetic of fan-out, and reproduces the shape of Table 1.
// Requests, Rate and Progress's granularity of cfg are those of a loopback
// run and are not used, except that Progress is told as each part ends.
func Simulate(ctx context.Context, cfg Config, opts SimOptions) (*SimReport, error) {
	cfg, opts = cfg.withDefaults(), opts.withDefaults()
	if err := cfg.ValidateSim(opts); err != nil {
		return nil, err
	}
	cfg, sample := cfg.sampled()
	lat, err := fixture.SimLatency(cfg.Model)
	if err != nil {
		return nil, err
	}
	fanouts := opts.ArithmeticFanouts
	if !slices.Contains(fanouts, cfg.Shards) {
		fanouts = append(fanouts, cfg.Shards)
	}
	slices.Sort(fanouts)
	rep := &SimReport{Setup: newSetup("fanout-simulated", cfg, sample, cfg.SimRequests, 0), PaperTable1: paperTable1}
	parts := []func() error{
		func() (err error) {
			rep.Policies, err = simulatePolicies(cfg, lat, cfg.SimRequests)
			return err
		},
		func() error {
			for i, n := range fanouts {
				c, err := checkArithmetic(lat, sample, n, cfg.SimRequests, cfg.Seed*7_919+uint64(i))
				if err != nil {
					return err
				}
				rep.Arithmetic = append(rep.Arithmetic, c)
			}
			return nil
		},
		func() error {
			spreads := []float64{0}
			if opts.SharedSpread > 0 {
				spreads = append(spreads, opts.SharedSpread)
			}
			for _, s := range spreads {
				t, err := simulateTable1(lat, opts.Table1Fanout, cfg.SimRequests, s, cfg.Seed)
				if err != nil {
					return err
				}
				rep.Table1 = append(rep.Table1, t)
			}
			return nil
		},
	}
	if err := exp.Run(ctx, &rep.Header, len(parts), cfg.Progress, func(i int) error { return parts[i]() }); err != nil {
		return nil, err
	}
	return rep, nil
}

// Section implements Sectioner.
func (r *SimReport) Section() report.Section {
	rows := [][]string{{"predicted: wait for all", exp.F1(r.WaitForAll.P50Ms), "", exp.F1(r.WaitForAll.P99Ms), exp.F1(r.WaitForAll.P999Ms), "", "0.00", "0.00"}}
	for _, p := range r.Policies {
		rows = append(rows, []string{p.Policy, exp.F1(p.P50Ms), exp.F1(p.P90Ms), exp.F1(p.P99Ms), exp.F1(p.P999Ms), exp.F1(p.MaxMs), exp.F2(p.ExtraAttemptsPct), exp.F2(p.PartialShare)})
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
		{Title: "Simulated policies", Columns: exp.LatencyColumns("extra attempts %", "partial share"), Rows: rows},
		{Title: fmt.Sprintf("Requests that wait on a shard slower than its p99 (%.1f ms)", r.PerShard.P99Ms),
			Columns: []string{"fan-out", "predicted", "simulated", "std. error", fmt.Sprintf("within %d SE", arithmeticSigmas)}, Rows: arith},
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
		t.Rows = append(t.Rows, []string{r.Name, exp.F1(r.P50Ms), exp.F1(r.P95Ms), exp.F1(r.P99Ms)})
	}
	return t
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
