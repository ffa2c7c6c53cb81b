package sweep

import (
	"strings"
	"testing"

	"github.com/tailgate-dev/tailgate/lab/load"
)

func TestMarkFrontierAndKnee(t *testing.T) {
	base := Point{Label: "none", Summary: load.Summary{P99Ms: 100}}
	pts := []Point{
		{Label: "a", Summary: load.Summary{P99Ms: 20}, ExtraAttemptsPct: 80},
		{Label: "b", Summary: load.Summary{P99Ms: 30}, ExtraAttemptsPct: 15}, // the knee
		{Label: "c", Summary: load.Summary{P99Ms: 60}, ExtraAttemptsPct: 5},
		{Label: "d", Summary: load.Summary{P99Ms: 70}, ExtraAttemptsPct: 40}, // dominated by b
		{Label: "e", Summary: load.Summary{P99Ms: 110}, ExtraAttemptsPct: 1}, // slower than no hedging
	}
	if knee := markFrontier(base, pts); knee != "b" {
		t.Errorf("knee %q, want b", knee)
	}
	if !pts[0].Pareto || !pts[1].Pareto || !pts[2].Pareto || pts[3].Pareto || pts[4].Pareto {
		t.Errorf("frontier flags %v %v %v %v %v", pts[0].Pareto, pts[1].Pareto, pts[2].Pareto, pts[3].Pareto, pts[4].Pareto)
	}
	if markFrontier(base, nil) != "" {
		t.Error("knee of nothing")
	}
}

// The frontier plot puts p99 on a log axis, so that an outlier of seconds
// leaves the other points apart; the table bounds each p99 at 95%
// confidence and marks a point that stands with a stall of the machine,
// which the text counts; a sweep without a knee says so.
func TestSectionLogAxisIntervalsAndStalls(t *testing.T) {
	lo, hi := 18.5, 25.0
	r := &Report{Requests: 2000, Rate: 1000, Model: "m", Knee: "fixed 5ms",
		Baseline: Point{Label: "no hedging", Summary: load.Summary{P99Ms: 60}, Runs: 1, StallMs: 3},
		Points: []Point{
			{Label: "fixed 5ms", Summary: load.Summary{P99Ms: 21}, P99LowMs: &lo, P99HighMs: &hi, ExtraAttemptsPct: 50, Pareto: true, Runs: 2, StallMs: 4},
			{Label: "fixed 40ms", Summary: load.Summary{P99Ms: 2500}, ExtraAttemptsPct: 3, Runs: 2, StallMs: 35},
		}}
	s := r.Section()
	if p := s.Plots[0]; !p.LogY || !strings.Contains(p.YLabel, "log") {
		t.Errorf("frontier plot: LogY %v, %q", p.LogY, p.YLabel)
	}
	rows := s.Tables[0].Rows
	if got := rows[1][6]; got != "18.5–25.0" {
		t.Errorf("fixed 5ms p99 CI %q", got)
	}
	if got := rows[2][6]; got != "?–?" {
		t.Errorf("unbounded p99 CI %q", got)
	}
	if got := rows[2][len(rows[2])-1]; got != "stalled 35.0ms" || rows[1][len(rows[1])-1] != "knee" {
		t.Errorf("marks %q, %q", rows[1][len(rows[1])-1], got)
	}
	if !strings.Contains(s.Text, "2 of the points saw the machine stall") || !strings.Contains(s.Text, "1 stand with such a stall") {
		t.Errorf("text: %s", s.Text)
	}
	r.Knee = ""
	if !strings.Contains(r.Section().Text, "There is no knee") {
		t.Errorf("no knee: %s", r.Section().Text)
	}
}
