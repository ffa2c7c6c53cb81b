package sweep

import (
	"testing"

	"github.com/tailgate-dev/tailgate/internal/lab/load"
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
