package overload

import (
	"context"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
)

// With HedgePriority a fourth condition runs unbounded hedging against
// replicas that queue hedges last; its own fixtures receive its hedges.
func TestOverloadWithHedgePriority(t *testing.T) {
	ov, err := Run(context.Background(), Config{Loads: []float64{1.5}, Duration: 300 * time.Millisecond, HedgePriority: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ov.Points) != 4 || ov.Points[3].Condition != hedgingUnboundedLow {
		t.Fatalf("points %+v", ov.Points)
	}
	low, fifo := ov.Points[3], ov.Points[2]
	if low.Arrivals != fifo.Arrivals || low.Hedges == 0 || low.Work.Started < int64(low.Arrivals) {
		t.Errorf("queued-last point %+v against %+v", low, fifo)
	}
}

// Loads draw their arrivals from their own seeds, derived from the run's;
// conditions at one load share them. The report states the arrivals, the
// realised rate beside the nominal one, and no goodput above what was
// offered. Two runs with one seed offer the same arrivals.
func TestOverloadReportsRealisedRate(t *testing.T) {
	cfg := Config{Workers: 2, Service: 10 * time.Millisecond, Loads: []float64{0.25, 0.5},
		Duration: 150 * time.Millisecond, Delay: 15 * time.Millisecond, Seed: 3}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 6 || rep.DurationMs != 150 {
		t.Fatalf("%d points, duration %vms", len(rep.Points), rep.DurationMs)
	}
	seeds := map[uint64]float64{}
	for _, p := range rep.Points {
		nominal := p.OfferedShare * rep.Capacity
		want := load.PoissonArrivals(load.Config{Rate: nominal, Seed: p.ArrivalSeed}, cfg.Duration)
		if p.ArrivalSeed != load.PointSeed(cfg.Seed, int(p.OfferedShare*4)-1) {
			t.Errorf("%s at %v: arrival seed %d is not derived from the run's seed and the load's index", p.Condition, p.OfferedShare, p.ArrivalSeed)
		}
		if s, ok := seeds[p.ArrivalSeed]; ok && s != p.OfferedShare {
			t.Errorf("loads %v and %v share arrival seed %d", s, p.OfferedShare, p.ArrivalSeed)
		}
		seeds[p.ArrivalSeed] = p.OfferedShare
		if p.Arrivals != want || p.Requests != want {
			t.Errorf("%s at %v: %d arrivals, %d requests; the seed gives %d", p.Condition, p.OfferedShare, p.Arrivals, p.Requests, want)
		}
		if p.NominalPerSec != exp.Round2(nominal) || p.OfferedRate != p.NominalPerSec {
			t.Errorf("%s: nominal %v, offeredRate %v; want %v", p.Condition, p.NominalPerSec, p.OfferedRate, exp.Round2(nominal))
		}
		if p.OfferedPerSec != exp.Round2(float64(want)/cfg.Duration.Seconds()) {
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
