package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// OverloadConfig configures the overload experiment. Zero fields take the
// defaults shown.
type OverloadConfig struct {
	// Workers is how many requests each of the two fixtures serves at
	// once; the rest queue (FIFO). Default 2.
	Workers int
	// Service is each request's service time. Default 20ms: with 2
	// workers, a fixture serves 100 requests/s, the pair 200.
	Service time.Duration
	// Loads are offered loads as multiples of the pair's capacity.
	// Default 0.5, 0.8, 1.0, 1.2, 1.5, 2.0.
	Loads []float64
	// Duration of each load. Default 3s. Each load offers the arrivals of
	// a Poisson process over this window, so the number of reads offered
	// is itself random (mean rate × Duration).
	Duration time.Duration
	// Delay is the hedge delay. Default 30ms (a little over the service
	// time: below capacity it hedges only what queues).
	Delay time.Duration
	// Timeout bounds each read. Default 1s.
	Timeout time.Duration
	// Seed makes arrivals reproducible. Default 1. Each load draws its
	// arrivals from its own seed, derived from Seed and the load's index;
	// the conditions at one load share them, so they are compared on the
	// same arrivals.
	Seed uint64
	// HedgePriority adds a fourth condition: unbounded hedging against
	// fixtures that serve queued hedges only when no primary waits (hedge
	// priority), to show whether that protects the primaries when hedges
	// are plentiful.
	HedgePriority bool
	// Progress, when non-nil, is told as each point completes.
	Progress func(done, total int)
}

// OverloadCondition names how hedging is configured for a run.
type OverloadCondition string

// The conditions compared.
const (
	NoHedging        OverloadCondition = "no hedging"
	HedgingBounded   OverloadCondition = "hedging, budget and gate on"
	HedgingUnbounded OverloadCondition = "hedging, budget and gate off"
	// HedgingUnboundedLow is HedgingUnbounded against fixtures that queue
	// hedges behind primaries (OverloadConfig.HedgePriority).
	HedgingUnboundedLow OverloadCondition = "hedging, budget and gate off, hedges queued last"
)

// OverloadPoint is one condition at one offered load.
type OverloadPoint struct {
	Condition OverloadCondition `json:"condition"`
	// OfferedRate is the nominal offered rate, per second: the rate the
	// arrivals were drawn at (NominalPerSec, kept under its old name).
	// What was offered is OfferedPerSec.
	OfferedRate float64 `json:"offeredRate"`
	// NominalPerSec is the rate the arrivals were drawn at.
	NominalPerSec float64 `json:"nominalPerSec"`
	// OfferedPerSec is the realised offered rate: Arrivals over the
	// duration. It differs from NominalPerSec by chance, as a Poisson
	// process's count does from its mean.
	OfferedPerSec float64 `json:"offeredPerSec"`
	// Arrivals counts the reads offered: the arrivals of the Poisson
	// process within the duration.
	Arrivals int `json:"arrivals"`
	// ArrivalSeed is the seed of this load's arrivals.
	ArrivalSeed  uint64  `json:"arrivalSeed"`
	OfferedShare float64 `json:"offeredShareOfCapacity"`
	Summary
	// AttemptsPerRequest is requests the fixtures received per read
	// offered: above 1, the hedges' duplicate load.
	AttemptsPerRequest float64 `json:"attemptsPerRequest"`
	Work               Work    `json:"work"`
	Hedges             int     `json:"hedges"`
	Suppressed         int     `json:"hedgesSuppressed"`
	// ReceiptsMissing counts reads sent whose receipt had not arrived when
	// the point was counted; their attempts are missing from
	// Work.ClientAttempts and Hedges. Normally zero.
	ReceiptsMissing int `json:"receiptsMissing,omitempty"`
	// Gate is the overload gate's state as the load ended ("open", or
	// "shut: " and its evidence); absent where there is no gate.
	Gate string `json:"gate,omitempty"`
}

// OverloadReport is the overload experiment's report.
type OverloadReport struct {
	Version    int     `json:"version"`
	Experiment string  `json:"experiment"`
	Capacity   float64 `json:"capacityPerSec"`
	DelayMs    float64 `json:"delayMs"`
	// DurationMs is each load's duration.
	DurationMs  float64         `json:"durationMs"`
	Environment Environment     `json:"environment"`
	Points      []OverloadPoint `json:"points"`
}

