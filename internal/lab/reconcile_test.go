package lab

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// The sweep counts the client's attempts on the client. Reads rotate over
// two replicas without hedging, but only one is counted as a fixture: the
// client launched every read's attempt, the counted fixture started half,
// and the report must say so rather than copy the fixtures' count.
func TestSweepPointCountsClientAttemptsOnClient(t *testing.T) {
	fixtures, err := startPair(Constant(0), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(fixtures)
	base := hedge.NewBaseTransport()
	defer base.CloseIdleConnections()
	targets := []string{fixtures[0].URL(), fixtures[1].URL()}
	const n = 40
	cfg := SweepConfig{Requests: n, Rate: 1000, Seed: 1}
	pt, err := sweepPoint(context.Background(), cfg, 0, base, targets, fixtures[:1], hedge.Policy{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := settleAll(context.Background(), fixtures); err != nil {
		t.Fatal(err)
	}
	if pt.Succeeded != n || pt.ReceiptsMissing != 0 {
		t.Fatalf("%d of %d reads succeeded, %d receipts missing (%s)", pt.Succeeded, n, pt.ReceiptsMissing, pt.FirstError)
	}
	if w := pt.Work; w.ClientAttempts != n || w.Started != n/2 || w.Unreconciled != n/2 {
		t.Errorf("work %+v: want %d client attempts, %d started, %d unreconciled", w, n, n/2, n/2)
	}
}

// With hedging, the reported client attempts are the sum of the receipts'
// attempts launched, and the difference from the fixtures' count is
// reported as it is.
func TestSweepPointReconcilesReceiptsWithFixtures(t *testing.T) {
	fixtures, err := startPair(Lognormal{P50: time.Millisecond, P99: 4 * time.Millisecond}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(fixtures)
	base := hedge.NewBaseTransport()
	defer base.CloseIdleConnections()
	targets := []string{fixtures[0].URL(), fixtures[1].URL()}
	b, _ := hedge.NewBudget(1, 1000)
	p := hedge.Policy{Delay: time.Millisecond, Budget: b, Gate: hedge.Gate{Disabled: true}}
	var launched, receipts atomic.Int64
	ctx := hedge.WithReceipt(context.Background(), func(r hedge.Receipt) {
		launched.Add(int64(r.AttemptsLaunched))
		receipts.Add(1)
	})
	const n = 60
	pt, err := sweepPoint(ctx, SweepConfig{Requests: n, Rate: 400, Seed: 1}, 1, base, targets, fixtures, p)
	if err != nil {
		t.Fatal(err)
	}
	// The context's receipt callback runs just after the client's own.
	for deadline := time.Now().Add(time.Second); receipts.Load() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	w := pt.Work
	if pt.ReceiptsMissing != 0 || receipts.Load() != n {
		t.Fatalf("receipts: %d missing in the report, %d of %d seen here", pt.ReceiptsMissing, receipts.Load(), n)
	}
	if w.ClientAttempts != launched.Load() || w.ClientAttempts < n {
		t.Errorf("client attempts %d, receipts say %d (reads %d)", w.ClientAttempts, launched.Load(), n)
	}
	if w.Unreconciled != w.ClientAttempts-w.Started || w.Unreconciled < 0 {
		t.Errorf("work %+v: unreconciled must be client attempts less started, and not negative", w)
	}
}

// Generate sends exactly the arrivals poissonArrivals counts: all before
// the window's end, the next one at or after it.
func TestOverloadArrivalsMatchGenerate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := 300 * time.Millisecond
		for i, rate := range []float64{50, 200, 1000} {
			load := Load{Rate: rate, Seed: pointSeed(7, i)}
			n := poissonArrivals(load, d)
			load.Requests = n + 1
			outs := Generate(t.Context(), load, func(context.Context, int) error { return nil })
			if n > 0 && outs[n-1].Scheduled >= d {
				t.Errorf("rate %v: arrival %d at %v, past the window %v", rate, n-1, outs[n-1].Scheduled, d)
			}
			if outs[n].Scheduled < d {
				t.Errorf("rate %v: arrival %d at %v falls in the window %v but was not counted", rate, n, outs[n].Scheduled, d)
			}
		}
	})
}

// The count of arrivals is a Poisson variable: over many seeds its mean
// and variance are both near rate × duration (a fixed count would have no
// variance). Deterministic: the seeds are fixed.
func TestOverloadArrivalsArePoisson(t *testing.T) {
	const runs, rate = 400, 100.0
	d := 2 * time.Second
	mean := rate * d.Seconds()
	var sum, sq float64
	for i := range runs {
		x := float64(poissonArrivals(Load{Rate: rate, Seed: pointSeed(1, i)}, d))
		sum += x
		sq += x * x
	}
	m := sum / runs
	v := sq/runs - m*m
	// The mean's standard error is sqrt(200/400) ≈ 0.7; the variance's
	// about 200 × sqrt(2/400) ≈ 14.
	if math.Abs(m-mean) > 5 || v < mean*0.6 || v > mean*1.4 {
		t.Errorf("counts: mean %.1f, variance %.1f; want both near %.0f", m, v, mean)
	}
	if poissonArrivals(Load{Rate: 0, Seed: 1}, d) != 0 {
		t.Error("no arrivals at rate 0")
	}
}

// Loads draw their arrivals from their own seeds, derived from the run's;
// conditions at one load share them. The report states the arrivals, the
// realised rate beside the nominal one, and no goodput above what was
// offered. Two runs with one seed offer the same arrivals.
func TestOverloadReportsRealisedRate(t *testing.T) {
	cfg := OverloadConfig{Workers: 2, Service: 10 * time.Millisecond, Loads: []float64{0.25, 0.5},
		Duration: 150 * time.Millisecond, Delay: 15 * time.Millisecond, Seed: 3}
	rep, err := RunOverload(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 6 || rep.DurationMs != 150 {
		t.Fatalf("%d points, duration %vms", len(rep.Points), rep.DurationMs)
	}
	seeds := map[uint64]float64{}
	for _, p := range rep.Points {
		nominal := p.OfferedShare * rep.Capacity
		want := poissonArrivals(Load{Rate: nominal, Seed: p.ArrivalSeed}, cfg.Duration)
		if p.ArrivalSeed != pointSeed(cfg.Seed, int(p.OfferedShare*4)-1) {
			t.Errorf("%s at %v: arrival seed %d is not derived from the run's seed and the load's index", p.Condition, p.OfferedShare, p.ArrivalSeed)
		}
		if s, ok := seeds[p.ArrivalSeed]; ok && s != p.OfferedShare {
			t.Errorf("loads %v and %v share arrival seed %d", s, p.OfferedShare, p.ArrivalSeed)
		}
		seeds[p.ArrivalSeed] = p.OfferedShare
		if p.Arrivals != want || p.Requests != want {
			t.Errorf("%s at %v: %d arrivals, %d requests; the seed gives %d", p.Condition, p.OfferedShare, p.Arrivals, p.Requests, want)
		}
		if p.NominalPerSec != round2(nominal) || p.OfferedRate != p.NominalPerSec {
			t.Errorf("%s: nominal %v, offeredRate %v; want %v", p.Condition, p.NominalPerSec, p.OfferedRate, round2(nominal))
		}
		if p.OfferedPerSec != round2(float64(want)/cfg.Duration.Seconds()) {
			t.Errorf("%s: offered %v/s for %d arrivals in %v", p.Condition, p.OfferedPerSec, want, cfg.Duration)
		}
		if p.GoodputPerSec > p.OfferedPerSec {
			t.Errorf("%s: goodput %v/s above the offered %v/s", p.Condition, p.GoodputPerSec, p.OfferedPerSec)
		}
		if p.Work.ClientAttempts != int64(p.Arrivals-p.Dropped+p.Hedges) {
			t.Errorf("%s: client attempts %d, want reads sent %d plus hedges %d", p.Condition, p.Work.ClientAttempts, p.Arrivals-p.Dropped, p.Hedges)
		}
	}
	if len(seeds) != 2 {
		t.Errorf("%d arrival seeds for 2 loads", len(seeds))
	}
}

// settleAll waits for a backlog that takes longer than the old fixed 30s
// to drain, as long as it drains: 45 one-second requests queued at a
// one-slot fixture (virtual time).
func TestSettleAllWaitsForDrainingBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, tr := memFixture(t, FixtureConfig{Name: "slow", Model: Constant(time.Second), Capacity: 1})
		var wg sync.WaitGroup
		for i := range 45 {
			wg.Go(func() { memGet(context.Background(), tr, i, false) })
		}
		synctest.Wait()
		start := time.Now()
		if err := settleAll(context.Background(), []*Fixture{f}); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got < 45*time.Second || got > 45*time.Second+20*time.Millisecond {
			t.Errorf("settled after %v, want 45s", got)
		}
		if s := f.Stats(); s.Completed != 45 {
			t.Errorf("%d completed, want 45", s.Completed)
		}
		wg.Wait()
	})
}

