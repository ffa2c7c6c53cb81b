package sweep

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/report"
)

// Point is one hedging configuration's result.
type Point struct {
	Label    string  `json:"label"`
	DelayMs  float64 `json:"delayMs,omitempty"`
	Quantile float64 `json:"quantile,omitempty"`
	load.Summary
	// P99LowMs and P99HighMs bound the p99 at 95% confidence (from the
	// reads' order statistics: how far the p99 of Requests reads can be
	// from the replicas' own); null where the reads are too few to bound
	// it, or where a failed read is the bound.
	P99LowMs  *float64 `json:"p99LowMs"`
	P99HighMs *float64 `json:"p99HighMs"`
	// ExtraAttemptsPct is the share of attempts beyond one per read, by
	// the fixtures' counters.
	ExtraAttemptsPct float64 `json:"extraAttemptsPct"`
	// WastedPct is work the fixtures completed for attempts nobody waited
	// for any more, per read.
	WastedPct float64 `json:"wastedPct"`
	// Work sets the attempts the client launched, by its receipts
	// (ClientAttempts), beside what the fixtures started, and their
	// difference (Unreconciled: attempts cancelled before they reached a
	// fixture).
	Work exp.Work `json:"work"`
	// ReceiptsMissing counts reads sent whose receipt had not arrived when
	// the point was counted; their attempts are missing from
	// Work.ClientAttempts. Normally zero.
	ReceiptsMissing int `json:"receiptsMissing,omitempty"`
	// StallMs is the longest this process waited for the CPU during the
	// point's run (exp.StallMeter): a stall of the machine, not of what is
	// measured. Runs counts the runs of the point: one that saw a stall
	// over 20ms ran again, once (three points at most a sweep), and the
	// less stalled run stands.
	StallMs float64 `json:"stallMs"`
	Runs    int     `json:"runs"`
	// Pareto is true when no other point has both a lower p99 and less
	// extra work.
	Pareto bool `json:"pareto"`
}

// Report is the sweep experiment's report.
type Report struct {
	exp.Header
	Model    string  `json:"model"`
	Requests int     `json:"requests"`
	Rate     float64 `json:"rate"`
	Baseline Point   `json:"baseline"`
	Points   []Point `json:"points"`
	// Knee names the point past which more duplicate work buys little
	// p99: on the Pareto frontier, the farthest below the chord from the
	// baseline to the lowest p99 (in normalised coordinates).
	Knee string `json:"knee"`
}

// Section implements Sectioner.
func (r *Report) Section() report.Section {
	var fixed, adaptive, frontier report.Series
	fixed.Name, fixed.NoLine = "fixed delays", true
	adaptive.Name, adaptive.NoLine = "adaptive percentiles", true
	frontier.Name, frontier.Dashed = "frontier", true
	if exp.Drawable(r.Baseline.P99Ms) {
		frontier.Points = append(frontier.Points, report.Point{X: 0, Y: r.Baseline.P99Ms})
	}
	var notes []report.Note
	failedP99 := 0
	rows := [][]string{exp.LatencyRow(r.Baseline.Label, r.Baseline.Summary, r.Baseline.P99CI(), exp.F2(r.Baseline.ExtraAttemptsPct), exp.F2(r.Baseline.WastedPct), "")}
	for _, p := range r.Points {
		pt := report.Point{X: p.ExtraAttemptsPct, Y: p.P99Ms}
		switch {
		case !exp.Drawable(pt.Y):
			if math.IsInf(pt.Y, 1) {
				failedP99++
			}
		case p.Quantile > 0:
			adaptive.Points = append(adaptive.Points, pt)
		default:
			fixed.Points = append(fixed.Points, pt)
		}
		if p.Pareto && exp.Drawable(pt.Y) {
			frontier.Points = append(frontier.Points, pt)
		}
		mark := ""
		if p.Label == r.Knee {
			mark = "knee"
			notes = append(notes, report.Note{X: pt.X, Y: pt.Y, Text: "knee: " + p.Label})
		} else if p.Pareto {
			mark = "frontier"
		}
		if p.StallMs > load.Ms(maxStall) {
			mark = strings.TrimSpace(mark + " stalled " + exp.F1(p.StallMs) + "ms")
		}
		rows = append(rows, exp.LatencyRow(p.Label, p.Summary, p.P99CI(), exp.F2(p.ExtraAttemptsPct), exp.F2(p.WastedPct), mark))
	}
	slices.SortFunc(frontier.Points, func(a, b report.Point) int { return cmp.Compare(a.X, b.X) })
	base := report.Series{Name: "no hedging", NoLine: true}
	if exp.Drawable(r.Baseline.P99Ms) {
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
		Text: fmt.Sprintf("%d reads per point at %.0f/s against two replicas (%s), with the budget and gate opened wide so each delay shows its own cost. %s The table bounds each p99 at 95%% confidence: two points whose intervals overlap may not differ. %s",
			r.Requests, r.Rate, r.Model, r.KneeText(), r.StallText()),
		// p99 on a log axis: one point's outlier (a run of 2.5 s on a
		// busy machine) would otherwise flatten all the others.
		Plots: []report.Plot{{
			Title: "The latency/work frontier", XLabel: "extra attempts (% of reads)", YLabel: "p99 latency (ms, log scale)", LogY: true,
			Series: []report.Series{base, fixed, adaptive, frontier}, Notes: notes,
			Caption: caption,
		}},
		Tables: []report.Table{{
			Title:   "Every point",
			Columns: exp.LatencyColumns("p99 95% CI ms", "extra attempts %", "wasted %", ""),
			// The interval is a figure: right, and whole ("18.0–25.3").
			Align: []string{6: "right"},
			Rows:  rows,
		}},
	}
}

// P99CI writes the p99's confidence interval in ms, for a table: "lo–hi",
// with "?" for a side the reads cannot bound.
func (p Point) P99CI() string {
	side := func(v *float64) string {
		if v == nil {
			return "?"
		}
		return exp.F1(*v)
	}
	return side(p.P99LowMs) + "–" + side(p.P99HighMs)
}

// setP99CI bounds p's p99 from sorted, every read's latency as
// load.SortedMs gives them.
func (p *Point) setP99CI(sorted []float64) {
	lo, hi := load.QuantileCI(sorted, 0.99, 0.05)
	bound := func(v float64) *float64 {
		if !exp.Drawable(v) {
			return nil
		}
		return &v
	}
	p.P99LowMs, p.P99HighMs = bound(lo), bound(hi)
}

// KneeText says where the knee is, in a sentence, or that there is none:
// no point beat no hedging's p99 (on a machine busy enough, none may).
func (r *Report) KneeText() string {
	if r.Knee == "" {
		return "There is no knee: no delay beat no hedging's p99 in this run."
	}
	return "The knee is " + r.Knee + ": past it, more duplicate work buys little p99."
}

// StallText says how many points ran again for a stall of the machine,
// and how many stand with one (marked in the table), or "" for none.
func (r *Report) StallText() string {
	again, stalled := 0, 0
	for _, p := range append([]Point{r.Baseline}, r.Points...) {
		if p.Runs > 1 {
			again++
		}
		if p.StallMs > load.Ms(maxStall) {
			stalled++
		}
	}
	if again == 0 && stalled == 0 {
		return ""
	}
	stand := "none stands with such a stall"
	if stalled > 0 {
		stand = fmt.Sprintf("%d stand with such a stall, marked", stalled)
	}
	return fmt.Sprintf("%d of the points saw the machine stall this process for over %v (a neighbour's work, the hypervisor's steal) and ran again (%d at most); %s.",
		again, maxStall, maxReruns, stand)
}
