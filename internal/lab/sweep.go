package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// SweepConfig configures the sweep experiment. Zero fields take the
// defaults shown.
type SweepConfig struct {
	// Requests per point. Default 400.
	Requests int
	// Rate is the offered load per second (open loop). Default 200.
	Rate float64
	// Model is each replica's latency. Default lognormal, p50 4ms, p99 60ms.
	Model Model
	// Delays are the fixed hedge delays to try. Default 1, 2, 3, 5, 8, 13,
	// 20, 30 and 50ms.
	Delays []time.Duration
	// Quantiles are the adaptive delays to try. Default p50, p75, p90, p95
	// and p99.
	Quantiles []float64
	// Seed makes arrivals and fixtures reproducible. Default 1.
	Seed uint64
	// Progress, when non-nil, is told as each point completes.
	Progress func(done, total int)
}

// SweepPoint is one hedging configuration's result.
type SweepPoint struct {
	Label    string  `json:"label"`
	DelayMs  float64 `json:"delayMs,omitempty"`
	Quantile float64 `json:"quantile,omitempty"`
	Summary
	// ExtraAttemptsPct is the share of attempts beyond one per read, by
	// the fixtures' counters.
	ExtraAttemptsPct float64 `json:"extraAttemptsPct"`
	// WastedPct is work the fixtures completed for attempts nobody waited
	// for any more, per read.
	WastedPct float64 `json:"wastedPct"`
	// Work sets the attempts the client launched, by its receipts
	// (ClientAttempts), beside what the fixtures started, and their
	// difference (Unreconciled: attempts cancelled before they reached a
	// fixture).
	Work Work `json:"work"`
	// ReceiptsMissing counts reads sent whose receipt had not arrived when
	// the point was counted; their attempts are missing from
	// Work.ClientAttempts. Normally zero.
	ReceiptsMissing int `json:"receiptsMissing,omitempty"`
	// Pareto is true when no other point has both a lower p99 and less
	// extra work.
	Pareto bool `json:"pareto"`
}

// SweepReport is the sweep experiment's report.
type SweepReport struct {
	Version     int          `json:"version"`
	Experiment  string       `json:"experiment"`
	Model       string       `json:"model"`
	Requests    int          `json:"requests"`
	Rate        float64      `json:"rate"`
	Environment Environment  `json:"environment"`
	Baseline    SweepPoint   `json:"baseline"`
	Points      []SweepPoint `json:"points"`
	// Knee names the point past which more duplicate work buys little
	// p99: on the Pareto frontier, the farthest below the chord from the
	// baseline to the lowest p99 (in normalised coordinates).
	Knee string `json:"knee"`
}

