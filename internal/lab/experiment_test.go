package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

func TestGenerateOpenLoopMeasuresFromSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first request stalls 100ms; an open loop keeps sending on
		// schedule, and each latency counts from its scheduled time.
		outs := Generate(t.Context(), Load{Requests: 50, Rate: 100, Seed: 3}, func(ctx context.Context, i int) error {
			if i == 0 {
				time.Sleep(100 * time.Millisecond)
			} else {
				time.Sleep(time.Millisecond)
			}
			return nil
		})
		if outs[0].Latency != 100*time.Millisecond {
			t.Errorf("first latency %v", outs[0].Latency)
		}
		for i, o := range outs[1:] {
			if o.Err != nil || o.Latency != time.Millisecond {
				t.Fatalf("request %d: %+v: an open loop must not wait for the stalled one", i+1, o)
			}
			if i > 0 && o.Scheduled < outs[i].Scheduled {
				t.Fatalf("schedule goes backwards at %d", i+1)
			}
		}
		// 50 arrivals at 100/s span about half a second.
		if last := outs[49].Scheduled; last < 300*time.Millisecond || last > 800*time.Millisecond {
			t.Errorf("last arrival at %v for 50 at 100/s", last)
		}
	})
}

func TestGenerateOpenLoopDropsBeyondConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		outs := Generate(t.Context(), Load{Requests: 20, Rate: 1000, Concurrency: 2, Seed: 1}, func(ctx context.Context, i int) error {
			time.Sleep(time.Second) // nothing comes back in time
			return nil
		})
		s := Summarize(outs, time.Second)
		if s.Dropped != 18 || s.Succeeded != 2 {
			t.Errorf("summary %+v: with 2 outstanding allowed, 18 must be dropped, not delayed", s)
		}
	})
}

func TestGenerateClosedLoopAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		outs := Generate(t.Context(), Load{Requests: 10, Concurrency: 2}, func(ctx context.Context, i int) error {
			n.Add(1)
			time.Sleep(10 * time.Millisecond)
			if i == 3 {
				return errors.New("boom")
			}
			return nil
		})
		s := Summarize(outs, 50*time.Millisecond)
		if n.Load() != 10 || s.Succeeded != 9 || s.Failed != 1 || s.FirstError != "boom" || s.P90Ms != 10 || !math.IsInf(s.P99Ms, 1) || s.GoodputPerSec != 180 {
			t.Errorf("summary %+v", s)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 25*time.Millisecond)
		defer cancel()
		outs = Generate(ctx, Load{Requests: 100, Rate: 100}, func(ctx context.Context, i int) error { return nil })
		if errors.Is(outs[0].Err, context.DeadlineExceeded) || !errors.Is(outs[99].Err, context.DeadlineExceeded) {
			t.Errorf("cancelled run: first %v last %v", outs[0].Err, outs[99].Err)
		}
	})
}

