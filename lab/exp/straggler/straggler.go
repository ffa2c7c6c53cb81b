package straggler

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
)

// Run runs the straggler experiment: two fixtures on 127.0.0.1, read
// directly with alternating primaries (baseline), then through the real
// gateway in-process (hedged). Latency is measured from each read's
// scheduled time; the work is the fixtures' own count.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Header: exp.Start("straggler", cfg.Seed), Model: cfg.Model.String(), Requests: cfg.Requests, Rate: cfg.Rate}
	var rig exp.Rig
	defer rig.Close()
	fixtures, err := rig.StartPair(cfg.Model, cfg.Seed)
	if err != nil {
		return nil, err
	}
	gcfg := cfg.Gateway
	gcfg.Backends = []string{fixtures[0].URL(), fixtures[1].URL()}
	g, front, err := rig.Gateway(gcfg)
	if err != nil {
		return nil, err
	}
	rep.HedgeDelay = exp.HedgeDelay(g)
	client := rig.GatewayClient(10 * time.Second)

	offer := load.Config{Requests: cfg.Requests, Rate: cfg.Rate, Seed: cfg.Seed}
	sides := []struct {
		name     string
		url      func(i int) string
		attempts func() int64
	}{
		{"baseline", func(i int) string { return gcfg.Backends[i%2] + "/item?id=" + strconv.Itoa(i) }, nil},
		{"hedged", func(i int) string { return front + "/item?id=" + strconv.Itoa(i) },
			func() int64 { p, h := exp.GatewayAttempts(g); return p + h }},
	}
	out := []*Side{&rep.Baseline, &rep.Hedged}
	err = exp.Run(ctx, &rep.Header, len(sides), cfg.Progress, func(i int) (err error) {
		*out[i], rep.latencies[i], err = runSide(ctx, sides[i].name, offer, fixtures, sides[i].url, client, sides[i].attempts)
		return err
	})
	if err != nil {
		return nil, err
	}
	if b, h := rep.Baseline.P99Ms, rep.Hedged.P99Ms; h > 0 && exp.Drawable(b) && exp.Drawable(h) {
		rep.P99Ratio = rep.Baseline.P99Ms / rep.Hedged.P99Ms
	}
	return rep, nil
}

// runSide runs one side. attempts, when non-nil, counts the attempts
// the gateway started (for reconciliation); otherwise the client's own
// requests are the attempts.
func runSide(ctx context.Context, name string, offer load.Config, fixtures []*fixture.Fixture, url func(int) string, client *http.Client, attempts func() int64) (Side, []float64, error) {
	before := fixture.Sum(fixtures)
	var attemptsBefore int64
	if attempts != nil {
		attemptsBefore = attempts()
	}
	start := time.Now()
	outs := load.Generate(ctx, offer, func(ctx context.Context, i int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url(i), nil)
		if err != nil {
			return err
		}
		return exp.Fetch(client, req)
	})
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return Side{}, nil, err
	}
	if err := fixture.SettleAll(ctx, fixtures); err != nil {
		return Side{}, nil, err
	}
	s := Side{Name: name, Summary: load.Summarize(outs, elapsed)}
	sent := int64(offer.Requests - s.Dropped)
	if attempts != nil {
		sent = attempts() - attemptsBefore
	}
	s.Work = exp.WorkBetween(before, fixture.Sum(fixtures), sent, offer.Requests)
	s.BackendAttemptsPerRequest = s.Work.PerRequest
	return s, load.LatenciesMs(outs), nil
}
