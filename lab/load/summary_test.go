package load_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/load/loadtest"
)

// A read that failed, timed out or was dropped never got a good answer: it
// counts as infinitely slow in the percentiles, so failures cannot make the
// tail look better.
func TestSummaryFailuresCountAsInfinite(t *testing.T) {
	s := load.Summarize(loadtest.Outcomes(98, 10*time.Millisecond, 1, 1), time.Second)
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
	if s := load.Summarize(loadtest.Outcomes(99, 10*time.Millisecond, 1, 0), time.Second); s.P99Ms != 10 || !math.IsInf(s.MaxMs, 1) {
		t.Errorf("1 of 100 failed: p99 %v max %v, want 10 and +Inf", s.P99Ms, s.MaxMs)
	}
	// The reviewer's case: failures that took longer than every success.
	outs := loadtest.Outcomes(100, 10*time.Millisecond, 0, 0)
	outs[10] = load.Outcome{Latency: time.Second, Err: context.DeadlineExceeded}
	outs[20] = load.Outcome{Latency: time.Second, Err: errors.New("lab: answer is not 200")}
	if s := load.Summarize(outs, time.Second); s.P99Ms < 1000 {
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
	none := enc(load.Summarize(loadtest.Outcomes(0, 0, 3, 2), time.Second))
	for _, k := range []string{"p50Ms", "p90Ms", "p99Ms", "p999Ms", "maxMs"} {
		if !strings.Contains(none, `"`+k+`":null`) {
			t.Errorf("nothing succeeded: %s not null in %s", k, none)
		}
	}
	if empty := enc(load.Summarize(nil, 0)); !strings.Contains(empty, `"p50Ms":null`) || !strings.Contains(empty, `"maxMs":null`) {
		t.Errorf("no requests: %s", empty)
	}
	// Finite values are written as before, in the same place.
	some := enc(load.Summarize(loadtest.Outcomes(98, 10*time.Millisecond, 1, 1), time.Second))
	if !strings.HasPrefix(some, `{"requests":100,"succeeded":98,"failed":1,"dropped":1,"p50Ms":10,"p90Ms":10,"p99Ms":null,"p999Ms":null,"maxMs":null,"goodputPerSec":98,`) {
		t.Errorf("JSON %s", some)
	}
	// Reports embed Summary: their own fields must survive (a MarshalJSON
	// on load.Summary would be promoted and replace them).
	s := load.Summarize(loadtest.Outcomes(1, 5*time.Millisecond, 1, 0), time.Second)
	type side struct {
		Name string `json:"side"`
		load.Summary
		Attempts int `json:"attempts"`
	}
	for v, want := range map[any][]string{
		side{Name: "baseline", Summary: s, Attempts: 7}:                                                      {`"side":"baseline"`, `"attempts":7`, `"p50Ms":5`, `"p99Ms":null`},
		&side{Summary: load.Summarize(loadtest.Outcomes(0, 0, 1, 0), 0)}:                                     {`"attempts":0`, `"p50Ms":null`},
		&side{Name: "p", Summary: load.Summarize(loadtest.Outcomes(2, time.Millisecond, 0, 0), time.Second)}: {`"side":"p"`, `"p99Ms":1`},
	} {
		got := enc(v)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%T: %s lacks %s", v, got, w)
			}
		}
	}
}

func TestRankF(t *testing.T) {
	d := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if load.Rank(d, 0.5) != 5 || load.Rank(d, 0.9) != 9 || load.Rank(d, 0.99) != 10 || load.Rank(d, 0) != 1 {
		t.Error("nearest rank")
	}
}