func TestAcceptValue(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"value":"x"}`: true, `{"value":""}`: false, `{"value":3}`: false, `{}`: false, `not json`: false, ``: false,
	} {
		resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}
		if err := AcceptValue(resp); (err == nil) != ok {
			t.Errorf("%q: %v", body, err)
		}
	}
	resp := &http.Response{StatusCode: 503, Body: io.NopCloser(strings.NewReader(`{"value":"x"}`))}
	if err := AcceptValue(resp); !errors.Is(err, ErrNotValue) || !strings.Contains(err.Error(), "503") {
		t.Errorf("503: %v", err)
	}
}

func TestCompareWithFixturesReconciles(t *testing.T) {
	rep, err := RunCompare(context.Background(), CompareConfig{Samples: 30, Rate: 60, Delay: 10 * time.Millisecond, Seed: 2})
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
	// The primary takes 80ms, so every hedged read hedges and the 5ms
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
	rep, err := RunCompare(context.Background(), CompareConfig{Samples: 10, Rate: 100, Primary: bad.URL + "/x", Secondary: good.URL + "/y", Seed: 1})
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
	rep, err := RunCompare(context.Background(), CompareConfig{Samples: 5, Rate: 100, Primary: "http://127.0.0.1:1/x", Secondary: good.URL + "/y"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Baseline.Failed != 5 || !strings.Contains(rep.Baseline.FirstError, "connection refused") || rep.Hedged.Succeeded != 5 {
		t.Errorf("baseline %+v hedged %+v", rep.Baseline, rep.Hedged)
	}
	if _, err := RunCompare(context.Background(), CompareConfig{Primary: "http://127.0.0.1:1/x"}); err == nil {
		t.Error("a primary without a secondary was accepted")
	}
	if _, err := RunCompare(context.Background(), CompareConfig{Primary: "ftp://a/x", Secondary: "http://b/"}); err == nil {
		t.Error("a bad endpoint was accepted")
	}
}

func TestStragglerReconciles(t *testing.T) {
	rep, err := RunStraggler(context.Background(), StragglerConfig{Requests: 120, Rate: 200, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, h := rep.Baseline, rep.Hedged
	// Every direct read reaches a replica. Through the gateway, a hedge
	// cancelled before it was written never reaches one: the difference
	// is at most the hedges.
	hedges := h.Work.ClientAttempts - int64(h.Requests)
	if b.Work.Unreconciled != 0 || h.Work.Unreconciled < 0 || h.Work.Unreconciled > hedges {
		t.Errorf("client (gateway) attempts and replica starts disagree: %+v %+v", b.Work, h.Work)
	}
	if b.Succeeded != 120 || h.Succeeded != 120 || b.BackendAttemptsPerRequest != 1 || h.BackendAttemptsPerRequest <= 1 {
		t.Errorf("sides %+v %+v", b, h)
	}
	bl, hl := rep.Latencies()
	if len(bl) != 120 || len(hl) != 120 {
		t.Errorf("latencies %d %d", len(bl), len(hl))
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, "t", rep.Environment, rep); err != nil || !bytes.Contains(buf.Bytes(), []byte("<svg")) {
		t.Errorf("HTML: %v", err)
	}
}

func TestMarkFrontierAndKnee(t *testing.T) {
	base := SweepPoint{Label: "none", Summary: Summary{P99Ms: 100}}
	pts := []SweepPoint{
		{Label: "a", Summary: Summary{P99Ms: 20}, ExtraAttemptsPct: 80},
		{Label: "b", Summary: Summary{P99Ms: 30}, ExtraAttemptsPct: 15}, // the knee
		{Label: "c", Summary: Summary{P99Ms: 60}, ExtraAttemptsPct: 5},
		{Label: "d", Summary: Summary{P99Ms: 70}, ExtraAttemptsPct: 40}, // dominated by b
		{Label: "e", Summary: Summary{P99Ms: 110}, ExtraAttemptsPct: 1}, // slower than no hedging
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

func TestSweepAndOverloadRun(t *testing.T) {
	sw, err := RunSweep(context.Background(), SweepConfig{Requests: 60, Rate: 300, Delays: []time.Duration{3 * time.Millisecond}, Quantiles: []float64{0.9}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Points) != 2 || sw.Baseline.ExtraAttemptsPct != 0 || sw.Points[0].ExtraAttemptsPct <= 0 {
		t.Errorf("sweep %+v", sw)
	}
	// Whether hedging wins in 60 requests on a shared machine is timing, not
	// logic (markFrontier is tested deterministically above); the knee must
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
	ov, err := RunOverload(context.Background(), OverloadConfig{Loads: []float64{0.5}, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(ov.Points) != 3 || ov.Capacity != 200 || ov.Points[0].Condition != NoHedging || ov.Points[0].AttemptsPerRequest != 1 {
		t.Errorf("overload %+v", ov.Points)
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, "t", sw.Environment, sw, ov); err != nil || bytes.Count(buf.Bytes(), []byte("<svg")) != 4 {
		t.Errorf("HTML with %d plots: %v", bytes.Count(buf.Bytes(), []byte("<svg")), err)
	}
}

// With HedgePriority a fourth condition runs unbounded hedging against
// replicas that queue hedges last; its own fixtures receive its hedges.
func TestOverloadWithHedgePriority(t *testing.T) {
	ov, err := RunOverload(context.Background(), OverloadConfig{Loads: []float64{1.5}, Duration: 300 * time.Millisecond, HedgePriority: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ov.Points) != 4 || ov.Points[3].Condition != HedgingUnboundedLow {
		t.Fatalf("points %+v", ov.Points)
	}
	low, fifo := ov.Points[3], ov.Points[2]
	if low.Arrivals != fifo.Arrivals || low.Hedges == 0 || low.Work.Started < int64(low.Arrivals) {
		t.Errorf("queued-last point %+v against %+v", low, fifo)
	}
}

// The pacer arms its timer early by the lateness it has measured, and a
// request sent early is measured from its send, never from a schedule it
// beat.
func TestPacerSendsEarlyByMeasuredLag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := pacer{lag: 2 * time.Millisecond}
		start := time.Now()
		from := p.wait(t.Context(), start.Add(10*time.Millisecond), 10*time.Millisecond)
		if sent := time.Since(start); sent != 8*time.Millisecond || !from.Equal(start.Add(8*time.Millisecond)) {
			t.Errorf("sent at %v, measured from %v; want both at 8ms", sent, from.Sub(start))
		}
		// Timers here fire on time: the estimate decays towards no lag.
		if p.lag >= 2*time.Millisecond {
			t.Errorf("lag %v after an on-time firing", p.lag)
		}
		// Never earlier than half the gap.
		p.lag = time.Second
		start = time.Now()
		p.wait(t.Context(), start.Add(10*time.Millisecond), 10*time.Millisecond)
		if sent := time.Since(start); sent != 5*time.Millisecond {
			t.Errorf("sent at %v with a huge lag; want half the 10ms gap", sent)
		}
		// Due already: at once, measured from the schedule.
		start = time.Now()
		if from := p.wait(t.Context(), start.Add(-time.Millisecond), time.Millisecond); !from.Equal(start.Add(-time.Millisecond)) {
			t.Errorf("late send measured from %v", from.Sub(start))
		}
	})
}