// RunOverload runs the overload experiment: open-loop load from below to
// above the fixtures' capacity, read without hedging, with hedging bounded
// by the budget and gate, and with hedging unbounded. Past capacity,
// unbounded hedges add load exactly when there is none to spare (a hedge
// storm); the budget and gate keep the duplicate load small.
func RunOverload(ctx context.Context, cfg OverloadConfig) (*OverloadReport, error) {
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	if cfg.Service == 0 {
		cfg.Service = 20 * time.Millisecond
	}
	if cfg.Loads == nil {
		cfg.Loads = []float64{0.5, 0.8, 1.0, 1.2, 1.5, 2.0}
	}
	if cfg.Duration == 0 {
		cfg.Duration = 3 * time.Second
	}
	if cfg.Delay == 0 {
		cfg.Delay = 30 * time.Millisecond
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Workers < 1 || cfg.Service <= 0 || cfg.Duration <= 0 {
		return nil, errors.New("lab: overload needs workers >= 1 and positive service time and duration")
	}
	for _, l := range cfg.Loads {
		if !(l >= 0) || math.IsInf(l, 1) {
			return nil, fmt.Errorf("lab: overload load %v: loads are non-negative multiples of capacity", l)
		}
	}
	capacity := 2 * float64(cfg.Workers) / cfg.Service.Seconds()
	rep := &OverloadReport{Version: ReportVersion, Experiment: "overload", Capacity: capacity,
		DelayMs: ms(cfg.Delay), DurationMs: ms(cfg.Duration), Environment: newEnvironment(cfg.Seed)}
	var all []*Fixture
	defer func() { closeAll(all) }()
	// pair starts the two replicas; with lowHedges, they serve queued
	// hedges only when no primary waits.
	pair := func(lowHedges bool) ([]*Fixture, error) {
		var fs []*Fixture
		for i := range 2 {
			f, err := StartFixture(FixtureConfig{Name: []string{"replica-a", "replica-b"}[i], Model: Constant(cfg.Service),
				Seed: cfg.Seed + uint64(i), Capacity: cfg.Workers, StopOnCancel: false, DeprioritizeHedges: lowHedges})
			if err != nil {
				return nil, err
			}
			all = append(all, f)
			fs = append(fs, f)
		}
		return fs, nil
	}
	fifo, err := pair(false)
	if err != nil {
		return nil, err
	}
	byCond := map[OverloadCondition][]*Fixture{NoHedging: fifo, HedgingBounded: fifo, HedgingUnbounded: fifo}
	conds := []OverloadCondition{NoHedging, HedgingBounded, HedgingUnbounded}
	if cfg.HedgePriority {
		if byCond[HedgingUnboundedLow], err = pair(true); err != nil {
			return nil, err
		}
		conds = append(conds, HedgingUnboundedLow)
	}
	base := hedge.NewBaseTransport()
	defer base.CloseIdleConnections()
	// Each condition has one client for the whole run, as a service has:
	// the gate meets each load with what it learned at the loads before,
	// and only the first load finds it cold.
	clients := map[OverloadCondition]*overloadClient{}
	for _, c := range conds {
		fixtures := byCond[c]
		if clients[c], err = newOverloadClient(cfg, c, base, []string{fixtures[0].URL(), fixtures[1].URL()}); err != nil {
			return nil, err
		}
	}
	total, done := len(conds)*len(cfg.Loads), 0
	for i, load := range cfg.Loads {
		seed := pointSeed(cfg.Seed, i)
		for _, c := range conds {
			pt, err := overloadPoint(ctx, cfg, c, load*capacity, seed, clients[c], byCond[c])
			if err != nil {
				return nil, fmt.Errorf("lab: overload %s at %.0f/s: %w", c, load*capacity, err)
			}
			pt.OfferedShare = load
			rep.Points = append(rep.Points, pt)
			done++
			if cfg.Progress != nil {
				cfg.Progress(done, total)
			}
		}
	}
	rep.Environment.finish()
	return rep, nil
}

// overloadClient is one condition's hedging client, with what its
// receipts count.
type overloadClient struct {
	client                         *http.Client
	hedger                         *hedge.Hedger // nil without hedging
	launched, receipts, suppressed atomic.Int64
}

func newOverloadClient(cfg OverloadConfig, c OverloadCondition, base http.RoundTripper, targets []string) (*overloadClient, error) {
	p := hedge.Policy{Delay: cfg.Delay, Timeout: cfg.Timeout}
	switch c {
	case NoHedging:
		p.MaxAttempts = 1
	case HedgingUnbounded, HedgingUnboundedLow:
		b, _ := hedge.NewBudget(1, 1e6)
		p.Budget, p.Gate = b, hedge.Gate{Disabled: true}
	}
	oc := &overloadClient{}
	var err error
	oc.client, err = hedge.NewClient(hedge.ClientConfig{
		Client: &http.Client{Transport: base}, Policy: p, Targets: targets, RotatePrimary: true,
		Accept: AcceptValue, Timeout: cfg.Timeout + time.Second,
		OnReceipt: func(_ *http.Request, r hedge.Receipt) {
			oc.launched.Add(int64(r.AttemptsLaunched))
			oc.receipts.Add(1)
			oc.suppressed.Add(int64(r.HedgesSuppressed.Total()))
		},
	})
	if err != nil {
		return nil, err
	}
	if c == HedgingBounded {
		oc.hedger = oc.client.Transport.(*hedge.Transport).Hedger()
	}
	return oc, nil
}

func overloadPoint(ctx context.Context, cfg OverloadConfig, c OverloadCondition, rate float64, seed uint64, oc *overloadClient, fixtures []*Fixture) (OverloadPoint, error) {
	oc.launched.Store(0)
	oc.receipts.Store(0)
	oc.suppressed.Store(0)
	load := Load{Rate: rate, Seed: seed}
	load.Requests = poissonArrivals(load, cfg.Duration)
	before := sumStats(fixtures)
	start := time.Now()
	outs := Generate(ctx, load, func(ctx context.Context, i int) error {
		return readValue(ctx, oc.client, "http://fixtures/item?id="+strconv.Itoa(i))
	})
	// The load was offered over the whole window, even when its last
	// answer came sooner.
	elapsed := max(time.Since(start), cfg.Duration)
	if err := ctx.Err(); err != nil {
		return OverloadPoint{}, err
	}
	pt := OverloadPoint{Condition: c, OfferedRate: round2(rate), NominalPerSec: round2(rate),
		OfferedPerSec: round2(float64(load.Requests) / cfg.Duration.Seconds()), Arrivals: load.Requests,
		ArrivalSeed: seed, Summary: Summarize(outs, elapsed)}
	if oc.hedger != nil {
		pt.Gate = oc.hedger.Stats().Gate.String()
	}
	// Receipts arrive once each read's losers are accounted for; let
	// queues drain before the next point.
	pt.ReceiptsMissing = awaitReceipts(ctx, &oc.receipts, load.Requests-pt.Dropped)
	if err := settleAll(ctx, fixtures); err != nil {
		return OverloadPoint{}, err
	}
	n := oc.launched.Load()
	pt.Hedges, pt.Suppressed = int(n-oc.receipts.Load()), int(oc.suppressed.Load())
	pt.Work = workBetween(before, sumStats(fixtures), n, load.Requests)
	pt.AttemptsPerRequest = round2(pt.Work.PerRequest)
	return pt, nil
}

// pointSeed derives the seed of the i-th load's arrivals from the run's
// seed (by SplitMix64), so that loads do not replay one another's gaps
// scaled and the run stays reproducible.
func pointSeed(seed uint64, i int) uint64 {
	z := seed + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// poissonArrivals returns how many arrivals of Generate's open-loop
// schedule for load (Requests ignored) fall within [0, d): exponential gaps
// cut at d are a Poisson process on [0, d), whose count is random with
// mean load.Rate × d. Generate with that many requests then sends exactly
// those arrivals. It draws the gaps as generateOpen does (same generator,
// stream and arithmetic); TestOverloadArrivalsMatchGenerate holds the two
// together.
func poissonArrivals(load Load, d time.Duration) int {
	if !(load.Rate > 0) || d <= 0 {
		return 0
	}
	rng := rand.New(rand.NewPCG(load.Seed, 0x6f70656e6c6f6f70)) // generateOpen's stream
	n := 0
	for at := time.Duration(0); ; n++ {
		at += time.Duration(rng.ExpFloat64() / load.Rate * float64(time.Second))
		if at >= d {
			return n
		}
	}
}
