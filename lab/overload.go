package lab

import (
	"context"
	"errors"
	"fmt"
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
	// Duration of each load. Default 3s.
	Duration time.Duration
	// Delay is the hedge delay. Default 30ms (a little over the service
	// time: below capacity it hedges only what queues).
	Delay time.Duration
	// Timeout bounds each read. Default 1s.
	Timeout time.Duration
	// Seed makes arrivals reproducible. Default 1.
	Seed uint64
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
)

// OverloadPoint is one condition at one offered load.
type OverloadPoint struct {
	Condition    OverloadCondition `json:"condition"`
	OfferedRate  float64           `json:"offeredRate"`
	OfferedShare float64           `json:"offeredShareOfCapacity"`
	Summary
	// AttemptsPerRequest is requests the fixtures received per read
	// offered: above 1, the hedges' duplicate load.
	AttemptsPerRequest float64 `json:"attemptsPerRequest"`
	Work               Work    `json:"work"`
	Hedges             int     `json:"hedges"`
	Suppressed         int     `json:"hedgesSuppressed"`
}

// OverloadReport is the overload experiment's report.
type OverloadReport struct {
	Version     int             `json:"version"`
	Experiment  string          `json:"experiment"`
	Capacity    float64         `json:"capacityPerSec"`
	DelayMs     float64         `json:"delayMs"`
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
	capacity := 2 * float64(cfg.Workers) / cfg.Service.Seconds()
	rep := &OverloadReport{Version: ReportVersion, Experiment: "overload", Capacity: capacity,
		DelayMs: ms(cfg.Delay), Environment: newEnvironment(cfg.Seed)}
	var fixtures []*Fixture
	defer func() { closeAll(fixtures) }()
	for i := range 2 {
		f, err := StartFixture(FixtureConfig{Name: []string{"replica-a", "replica-b"}[i], Model: Constant(cfg.Service),
			Seed: cfg.Seed + uint64(i), Capacity: cfg.Workers, StopOnCancel: false})
		if err != nil {
			return nil, err
		}
		fixtures = append(fixtures, f)
	}
	base := hedge.NewBaseTransport()
	defer base.CloseIdleConnections()
	targets := []string{fixtures[0].URL(), fixtures[1].URL()}
	conds := []OverloadCondition{NoHedging, HedgingBounded, HedgingUnbounded}
	total, done := len(conds)*len(cfg.Loads), 0
	for _, load := range cfg.Loads {
		for _, c := range conds {
			pt, err := overloadPoint(ctx, cfg, c, load*capacity, base, targets, fixtures)
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

func overloadPoint(ctx context.Context, cfg OverloadConfig, c OverloadCondition, rate float64, base http.RoundTripper, targets []string, fixtures []*Fixture) (OverloadPoint, error) {
	p := hedge.Policy{Delay: cfg.Delay, Timeout: cfg.Timeout}
	switch c {
	case NoHedging:
		p.MaxAttempts = 1
	case HedgingUnbounded:
		b, _ := hedge.NewBudget(1, 1e6)
		p.Budget, p.Gate = b, hedge.Gate{Disabled: true}
	}
	var hedges, suppressed atomic.Int64
	client, err := hedge.NewClient(hedge.ClientConfig{
		Client: &http.Client{Transport: base}, Policy: p, Targets: targets, RotatePrimary: true,
		Accept: AcceptValue, Timeout: cfg.Timeout + time.Second,
		OnReceipt: func(_ *http.Request, r hedge.Receipt) {
			hedges.Add(int64(r.AttemptsLaunched - 1))
			suppressed.Add(int64(r.HedgesSuppressed.Total()))
		},
	})
	if err != nil {
		return OverloadPoint{}, err
	}
	requests := max(int(rate*cfg.Duration.Seconds()), 1)
	before := sumStats(fixtures)
	start := time.Now()
	outs := Generate(ctx, Load{Requests: requests, Rate: rate, Seed: cfg.Seed}, func(ctx context.Context, i int) error {
		return readValue(ctx, client, "http://fixtures/item?id="+strconv.Itoa(i))
	})
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return OverloadPoint{}, err
	}
	// Let queues drain and receipts arrive before the next point.
	if err := settleAll(ctx, fixtures); err != nil {
		return OverloadPoint{}, err
	}
	time.Sleep(2 * hedge.DefaultObserveWindow)
	pt := OverloadPoint{Condition: c, OfferedRate: round2(rate), Summary: Summarize(outs, elapsed),
		Hedges: int(hedges.Load()), Suppressed: int(suppressed.Load())}
	pt.Work = workBetween(before, sumStats(fixtures), int64(requests)+hedges.Load(), requests)
	pt.AttemptsPerRequest = round2(pt.Work.PerRequest)
	return pt, nil
}
