package lab

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// outcomes returns ok successes of lat, then failed failures and dropped
// drops.
func outcomes(ok int, lat time.Duration, failed, dropped int) []Outcome {
	var outs []Outcome
	for range ok {
		outs = append(outs, Outcome{Latency: lat})
	}
	for range failed {
		outs = append(outs, Outcome{Latency: time.Second, Err: context.DeadlineExceeded})
	}
	for range dropped {
		outs = append(outs, Outcome{Err: ErrDropped})
	}
	return outs
}

// A read that failed, timed out or was dropped never got a good answer: it
// counts as infinitely slow in the percentiles, so failures cannot make the
// tail look better.
func TestSummaryFailuresCountAsInfinite(t *testing.T) {
	s := Summarize(outcomes(98, 10*time.Millisecond, 1, 1), time.Second)
	if s.Succeeded != 98 || s.Failed != 1 || s.Dropped != 1 {
		t.Fatalf("counts %+v", s)
	}
	if s.P50Ms != 10 || s.P90Ms != 10 {
		t.Errorf("p50 %v p90 %v, want 10", s.P50Ms, s.P90Ms)
	}
	for name, v := range map[string]float64{"p99": s.P99Ms, "p99.9": s.P999Ms, "max": s.MaxMs} {
		if !math.IsInf(v, 1) {
			t.Errorf("%s = %v with 2 of 100 reads failed or dropped, want +Inf", name, v)
		}
	}
	// One failure in 100 is beyond p99 by nearest rank: p99 stays finite.
	if s := Summarize(outcomes(99, 10*time.Millisecond, 1, 0), time.Second); s.P99Ms != 10 || !math.IsInf(s.MaxMs, 1) {
		t.Errorf("1 of 100 failed: p99 %v max %v, want 10 and +Inf", s.P99Ms, s.MaxMs)
	}
	// The reviewer's case: failures that took longer than every success.
	outs := outcomes(100, 10*time.Millisecond, 0, 0)
	outs[10] = Outcome{Latency: time.Second, Err: context.DeadlineExceeded}
	outs[20] = Outcome{Latency: time.Second, Err: errors.New("lab: answer is not 200")}
	if s := Summarize(outs, time.Second); s.P99Ms < 1000 {
		t.Errorf("2%% of reads failed after 1s, p99 = %v", s.P99Ms)
	}
}

func TestSummaryJSONWritesNullForNoAnswer(t *testing.T) {
	enc := func(v any) string {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("marshal %T: %v", v, err)
		}
		return string(b)
	}
	// Nothing succeeded: every percentile is null, never a made-up 0.
	none := enc(Summarize(outcomes(0, 0, 3, 2), time.Second))
	for _, k := range []string{"p50Ms", "p90Ms", "p99Ms", "p999Ms", "maxMs"} {
		if !strings.Contains(none, `"`+k+`":null`) {
			t.Errorf("nothing succeeded: %s not null in %s", k, none)
		}
	}
	if empty := enc(Summarize(nil, 0)); !strings.Contains(empty, `"p50Ms":null`) || !strings.Contains(empty, `"maxMs":null`) {
		t.Errorf("no requests: %s", empty)
	}
	// Finite values are written as before, in the same place.
	some := enc(Summarize(outcomes(98, 10*time.Millisecond, 1, 1), time.Second))
	if !strings.HasPrefix(some, `{"requests":100,"succeeded":98,"failed":1,"dropped":1,"p50Ms":10,"p90Ms":10,"p99Ms":null,"p999Ms":null,"maxMs":null,"goodputPerSec":98,`) {
		t.Errorf("JSON %s", some)
	}
	// Reports embed Summary: their own fields must survive (a MarshalJSON
	// on Summary would be promoted and replace them).
	s := Summarize(outcomes(1, 5*time.Millisecond, 1, 0), time.Second)
	for v, want := range map[any][]string{
		CompareSide{Summary: s, Attempts: 7, Refused: 1}:                                              {`"attempts":7`, `"refusedAttempts":1`, `"p50Ms":5`, `"p99Ms":null`},
		SweepPoint{Label: "d5", Summary: s, ExtraAttemptsPct: 12.5}:                                   {`"label":"d5"`, `"extraAttemptsPct":12.5`, `"p99Ms":null`},
		OverloadPoint{Condition: NoHedging, Summary: s, Hedges: 3}:                                    {`"condition":"no hedging"`, `"hedges":3`, `"maxMs":null`},
		StragglerSide{Name: "baseline", Summary: s}:                                                   {`"side":"baseline"`, `"p50Ms":5`},
		&CompareSide{Summary: Summarize(outcomes(0, 0, 1, 0), 0)}:                                     {`"attempts":0`, `"p50Ms":null`},
		&SweepPoint{Label: "p", Summary: Summarize(outcomes(2, time.Millisecond, 0, 0), time.Second)}: {`"label":"p"`, `"p99Ms":1`},
	} {
		got := enc(v)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%T: %s lacks %s", v, got, w)
			}
		}
	}
}

