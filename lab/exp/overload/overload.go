package overload

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
)

// Run runs the overload experiment: open-loop load from below to
// above the fixtures' capacity, read without hedging, with hedging bounded
// by the budget and gate, and with hedging unbounded. Past capacity,
// unbounded hedges add load exactly when there is none to spare (a hedge
// storm); the budget and gate keep the duplicate load small.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	capacity := cfg.capacity()
	rep := &Report{Header: exp.Start("overload", cfg.Seed), Capacity: capacity, DelayMs: load.Ms(cfg.Delay), DurationMs: load.Ms(cfg.Duration)}
	var rig exp.Rig
	defer rig.Close()
	// pair starts the two replicas; with lowHedges, they serve queued
	// hedges only when no primary waits.
	pair := func(lowHedges bool) ([]*fixture.Fixture, error) {
		var fs []*fixture.Fixture
		for i := range 2 {
			f, err := rig.Start(fixture.Config{Name: []string{"replica-a", "replica-b"}[i], Model: fixture.Constant(cfg.Service),
				Seed: cfg.Seed + uint64(i), Capacity: cfg.Workers, StopOnCancel: false, DeprioritizeHedges: lowHedges})
			if err != nil {
				return nil, err
			}
			fs = append(fs, f)
		}
		return fs, nil
	}
	fifo, err := pair(false)
	if err != nil {
		return nil, err
	}
	byCond := map[condition][]*fixture.Fixture{noHedging: fifo, hedgingBounded: fifo, hedgingUnbounded: fifo}
	conds := []condition{noHedging, hedgingBounded, hedgingUnbounded}
	if cfg.HedgePriority {
		if byCond[hedgingUnboundedLow], err = pair(true); err != nil {
			return nil, err
		}
		conds = append(conds, hedgingUnboundedLow)
	}
	base := rig.Transport()
	// Each condition has one client for the whole run, as a service has:
	// the gate meets each load with what it learned at the loads before,
	// and only the first load finds it cold.
	clients := map[condition]*overloadClient{}
	for _, c := range conds {
		fixtures := byCond[c]
		if clients[c], err = newOverloadClient(cfg, c, base, []string{fixtures[0].URL(), fixtures[1].URL()}); err != nil {
			return nil, err
		}
	}
	// Step k is condition k%len(conds) at load k/len(conds): the
	// conditions at one load meet the same arrivals.
	err = exp.Run(ctx, &rep.Header, len(conds)*len(cfg.Loads), cfg.Progress, func(k int) error {
		c, share := conds[k%len(conds)], cfg.Loads[k/len(conds)]
		pt, err := runPoint(ctx, cfg, c, share*capacity, load.PointSeed(cfg.Seed, k/len(conds)), clients[c], byCond[c])
		if err != nil {
			return fmt.Errorf("lab: overload %s at %.0f/s: %w", c, share*capacity, err)
		}
		pt.OfferedShare = share
		rep.Points = append(rep.Points, pt)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// overloadClient is one condition's hedging client, with what its
// receipts count.
type overloadClient struct {
	client                         *http.Client
	base                           http.RoundTripper // the client's, shared by the conditions
	hedger                         *hedge.Hedger     // nil without hedging
	launched, receipts, suppressed atomic.Int64
}

func newOverloadClient(cfg Config, c condition, base http.RoundTripper, targets []string) (*overloadClient, error) {
	p := hedge.Policy{Delay: cfg.Delay, Timeout: cfg.Timeout}
	switch c {
	case noHedging:
		p.MaxAttempts = 1
	case hedgingUnbounded, hedgingUnboundedLow:
		b, _ := hedge.NewBudget(1, 1e6)
		p.Budget, p.Gate = b, hedge.Gate{Disabled: true}
	}
	oc := &overloadClient{base: base}
	var err error
	oc.client, err = hedge.NewClient(hedge.TransportConfig{
		Base: base, Policy: p, Targets: targets, Accept: exp.AcceptValue,
		OnReceipt: func(_ *http.Request, r hedge.Receipt) {
			oc.launched.Add(int64(r.AttemptsLaunched))
			oc.receipts.Add(1)
			oc.suppressed.Add(int64(r.HedgesSuppressed.Total()))
		},
	})
	if err != nil {
		return nil, err
	}
	t := oc.client.Transport.(*hedge.Transport)
	oc.client.Transport = exp.Rotating(t)
	oc.client.Timeout = cfg.Timeout + time.Second
	if c == hedgingBounded {
		oc.hedger = t.Classes().Hedger("lab")
	}
	return oc, nil
}

func runPoint(ctx context.Context, cfg Config, c condition, rate float64, seed uint64, oc *overloadClient, fixtures []*fixture.Fixture) (Point, error) {
	oc.launched.Store(0)
	oc.receipts.Store(0)
	oc.suppressed.Store(0)
	offer := load.Config{Rate: rate, Seed: seed}
	offer.Requests = load.PoissonArrivals(offer, cfg.Duration)
	before := fixture.Sum(fixtures)
	start := time.Now()
	outs := load.Generate(ctx, offer, func(ctx context.Context, i int) error {
		return exp.Read(ctx, oc.client, "http://fixtures/item?id="+strconv.Itoa(i))
	})
	// The load was offered over the whole window, even when its last
	// answer came sooner.
	elapsed := max(time.Since(start), cfg.Duration)
	if err := ctx.Err(); err != nil {
		return Point{}, err
	}
	pt := Point{Condition: c, OfferedRate: exp.Round2(rate), NominalPerSec: exp.Round2(rate),
		OfferedPerSec: exp.Round2(float64(offer.Requests) / cfg.Duration.Seconds()), Arrivals: offer.Requests,
		ArrivalSeed: seed, Summary: load.Summarize(outs, elapsed)}
	if oc.hedger != nil {
		pt.Gate = oc.hedger.Stats().Gate.String()
	}
	// Receipts arrive once each read's losers are accounted for; let
	// queues drain before the next point.
	pt.ReceiptsMissing = exp.AwaitReceipts(ctx, &oc.receipts, offer.Requests-pt.Dropped)
	// The points share the fixtures: what a point's cancelled losers
	// wrote must be counted as its, not the next one's.
	if err := fixture.QuiesceAll(ctx, fixtures, exp.CloseIdle(oc.base)); err != nil {
		return Point{}, err
	}
	n := oc.launched.Load()
	pt.Hedges, pt.Suppressed = int(n-oc.receipts.Load()), int(oc.suppressed.Load())
	pt.Work = exp.WorkBetween(before, fixture.Sum(fixtures), n, offer.Requests)
	pt.AttemptsPerRequest = exp.Round2(pt.Work.PerRequest)
	return pt, nil
}
