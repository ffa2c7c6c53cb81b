package lab

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStragglerModel(t *testing.T) {
	m := Straggler{Fraction: 0.05, Fast: time.Millisecond, Slow: 40 * time.Millisecond}
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 100000
	slow := 0
	for i := range n {
		switch d := m.Sample(rng, uint64(i)); d {
		case m.Slow:
			slow++
		case m.Fast:
		default:
			t.Fatalf("sample %v is neither fast nor slow", d)
		}
	}
	// 5% ± 5 standard deviations (sd = sqrt(n p (1-p)) ≈ 69).
	if got := float64(slow) / n; math.Abs(got-0.05) > 5*math.Sqrt(0.05*0.95/n) {
		t.Errorf("slow share %v, want 0.05", got)
	}
	if !strings.Contains(m.String(), "5% of requests take 40ms") || Constant(time.Millisecond).String() != "constant 1ms" {
		t.Errorf("descriptions: %q %q", m, Constant(time.Millisecond))
	}
}

func TestFixtureCountsWastedWork(t *testing.T) {
	f, err := StartFixture(FixtureConfig{Name: "a", Model: Constant(50 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.URL()+"/item?id=7", nil)
	req.Header.Set(hedge.HedgeHeader, "1")
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("request should time out")
	}
	settle, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := f.Settle(settle); err != nil {
		t.Fatal(err)
	}
	want := Stats{Started: 1, Completed: 1, CompletedAfterCancel: 1, CancellationsObserved: 1, Hedges: 1, MaxInFlight: 1}
	if got := f.Stats(); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	// A normal request, and the stats endpoint.
	resp, err := http.Get(f.URL() + "/item?id=8")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "{\"value\":\"a:8\"}\n" {
		t.Errorf("answer %d %q", resp.StatusCode, body)
	}
	resp, err = http.Get(f.URL() + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	var st Stats
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Completed != 2 || st.CompletedAfterCancel != 1 {
		t.Errorf("/stats %+v %v", st, err)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestFixtureStopOnCancel(t *testing.T) {
	f, err := StartFixture(FixtureConfig{Model: Constant(time.Second), StopOnCancel: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.URL()+"/", nil)
	http.DefaultClient.Do(req)
	settle, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	f.Settle(settle)
	if s := f.Stats(); s.Completed != 0 || s.CancellationsObserved != 1 {
		t.Errorf("stats %+v", s)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestFixtureRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "example.com:80", "nonsense", ":0"} {
		if _, err := StartFixture(FixtureConfig{Addr: addr}); err == nil {
			t.Errorf("address %q accepted", addr)
		}
	}
}

func TestRunDemoReconciles(t *testing.T) {
	res, err := RunDemo(context.Background(), DemoConfig{
		Requests: 200, Concurrency: 4, Seed: 5,
		Model:  Straggler{Fraction: 0.1, Fast: time.Millisecond, Slow: 30 * time.Millisecond},
		Policy: hedge.Policy{Delay: 5 * time.Millisecond, Budget: mustBudget(t, 0.5, 20), Gate: hedge.Gate{Disabled: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, h := res.Baseline, res.Hedged
	// Every attempt the client sent reached a replica, and every started
	// request completed (the fixtures keep working after cancellation).
	// Every baseline request reached a replica. A hedge cancelled before it
	// was written never reaches one: at most the observed cancellations.
	if b.ServerStarted != int64(b.Attempts) {
		t.Errorf("baseline: %d client attempts, %d server starts", b.Attempts, b.ServerStarted)
	}
	if gap := int64(h.Attempts) - h.ServerStarted; gap < 0 || gap > int64(h.CancelsObserved) {
		t.Errorf("hedged: %d client attempts, %d server starts, %d cancellations observed", h.Attempts, h.ServerStarted, h.CancelsObserved)
	}
	if h.ServerCompleted != h.ServerStarted || b.ServerWasted != 0 {
		t.Errorf("work: %+v %+v", b, h)
	}
	if h.Attempts <= h.Requests || h.HedgesWon == 0 {
		t.Errorf("no hedging happened: %+v", h)
	}
	if h.CancelsRequested != h.CancelsObserved+h.LateCompletions {
		t.Errorf("receipts do not add up: %+v", h)
	}
	if !(h.P99Ms < b.P99Ms) {
		t.Errorf("hedged p99 %v not below baseline %v", h.P99Ms, b.P99Ms)
	}
}

func mustBudget(t *testing.T, f, b float64) *hedge.Budget {
	t.Helper()
	bg, err := hedge.NewBudget(f, b)
	if err != nil {
		t.Fatal(err)
	}
	return bg
}

func TestRank(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if rank(d, 0.5) != 5 || rank(d, 0.9) != 9 || rank(d, 0.99) != 10 || rank(d, 0) != 1 {
		t.Error("nearest rank")
	}
}