// RunSweep runs the sweep experiment: the same reads through the lab's
// hedging client at each delay, with the budget and gate opened wide so
// that each point shows its delay's natural cost, against two fixtures.
func RunSweep(ctx context.Context, cfg SweepConfig) (*SweepReport, error) {
	if cfg.Requests == 0 {
		cfg.Requests = 400
	}
	if cfg.Rate == 0 {
		cfg.Rate = 200
	}
	if cfg.Model == nil {
		cfg.Model = Lognormal{P50: 4 * time.Millisecond, P99: 60 * time.Millisecond}
	}
	if cfg.Delays == nil {
		for _, d := range []int{1, 2, 3, 5, 8, 13, 20, 30, 50} {
			cfg.Delays = append(cfg.Delays, time.Duration(d)*time.Millisecond)
		}
	}
	if cfg.Quantiles == nil {
		cfg.Quantiles = []float64{0.5, 0.75, 0.9, 0.95, 0.99}
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Requests < 1 || cfg.Rate < 0 {
		return nil, errors.New("lab: sweep needs at least one request per point and a non-negative rate")
	}
	rep := &SweepReport{Version: ReportVersion, Experiment: "sweep", Model: cfg.Model.String(),
		Requests: cfg.Requests, Rate: cfg.Rate, Environment: newEnvironment(cfg.Seed)}
	fixtures, err := startPair(cfg.Model, cfg.Seed)
	if err != nil {
		return nil, err
	}
	defer closeAll(fixtures)
	base := hedge.NewBaseTransport()
	defer base.CloseIdleConnections()
	targets := []string{fixtures[0].URL(), fixtures[1].URL()}

	type config struct {
		label string
		p     hedge.Policy
		delay time.Duration
		q     float64
	}
	open := func(p hedge.Policy) hedge.Policy {
		b, _ := hedge.NewBudget(1, float64(cfg.Requests))
		p.Budget, p.Gate = b, hedge.Gate{Disabled: true}
		return p
	}
	configs := []config{{label: "no hedging", p: hedge.Policy{MaxAttempts: 1}}}
	for _, d := range cfg.Delays {
		configs = append(configs, config{label: "fixed " + d.String(), p: open(hedge.Policy{Delay: d}), delay: d})
	}
	for _, q := range cfg.Quantiles {
		configs = append(configs, config{label: "adaptive p" + strconv.FormatFloat(100*q, 'g', -1, 64),
			p: open(hedge.Policy{Adaptive: hedge.Adaptive{Quantile: q, MinSamples: 20}}), q: q})
	}
	for n, c := range configs {
		pt, err := sweepPoint(ctx, cfg, n, base, targets, fixtures, c.p)
		if err != nil {
			return nil, fmt.Errorf("lab: sweep %s: %w", c.label, err)
		}
		pt.Label, pt.DelayMs, pt.Quantile = c.label, ms(c.delay), c.q
		if n == 0 {
			rep.Baseline = pt
		} else {
			rep.Points = append(rep.Points, pt)
		}
		if cfg.Progress != nil {
			cfg.Progress(n+1, len(configs))
		}
	}
	rep.Knee = markFrontier(rep.Baseline, rep.Points)
	rep.Environment.finish()
	return rep, nil
}

func sweepPoint(ctx context.Context, cfg SweepConfig, n int, base http.RoundTripper, targets []string, fixtures []*Fixture, p hedge.Policy) (SweepPoint, error) {
	// The client's own count of its attempts: each read's receipt says how
	// many it launched. The fixtures count what reached them; the two are
	// reconciled in Work.
	var launched, receipts atomic.Int64
	client, err := hedge.NewClient(hedge.ClientConfig{
		Client: &http.Client{Transport: base}, Policy: p, Targets: targets, RotatePrimary: true, Accept: AcceptValue,
		OnReceipt: func(_ *http.Request, r hedge.Receipt) {
			launched.Add(int64(r.AttemptsLaunched))
			receipts.Add(1)
		},
	})
	if err != nil {
		return SweepPoint{}, err
	}
	before := sumStats(fixtures)
	start := time.Now()
	outs := Generate(ctx, Load{Requests: cfg.Requests, Rate: cfg.Rate, Seed: cfg.Seed + uint64(n)}, func(ctx context.Context, i int) error {
		return readValue(ctx, client, "http://fixtures/item?id="+strconv.Itoa(i))
	})
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return SweepPoint{}, err
	}
	pt := SweepPoint{Summary: Summarize(outs, elapsed)}
	pt.ReceiptsMissing = awaitReceipts(ctx, &receipts, cfg.Requests-pt.Dropped)
	if err := settleAll(ctx, fixtures); err != nil {
		return SweepPoint{}, err
	}
	pt.Work = workBetween(before, sumStats(fixtures), launched.Load(), cfg.Requests)
	if cfg.Requests > 0 {
		pt.ExtraAttemptsPct = round2(100 * (pt.Work.PerRequest - 1))
		pt.WastedPct = round2(100 * float64(pt.Work.CompletedAfterCancel) / float64(cfg.Requests))
	}
	return pt, nil
}

// receiptWait bounds awaitReceipts: a read's receipt comes once its losers
// are accounted for, within the policy's observation window (100ms by
// default) after the read returned.
const receiptWait = 2 * time.Second

// awaitReceipts waits until got reaches want receipts (one per read sent),
// for receiptWait at most, and returns how many are still missing.
func awaitReceipts(ctx context.Context, got *atomic.Int64, want int) int {
	deadline := time.Now().Add(receiptWait)
	for got.Load() < int64(want) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(2 * time.Millisecond)
	}
	return max(want-int(got.Load()), 0)
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// markFrontier flags the Pareto-optimal points (lower p99 for no more extra
// work, and faster than no hedging at all) and returns the knee's label: the frontier point farthest below the
// chord from the baseline to the frontier's lowest p99, with both axes
// normalised to that span.
func markFrontier(baseline SweepPoint, pts []SweepPoint) string {
	for i := range pts {
		// No hedging costs nothing: a point no faster than it is dominated.
		pts[i].Pareto = pts[i].P99Ms < baseline.P99Ms
		for j := range pts {
			if !pts[i].Pareto {
				break
			}
			if j != i && pts[j].P99Ms <= pts[i].P99Ms && pts[j].ExtraAttemptsPct <= pts[i].ExtraAttemptsPct &&
				(pts[j].P99Ms < pts[i].P99Ms || pts[j].ExtraAttemptsPct < pts[i].ExtraAttemptsPct) {
				pts[i].Pareto = false
				break
			}
		}
	}
	best := -1
	for i, p := range pts {
		if p.Pareto && (best < 0 || p.P99Ms < pts[best].P99Ms) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	x0, y0 := 0.0, baseline.P99Ms
	x1, y1 := pts[best].ExtraAttemptsPct, pts[best].P99Ms
	if x1 <= x0 || y0 <= y1 {
		return pts[best].Label
	}
	knee, far := best, -1.0
	for i, p := range pts {
		if !p.Pareto {
			continue
		}
		// Normalised: x in [0,1] along extra work, y in [0,1] along p99.
		x := (p.ExtraAttemptsPct - x0) / (x1 - x0)
		y := (p.P99Ms - y1) / (y0 - y1)
		// The chord runs from (0,1) to (1,0): distance below it is 1-x-y.
		if d := 1 - x - y; d > far {
			knee, far = i, d
		}
	}
	return pts[knee].Label
}
