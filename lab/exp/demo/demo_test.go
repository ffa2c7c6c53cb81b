package demo

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/exp/overload"
	"github.com/tailgate-dev/tailgate/lab/exp/sweep"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/load/loadtest"
)

func TestSweepAndOverloadRun(t *testing.T) {
	sw, err := sweep.Run(context.Background(), sweep.Config{Requests: 60, Rate: 300, Delays: []time.Duration{3 * time.Millisecond}, Quantiles: []float64{0.9}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Points) != 2 || sw.Baseline.ExtraAttemptsPct != 0 || sw.Points[0].ExtraAttemptsPct <= 0 {
		t.Errorf("sweep %+v", sw)
	}
	// Whether hedging wins in 60 requests on a shared machine is timing, not
	// logic (markFrontier is tested deterministically in package sweep); the knee must
	// only name a point on the frontier, or nothing.
	if sw.Knee != "" {
		found := false
		for _, p := range sw.Points {
			found = found || (p.Label == sw.Knee && p.Pareto)
		}
		if !found {
			t.Errorf("knee %q is not a frontier point: %+v", sw.Knee, sw.Points)
		}
	}
	ov, err := overload.Run(context.Background(), overload.Config{Loads: []float64{0.5}, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(ov.Points) != 3 || ov.Capacity != 200 || ov.Points[0].Condition != "no hedging" || ov.Points[0].AttemptsPerRequest != 1 {
		t.Errorf("overload %+v", ov.Points)
	}
	var buf bytes.Buffer
	if err := exp.WriteHTML(&buf, "t", sw.Environment, sw, ov); err != nil || bytes.Count(buf.Bytes(), []byte("<svg")) != 4 {
		t.Errorf("HTML with %d plots: %v", bytes.Count(buf.Bytes(), []byte("<svg")), err)
	}
}

// Infinite percentiles are left out of plots and tables say "failed".
func TestOverloadAndSweepSectionsWithFailures(t *testing.T) {
	bad := load.Summarize(loadtest.Outcomes(50, 10*time.Millisecond, 50, 0), time.Second)
	good := load.Summarize(loadtest.Outcomes(100, 10*time.Millisecond, 0, 0), time.Second)
	ov := &overload.Report{Capacity: 100, Points: []overload.Point{
		{Condition: "no hedging", OfferedRate: 50, Summary: good},
		{Condition: "no hedging", OfferedRate: 200, Summary: bad},
	}}
	sec := ov.Section()
	for _, p := range sec.Plots[2].Series[0].Points {
		if math.IsInf(p.Y, 0) || math.IsNaN(p.Y) {
			t.Errorf("p99 plot carries %v", p)
		}
	}
	if got := sec.Tables[0].Rows[1][5]; got != "failed" {
		t.Errorf("overload p99 cell %q, want failed", got)
	}
	sw := &sweep.Report{Baseline: sweep.Point{Label: "none", Summary: bad}, Points: []sweep.Point{{Label: "d5", Summary: good}}}
	if got := sw.Section().Tables[0].Rows[0][3]; got != "failed" {
		t.Errorf("sweep p99 cell %q, want failed", got)
	}
	var b strings.Builder
	if err := exp.WriteHTML(&b, "t", exp.Environment{}, ov, sw); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "+Inf") || strings.Contains(b.String(), "NaN") {
		t.Errorf("page shows Inf or NaN")
	}
}