func TestLatencyRowShowsFailedPercentiles(t *testing.T) {
	row := latencyRow("x", Summarize(outcomes(98, 10*time.Millisecond, 2, 0), time.Second))
	if want := []string{"x", "10.0", "10.0", "failed", "failed", "failed"}; strings.Join(row, "|") != strings.Join(want, "|") {
		t.Errorf("row %q, want %q", row, want)
	}
	if row := latencyRow("y", Summarize(nil, 0)); row[1] != "—" || row[5] != "—" {
		t.Errorf("no requests: row %q", row)
	}
}

// The CDF of a side with failures tops out at the share that succeeded: a
// failed read never arrives, however far right one looks.
func TestCompareCDFTopsOutAtSuccessShare(t *testing.T) {
	base := outcomes(6, 80*time.Millisecond, 3, 1)
	hedged := outcomes(10, 5*time.Millisecond, 0, 0)
	r := &CompareReport{Baseline: CompareSide{Summary: Summarize(base, time.Second)}, Hedged: CompareSide{Summary: Summarize(hedged, time.Second)}}
	r.latencies.baseline, r.latencies.hedged = LatenciesMs(base), LatenciesMs(hedged)
	if len(r.latencies.baseline) != 6 {
		t.Fatalf("LatenciesMs kept %d, want the 6 successes", len(r.latencies.baseline))
	}
	p := r.Section().Plots[0]
	tops := []float64{0.6, 1}
	for i, s := range p.Series {
		if n := len(s.Points); n == 0 || s.Points[n-1].Y != tops[i] {
			t.Errorf("series %q ends at %v, want Y = %v", s.Name, s.Points, tops[i])
		}
	}
	if p.YMin != 0 || p.YMax != 1 {
		t.Errorf("CDF y range %v..%v, want 0..1 so the missing share shows", p.YMin, p.YMax)
	}

	st := &StragglerReport{Requests: 10, Baseline: StragglerSide{Summary: Summarize(base, time.Second)}, Hedged: StragglerSide{Summary: Summarize(hedged, time.Second)}}
	st.latencies.baseline, st.latencies.hedged = LatenciesMs(base), LatenciesMs(hedged)
	for i, s := range st.Section().Plots[0].Series {
		if n := len(s.Points); n == 0 || s.Points[n-1].Y != tops[i] {
			t.Errorf("straggler series %q ends at %v, want Y = %v", s.Name, s.Points, tops[i])
		}
	}
}

// Infinite percentiles are left out of plots and tables say "failed".
func TestOverloadAndSweepSectionsWithFailures(t *testing.T) {
	bad := Summarize(outcomes(50, 10*time.Millisecond, 50, 0), time.Second)
	good := Summarize(outcomes(100, 10*time.Millisecond, 0, 0), time.Second)
	ov := &OverloadReport{Capacity: 100, Points: []OverloadPoint{
		{Condition: NoHedging, OfferedRate: 50, Summary: good},
		{Condition: NoHedging, OfferedRate: 200, Summary: bad},
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
	sw := &SweepReport{Baseline: SweepPoint{Label: "none", Summary: bad}, Points: []SweepPoint{{Label: "d5", Summary: good}}}
	if got := sw.Section().Tables[0].Rows[0][3]; got != "failed" {
		t.Errorf("sweep p99 cell %q, want failed", got)
	}
	var b strings.Builder
	if err := WriteHTML(&b, "t", Environment{}, ov, sw); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "+Inf") || strings.Contains(b.String(), "NaN") {
		t.Errorf("page shows Inf or NaN")
	}
}
