package lab

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
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
		switch d := m.Sample(rng, Request{ID: uint64(i)}); d {
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
	if m.String() != "straggler:frac=0.05,fast=1ms,slow=40ms" || Constant(time.Millisecond).String() != "const:1ms" {
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
	want := Stats{Started: 1, Completed: 1, CompletedAfterCancel: 1, CancellationsObserved: 1, Hedges: 1, MaxInFlight: 1, HedgesServed: 1}
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

func TestRankF(t *testing.T) {
	d := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if rankF(d, 0.5) != 5 || rankF(d, 0.9) != 9 || rankF(d, 0.99) != 10 || rankF(d, 0) != 1 {
		t.Error("nearest rank")
	}
}
