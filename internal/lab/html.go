package lab

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tailgate-dev/tailgate/internal/lab/report"
)

// Sectioner is an experiment report that can show itself in the HTML page.
type Sectioner interface {
	Section() report.Section
}

// WriteHTML writes one self-contained HTML page holding the given reports.
func WriteHTML(w io.Writer, title string, env Environment, parts ...Sectioner) error {
	p := report.Page{
		Title:    title,
		Subtitle: "Tailgate lab: what hedging and fan-out policies gain in latency, and what they cost in duplicate work",
		Meta: [][2]string{
			{"Go", env.GoVersion},
			{"CPUs", strconv.Itoa(env.CPUs) + " (GOMAXPROCS " + strconv.Itoa(env.GOMAXPROCS) + ")"},
			{"Seed", strconv.FormatUint(env.Seed, 10)},
			{"Started", env.Started.Format(time.RFC3339)},
		},
	}
	for _, s := range parts {
		p.Sections = append(p.Sections, s.Section())
	}
	return report.RenderHTML(w, p)
}

func f1(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
func f2(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
func f3(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

// fms writes a latency percentile in ms (see Summary): "failed" when it is
// infinite, as the request at its rank got no good answer, and "—" when
// there is none (no requests).
func fms(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "failed"
	case math.IsNaN(x) || math.IsInf(x, -1):
		return "—"
	}
	return f1(x)
}

// drawable reports whether a value can be placed on a plot.
func drawable(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }

// latencyCDF is the CDF series of a side's successful latencies out of all
// its requests, so that it tops out at the share that succeeded.
func latencyCDF(name string, latenciesMs []float64, requests int, dashed bool) report.Series {
	s := report.CDFOutOf(name, latenciesMs, requests, 300)
	s.Dashed = dashed
	return s
}

// cdfCaption ends the caption of a latency CDF.
const cdfCaption = " A curve rises to the share of reads that succeeded: failed reads never arrive, so a curve that stops short of 1 shows them."

var latencyColumns = []string{"", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"}

func latencyRow(name string, s Summary) []string {
	return []string{name, fms(s.P50Ms), fms(s.P90Ms), fms(s.P99Ms), fms(s.P999Ms), fms(s.MaxMs)}
}

// Section implements Sectioner.
func (r *CompareReport) Section() report.Section {
	b, h := r.Latencies()
	work := "External endpoints: their work cannot be seen, only the client's attempts."
	if r.FixtureWork != nil {
		work = fmt.Sprintf("The fixtures started %d requests for the baseline and %d for the hedged run; %d of the hedged run's completed after their client had gone (wasted work).",
			r.FixtureWork.Baseline.Started, r.FixtureWork.Hedged.Started, r.FixtureWork.Hedged.CompletedAfterCancel)
	}
	return report.Section{
		Heading: "compare: one slow primary, one fast secondary",
		Text: fmt.Sprintf("%d reads at %.0f/s from %s alone, then hedged to %s after %.0f ms. %s",
			r.Config.Samples, r.Config.Rate, r.Config.Primary, r.Config.Secondary, r.Config.DelayMs, work),
		Plots: []report.Plot{{
			Title: "Latency CDF", XLabel: "latency (ms, log scale)", YLabel: "fraction of reads", LogX: true, YMin: 0, YMax: 1,
			Series: []report.Series{
				latencyCDF("baseline (primary only)", b, r.Baseline.Requests, true),
				latencyCDF("hedged", h, r.Hedged.Requests, false),
			},
			Caption: "The further left, the faster; the gap between the curves near the top is the tail hedging removes." + cdfCaption,
		}},
		Tables: []report.Table{{
			Title:   "Latency and attempts",
			Columns: append(append([]string{}, latencyColumns...), "attempts", "refused"),
			Rows: [][]string{
				append(latencyRow("baseline", r.Baseline.Summary), strconv.Itoa(r.Baseline.Attempts), strconv.Itoa(r.Baseline.Refused)),
				append(latencyRow("hedged", r.Hedged.Summary), strconv.Itoa(r.Hedged.Attempts), strconv.Itoa(r.Hedged.Refused)),
			},
		}},
	}
}

// Section implements Sectioner.
func (r *StragglerReport) Section() report.Section {
	b, h := r.Latencies()
	return report.Section{
		Heading: "straggler: a few slow primaries, through the gateway",
		Text: fmt.Sprintf("%d reads at %.0f/s against two replicas (%s), directly with alternating primaries, then through the gateway (hedge delay %s). Attempts and wasted work are the replicas' own counts.",
			r.Requests, r.Rate, r.Model, r.HedgeDelay),
		Plots: []report.Plot{{
			Title: "Latency CDF", XLabel: "latency (ms, log scale)", YLabel: "fraction of reads", LogX: true, YMin: 0, YMax: 1,
			Series: []report.Series{
				latencyCDF("direct", b, r.Baseline.Requests, true),
				latencyCDF("through the gateway", h, r.Hedged.Requests, false),
			},
			Caption: "The direct curve stalls near the top where the stragglers are; through the gateway, hedges pull that tail in." + cdfCaption,
		}},
		Tables: []report.Table{{
			Title:   "Latency and work",
			Columns: append(append([]string{}, latencyColumns...), "backend attempts / read", "wasted / read"),
			Rows: [][]string{
				append(latencyRow("direct", r.Baseline.Summary), f3(r.Baseline.BackendAttemptsPerRequest), f3(float64(r.Baseline.Work.CompletedAfterCancel)/float64(r.Requests))),
				append(latencyRow("gateway", r.Hedged.Summary), f3(r.Hedged.BackendAttemptsPerRequest), f3(float64(r.Hedged.Work.CompletedAfterCancel)/float64(r.Requests))),
			},
		}},
	}
}

// Section implements Sectioner.
func (r *SweepReport) Section() report.Section {
	var fixed, adaptive, frontier report.Series
	fixed.Name, fixed.NoLine = "fixed delays", true
	adaptive.Name, adaptive.NoLine = "adaptive percentiles", true
	frontier.Name, frontier.Dashed = "frontier", true
	if drawable(r.Baseline.P99Ms) {
		frontier.Points = append(frontier.Points, report.Point{X: 0, Y: r.Baseline.P99Ms})
	}
	var notes []report.Note
	failedP99 := 0
	rows := [][]string{append(latencyRow(r.Baseline.Label, r.Baseline.Summary), f2(r.Baseline.ExtraAttemptsPct), f2(r.Baseline.WastedPct), "")}
	for _, p := range r.Points {
		pt := report.Point{X: p.ExtraAttemptsPct, Y: p.P99Ms}
		switch {
		case !drawable(pt.Y):
			if math.IsInf(pt.Y, 1) {
				failedP99++
			}
		case p.Quantile > 0:
			adaptive.Points = append(adaptive.Points, pt)
		default:
			fixed.Points = append(fixed.Points, pt)
		}
		if p.Pareto && drawable(pt.Y) {
			frontier.Points = append(frontier.Points, pt)
		}
		mark := ""
		if p.Label == r.Knee {
			mark = "knee"
			notes = append(notes, report.Note{X: pt.X, Y: pt.Y, Text: "knee: " + p.Label})
		} else if p.Pareto {
			mark = "frontier"
		}
		rows = append(rows, append(latencyRow(p.Label, p.Summary), f2(p.ExtraAttemptsPct), f2(p.WastedPct), mark))
	}
	slices.SortFunc(frontier.Points, func(a, b report.Point) int { return cmp.Compare(a.X, b.X) })
	base := report.Series{Name: "no hedging", NoLine: true}
	if drawable(r.Baseline.P99Ms) {
		base.Points = []report.Point{{X: 0, Y: r.Baseline.P99Ms}}
	} else if math.IsInf(r.Baseline.P99Ms, 1) {
		failedP99++
	}
	caption := "Down is faster, left is cheaper. The dashed line joins the frontier (no point beats them on both); short fixed delays buy p99 with a lot of duplicate work."
	if failedP99 > 0 {
		caption += fmt.Sprintf(" %d of the runs had more than 1%% of reads fail, so no p99 read succeeded: they are not drawn (\"failed\" in the table).", failedP99)
	}
	return report.Section{
		Heading: "sweep: what each hedge delay costs",
		Text: fmt.Sprintf("%d reads per point at %.0f/s against two replicas (%s), with the budget and gate opened wide so each delay shows its own cost. The knee is %s: past it, more duplicate work buys little p99.",
			r.Requests, r.Rate, r.Model, r.Knee),
		Plots: []report.Plot{{
			Title: "The latency/work frontier", XLabel: "extra attempts (% of reads)", YLabel: "p99 latency (ms)",
			Series: []report.Series{base, fixed, adaptive, frontier}, Notes: notes,
			Caption: caption,
		}},
		Tables: []report.Table{{
			Title:   "Every point",
			Columns: append(append([]string{}, latencyColumns...), "extra attempts %", "wasted %", ""),
			Rows:    rows,
		}},
	}
}

// Section implements Sectioner.
func (r *OverloadReport) Section() report.Section {
	by := map[OverloadCondition]*[3]report.Series{}
	var order []OverloadCondition
	failedP99 := 0
	for _, p := range r.Points {
		s, ok := by[p.Condition]
		if !ok {
			s = &[3]report.Series{}
			for i := range s {
				s[i].Name, s[i].Marker, s[i].Dashed = string(p.Condition), true, p.Condition == NoHedging
			}
			by[p.Condition] = s
			order = append(order, p.Condition)
		}
		s[0].Points = append(s[0].Points, report.Point{X: p.OfferedRate, Y: p.AttemptsPerRequest})
		s[1].Points = append(s[1].Points, report.Point{X: p.OfferedRate, Y: p.GoodputPerSec})
		if drawable(p.P99Ms) && p.P99Ms > 0 {
			s[2].Points = append(s[2].Points, report.Point{X: p.OfferedRate, Y: p.P99Ms})
		} else if math.IsInf(p.P99Ms, 1) {
			failedP99++
		}
	}
	var amp, good, p99 []report.Series
	for _, c := range order {
		amp, good, p99 = append(amp, by[c][0]), append(good, by[c][1]), append(p99, by[c][2])
	}
	var rows [][]string
	for _, p := range r.Points {
		rows = append(rows, []string{string(p.Condition), f1(p.NominalPerSec), f1(p.OfferedPerSec), f2(p.AttemptsPerRequest), f1(p.GoodputPerSec), fms(p.P99Ms),
			strconv.Itoa(p.Failed + p.Dropped), strconv.Itoa(p.Hedges), strconv.Itoa(p.Suppressed)})
	}
	cap := []report.Note{{X: r.Capacity, Y: 1, Text: "capacity"}}
	p99Caption := "Queueing delay grows past capacity for every condition; extra attempts lengthen the queues. A failed read counts as infinitely slow."
	if failedP99 > 0 {
		p99Caption += fmt.Sprintf(" %d of the points had more than 1%% of reads fail, so their p99 read never succeeded: they are off the top of the plot.", failedP99)
	}
	return report.Section{
		Heading: "overload: hedging past capacity",
		Text: fmt.Sprintf("Open-loop load from below to above the replicas' capacity (%.0f reads/s, FIFO queues), read without hedging, with hedging bounded by the budget and gate, and with hedging unbounded (hedge delay %.0f ms).",
			r.Capacity, r.DelayMs),
		Plots: []report.Plot{
			{Title: "Amplification: attempts per read", XLabel: "nominal offered load (reads/s)", YLabel: "backend attempts per read", Series: amp, Notes: cap,
				Caption: "Unbounded hedging multiplies the load exactly when the queues are full (a hedge storm); the budget and gate keep it near 1."},
			{Title: "Goodput", XLabel: "nominal offered load (reads/s)", YLabel: "successful reads/s", Series: good,
				Caption: "Past capacity, what the duplicate load costs shows here: fewer reads succeed in time."},
			{Title: "p99 of all reads", XLabel: "nominal offered load (reads/s)", YLabel: "p99 (ms, log scale)", LogY: true, Series: p99,
				Caption: p99Caption},
		},
		Tables: []report.Table{{
			Title:   "Every point",
			Columns: []string{"condition", "nominal/s", "offered/s", "attempts/read", "goodput/s", "p99 ms", "failed", "hedges", "suppressed"},
			Rows:    rows,
		}},
	}
}
