package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/load/loadtest"
)

func TestCompareWithFixturesReconciles(t *testing.T) {
	// A primary slow enough that its fixture sees it cancelled before it
	// ends, however busy the machine (with the default 80ms, the cancel
	// of a loser could reach a starved fixture after its answer: counted
	// as completed, not as wasted).
	saved := fixtureLatency
	fixtureLatency[0] = 500 * time.Millisecond
	t.Cleanup(func() { fixtureLatency = saved })
	rep, err := Run(context.Background(), Config{Samples: 30, Rate: 60, Delay: 10 * time.Millisecond, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	w := rep.FixtureWork
	if w == nil {
		t.Fatal("fixture work missing for fixtures")
	}
	if rep.Baseline.Succeeded != 30 || rep.Hedged.Succeeded != 30 || rep.Baseline.Attempts != 30 || rep.Hedged.Attempts != 60 {
		t.Errorf("sides: %+v %+v", rep.Baseline, rep.Hedged)
	}
	// The primary takes 500ms, so every hedged read hedges and the 5ms
	// secondary wins; the primaries keep working: wasted work, counted.
	if w.Hedged.Started != 60 || w.Hedged.CompletedAfterCancel != 30 || w.Hedged.Unreconciled != 0 || w.Baseline.Unreconciled != 0 {
		t.Errorf("work %+v", w)
	}
	if len(rep.Receipts.Hedged) != 30 || rep.Receipts.Hedged[0].WinnerAttempt != 1 || rep.Receipts.Hedged[0].Version != 1 {
		t.Errorf("receipts: %+v", rep.Receipts.Hedged[:1])
	}
	b, _ := json.Marshal(rep)
	for _, key := range []string{`"version":1`, `"config":`, `"baselineCalls":30`, `"hedgedCalls":60`, `"fixtureWork":{`, `"p50Ms":`, `"p90Ms":`, `"p99Ms":`, `"maxMs":`, `"receipts":{`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("report lacks %s", key)
		}
	}
}

// External endpoints: their work is null, never a made-up zero, and a
// misbehaving answer is reported per attempt, not counted as a win.
func TestCompareExternalMisbehaving(t *testing.T) {
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"value":"ok"}`) }))
	defer good.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"nope":1}`) }))
	defer bad.Close()
	rep, err := Run(context.Background(), Config{Samples: 10, Rate: 100, Primary: bad.URL + "/x", Secondary: good.URL + "/y", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FixtureWork != nil {
		t.Error("fixture work reported for external endpoints")
	}
	b, _ := json.Marshal(rep)
	if !bytes.Contains(b, []byte(`"fixtureWork":null`)) {
		t.Error("fixtureWork is not null in JSON")
	}
	if rep.Baseline.Succeeded != 0 || rep.Baseline.Failed != 10 || !strings.Contains(rep.Baseline.FirstError, "no non-empty value") {
		t.Errorf("baseline against a bad endpoint: %+v", rep.Baseline)
	}
	// The bad primary answers at once and is refused, which launches the
	// hedge; on a loaded machine the hedge's delay may fire first and the
	// secondary win before the primary's answer is read (the primary is
	// then cancelled, not refused). Either way the good secondary wins.
	if rep.Hedged.Succeeded != 10 || rep.Hedged.Refused < 1 || rep.Hedged.Refused > 10 {
		t.Errorf("hedged: %+v: the bad primary's answers are refused and the good secondary wins", rep.Hedged)
	}
	refused := 0
	for _, r := range rep.Receipts.Hedged {
		switch f := r.Attempts[0].Fate; {
		case r.WinnerAttempt != 1:
			t.Errorf("receipt %+v: the bad primary won", r)
		case f == hedge.FateRejected:
			refused++
			if !strings.Contains(r.Attempts[0].Error, "no non-empty value") {
				t.Errorf("receipt %+v: refusal without its reason", r)
			}
		case f != hedge.FateCanceled && f != hedge.FateLate && f != hedge.FateUnobserved:
			t.Errorf("receipt %+v: primary fate %v", r, f)
		}
	}
	if refused != rep.Hedged.Refused {
		t.Errorf("%d receipts show a refusal, the side counts %d", refused, rep.Hedged.Refused)
	}
}

func TestCompareUnreachableEndpoint(t *testing.T) {
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"value":"ok"}`) }))
	defer good.Close()
	rep, err := Run(context.Background(), Config{Samples: 5, Rate: 100, Primary: "http://127.0.0.1:1/x", Secondary: good.URL + "/y"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Baseline.Failed != 5 || !strings.Contains(rep.Baseline.FirstError, "connection refused") || rep.Hedged.Succeeded != 5 {
		t.Errorf("baseline %+v hedged %+v", rep.Baseline, rep.Hedged)
	}
	if _, err := Run(context.Background(), Config{Primary: "http://127.0.0.1:1/x"}); err == nil {
		t.Error("a primary without a secondary was accepted")
	}
	if _, err := Run(context.Background(), Config{Primary: "ftp://a/x", Secondary: "http://b/"}); err == nil {
		t.Error("a bad endpoint was accepted")
	}
}

// The CDF of a side with failures tops out at the share that succeeded: a
// failed read never arrives, however far right one looks.
func TestCompareCDFTopsOutAtSuccessShare(t *testing.T) {
	base := loadtest.Outcomes(6, 80*time.Millisecond, 3, 1)
	hedged := loadtest.Outcomes(10, 5*time.Millisecond, 0, 0)
	r := &Report{Baseline: Side{Summary: load.Summarize(base, time.Second)}, Hedged: Side{Summary: load.Summarize(hedged, time.Second)}}
	r.latencies = [2][]float64{load.LatenciesMs(base), load.LatenciesMs(hedged)}
	if len(r.latencies[0]) != 6 {
		t.Fatalf("LatenciesMs kept %d, want the 6 successes", len(r.latencies[0]))
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
}

// The section describes what was measured: with your own endpoints it
// names them, not the fixtures' slow primary and fast secondary, and says
// which way hedging moved the percentiles, even when it made them worse.
func TestCompareSectionDescribesTheRun(t *testing.T) {
	side := func(ok int, ms float64, failed int) Side {
		return Side{Summary: load.Summarize(loadtest.Outcomes(ok, time.Duration(ms*float64(time.Millisecond)), failed, 0), time.Second), Attempts: ok + failed}
	}
	text := func(r *Report) string {
		s := r.Section()
		return s.Heading + "\n" + s.Text + "\n" + s.Plots[0].Caption
	}
	mine := Setup{Samples: 10, DelayMs: 10, Rate: 20, Primary: "http://127.0.0.1:8081/a", Secondary: "http://127.0.0.1:8082/b"}
	for _, tc := range []struct {
		name          string
		base, hedged  Side
		want, wantNot []string
	}{
		{"hedging made it worse", side(10, 2, 0), side(10, 9, 0),
			[]string{"compare: http://127.0.0.1:8081/a alone, then hedged to http://127.0.0.1:8082/b", "Your endpoints.",
				"lengthened p99 (2.0 ms alone, 9.0 ms hedged)", "lengthened p50", "at 1.00 attempts per read"},
			[]string{"slow primary", "fast secondary", "removes", "shortened"}},
		{"no change", side(10, 5, 0), side(10, 5.2, 0),
			[]string{"left p99 about where it was (5.0 ms alone, 5.2 ms hedged)"}, []string{"shortened", "lengthened"}},
		{"hedging helped", side(10, 80, 0), side(10, 5, 0),
			[]string{"shortened p99 (80.0 ms alone, 5.0 ms hedged)"}, []string{"lengthened"}},
		{"a failure at p99 alone", side(9, 5, 1), side(10, 5, 0),
			[]string{"shortened p99 (failed alone, 5.0 ms hedged)"}, nil},
		{"nothing succeeded", side(0, 5, 10), side(10, 5, 0),
			[]string{"Nothing to compare: 0 of 10 reads succeeded alone, 10 of 10 hedged."}, []string{"p99"}},
	} {
		got := text(&Report{Config: mine, Baseline: tc.base, Hedged: tc.hedged})
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: lacks %q:\n%s", tc.name, w, got)
			}
		}
		for _, w := range tc.wantNot {
			if strings.Contains(got, w) {
				t.Errorf("%s: says %q:\n%s", tc.name, w, got)
			}
		}
	}
	// With fixtures, their latencies as configured.
	r := &Report{Config: Setup{Samples: 10, Rate: 20, Fixtures: true}, FixtureWork: &FixtureWork{}, Baseline: side(10, 80, 0), Hedged: side(10, 5, 0)}
	if got := text(r); !strings.Contains(got, "the primary answers in 80ms, the secondary in 5ms") || !strings.Contains(got, "(fixtures)") {
		t.Errorf("fixtures:\n%s", got)
	}
}