// A fixture that finishes nothing for settleStall fails the wait, with an
// error naming it and what it still holds.
func TestSettleAllNamesStuckFixture(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idle, _ := memFixture(t, FixtureConfig{Name: "idle"})
		f, tr := memFixture(t, FixtureConfig{Name: "stuck", Model: Constant(time.Minute), Capacity: 1})
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() { memGet(context.Background(), tr, i, false) })
		}
		synctest.Wait()
		start := time.Now()
		err := settleAll(context.Background(), []*Fixture{idle, f})
		if got := time.Since(start); got < settleStall || got > settleStall+20*time.Millisecond {
			t.Errorf("gave up after %v, want %v", got, settleStall)
		}
		if !errors.Is(err, errStillBusy) || !strings.Contains(err.Error(), "fixture stuck has 1 requests in service and 2 waiting") ||
			strings.Contains(err.Error(), "idle") {
			t.Errorf("error %v", err)
		}
		wg.Wait()
	})
}

// However steadily a backlog drains, settleAll waits settleCap at most.
func TestSettleAllCapsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, tr := memFixture(t, FixtureConfig{Name: "long", Model: Constant(20 * time.Second), Capacity: 1})
		var wg sync.WaitGroup
		for i := range 40 { // 800s of work, one request every 20s
			wg.Go(func() { memGet(context.Background(), tr, i, false) })
		}
		synctest.Wait()
		start := time.Now()
		err := settleAll(context.Background(), []*Fixture{f})
		if got := time.Since(start); got < settleCap || got > settleCap+20*time.Millisecond {
			t.Errorf("gave up after %v, want %v", got, settleCap)
		}
		if !errors.Is(err, errStillBusy) || !strings.Contains(err.Error(), "fixture long has 1 requests in service and") {
			t.Errorf("error %v", err)
		}
		wg.Wait()
	})
}
