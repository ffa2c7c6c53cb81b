package sweep

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

// Run runs the sweep experiment: the same reads through the lab's
// hedging client at each delay, with the budget and gate opened wide so
// that each point shows its delay's natural cost, against two fixtures.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Header: exp.Start("sweep", cfg.Seed), Model: cfg.Model.String(), Requests: cfg.Requests, Rate: cfg.Rate}
	var rig exp.Rig
	defer rig.Close()
	fixtures, err := rig.StartPair(cfg.Model, cfg.Seed)
	if err != nil {
		return nil, err
	}
	// HTTP/2 over cleartext to the fixtures: a loser cancelled resets its
	// stream and the connection goes on. Over HTTP/1.1 it closes its
	// connection, and a short delay's every other read opens a new one:
	// hundreds of connections a second, whose cost on a busy machine
	// showed in the percentiles more than the delays did.
	base := rig.Transport()
	base.Protocols = new(http.Protocols)
	base.Protocols.SetUnencryptedHTTP2(true)
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
	reruns := 0 // points run again so far (see maxReruns)
	err = exp.Run(ctx, &rep.Header, len(configs), cfg.Progress, func(n int) error {
		c := configs[n]
		pt, err := runSteady(ctx, cfg, n, base, targets, fixtures, c.p, &reruns)
		if err != nil {
			return fmt.Errorf("lab: sweep %s: %w", c.label, err)
		}
		pt.Label, pt.DelayMs, pt.Quantile = c.label, load.Ms(c.delay), c.q
		if n == 0 {
			rep.Baseline = pt
		} else {
			rep.Points = append(rep.Points, pt)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.Knee = markFrontier(rep.Baseline, rep.Points)
	return rep, nil
}

// Limits of runSteady.
const (
	// maxStall is the longest the process may wait for the CPU during a
	// point (exp.StallMeter) for the point to stand: a p99 of 2,000 reads
	// is their 20th slowest, and a stall longer than the tail it measures
	// moves it (a stall of 40ms turned one point's 22ms into 60ms).
	maxStall = 20 * time.Millisecond
	// maxRuns bounds the runs of one point: on a machine that stalls
	// throughout, the less stalled one stands, and says so.
	maxRuns = 2
	// maxReruns bounds the runs again of a whole sweep, and so its time:
	// on a machine busy throughout, every point stalls, and running them
	// all again would double the sweep for nothing.
	maxReruns = 3
)

// runSteady runs a point until a run sees no stall of the machine longer
// than maxStall, maxRuns times at most, and returns the least stalled
// run, with its stall and how many runs it took. The runs draw the same
// latencies (the fixtures draw by read id) on the same arrivals.
func runSteady(ctx context.Context, cfg Config, n int, base http.RoundTripper, targets []string, fixtures []*fixture.Fixture, p hedge.Policy, reruns *int) (Point, error) {
	var best Point
	for run := 1; ; run++ {
		m := exp.StartStallMeter()
		pt, err := runPoint(ctx, cfg, n, base, targets, fixtures, p)
		stall := m.Stop()
		if err != nil {
			return Point{}, err
		}
		pt.StallMs, pt.Runs = exp.Round3(load.Ms(stall)), run
		if run == 1 || pt.StallMs < best.StallMs {
			best = pt
		}
		best.Runs = run
		if stall <= maxStall || run == maxRuns || cfg.NoReruns || *reruns >= maxReruns {
			return best, nil
		}
		*reruns++
	}
}

func runPoint(ctx context.Context, cfg Config, n int, base http.RoundTripper, targets []string, fixtures []*fixture.Fixture, p hedge.Policy) (Point, error) {
	// The client's own count of its attempts: each read's receipt says how
	// many it launched. The fixtures count what reached them; the two are
	// reconciled in Work.
	var launched, receipts atomic.Int64
	client, err := hedge.NewClient(hedge.TransportConfig{
		Base: base, Policy: p, Targets: targets, Accept: exp.AcceptValue,
		OnReceipt: func(_ *http.Request, r hedge.Receipt) {
			launched.Add(int64(r.AttemptsLaunched))
			receipts.Add(1)
		},
	})
	if err != nil {
		return Point{}, err
	}
	client.Transport = exp.Rotating(client.Transport.(*hedge.Transport))
	before := fixture.Sum(fixtures)
	start := time.Now()
	outs := load.Generate(ctx, load.Config{Requests: cfg.Requests, Rate: cfg.Rate, Seed: cfg.Seed + uint64(n)}, func(ctx context.Context, i int) error {
		return exp.Read(ctx, client, "http://fixtures/item?id="+strconv.Itoa(i))
	})
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return Point{}, err
	}
	pt := Point{Summary: load.Summarize(outs, elapsed)}
	pt.setP99CI(load.SortedMs(outs))
	pt.ReceiptsMissing = exp.AwaitReceipts(ctx, &receipts, cfg.Requests-pt.Dropped)
	// The points share the fixtures: what a point's cancelled losers
	// wrote must be counted as its, not the next one's.
	if err := fixture.QuiesceAll(ctx, fixtures, exp.CloseIdle(base)); err != nil {
		return Point{}, err
	}
	pt.Work = exp.WorkBetween(before, fixture.Sum(fixtures), launched.Load(), cfg.Requests)
	if cfg.Requests > 0 {
		pt.ExtraAttemptsPct = exp.Round2(100 * (pt.Work.PerRequest - 1))
		pt.WastedPct = exp.Round2(100 * float64(pt.Work.CompletedAfterCancel) / float64(cfg.Requests))
	}
	return pt, nil
}

// markFrontier flags the Pareto-optimal points (lower p99 for no more extra
// work, and faster than no hedging at all) and returns the knee's label: the frontier point farthest below the
// chord from the baseline to the frontier's lowest p99, with both axes
// normalised to that span.
func markFrontier(baseline Point, pts []Point) string {
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
