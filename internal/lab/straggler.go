package lab

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
)

// StragglerConfig configures the straggler experiment. Zero fields take the
// defaults shown.
type StragglerConfig struct {
	// Requests per side. Default 500.
	Requests int
	// Rate is the offered load per second (open loop). Default 100.
	Rate float64
	// Model is each replica's latency. Default: 5% of request IDs (every
	// 20th) take 80ms on whichever replica gets them as a primary and 2ms
	// anywhere else; the other requests take 2ms.
	Model Model
	// Gateway configures the gateway; Backends are filled in. Its zero
	// Policy is the gateway's default (adaptive delay).
	Gateway gateway.Config
	// Seed makes arrivals and fixtures reproducible. Default 1.
	Seed uint64
	// Progress, when non-nil, is told as each side completes.
	Progress func(done, total int)
}

// StragglerSide is one side of the experiment.
type StragglerSide struct {
	Name string `json:"side"`
	Summary
	// BackendAttemptsPerRequest is Work.PerRequest: requests the replicas
	// received, by their own counters, per client request.
	BackendAttemptsPerRequest float64 `json:"backendAttemptsPerRequest"`
	Work                      Work    `json:"work"`
}

// StragglerReport is the straggler experiment's report.
type StragglerReport struct {
	Version     int           `json:"version"`
	Experiment  string        `json:"experiment"`
	Model       string        `json:"model"`
	Requests    int           `json:"requests"`
	Rate        float64       `json:"rate"`
	HedgeDelay  string        `json:"hedgeDelay"`
	Environment Environment   `json:"environment"`
	Baseline    StragglerSide `json:"baseline"`
	Hedged      StragglerSide `json:"hedged"`
	// P99Ratio is the baseline's p99 over the hedged p99; 0 when either
	// p99 read failed (an infinite p99 has no ratio).
	P99Ratio  float64 `json:"p99Ratio"`
	latencies struct{ baseline, hedged []float64 }
}

// Latencies returns each side's successful latencies in ms, for plots.
func (r *StragglerReport) Latencies() (baseline, hedged []float64) {
	return r.latencies.baseline, r.latencies.hedged
}

// DefaultStragglerModel is the straggler experiment's default: every 20th
// request straggles (80ms) on its primary, and is fast (2ms) as a hedge.
func DefaultStragglerModel(requests int) Model {
	return StragglerIDs(requests, 0.05, 2*time.Millisecond, 80*time.Millisecond)
}

// StragglerIDs is the reference experiment's shape: of requests ids 0 to
// requests-1, a share spread evenly (id i when floor((i+1)·share) passes
// floor(i·share): every 20th for 0.05) takes slow on whichever replica
// serves it as a primary and fast as a hedge; the others take fast.
func StragglerIDs(requests int, share float64, fast, slow time.Duration) Model {
	var ids []uint64
	for i := range requests {
		if math.Floor(float64(i+1)*share) > math.Floor(float64(i)*share) {
			ids = append(ids, uint64(i))
		}
	}
	return SlowIDs{IDs: ids, Fast: fast, Slow: slow, PrimaryOnly: true}
}

// RunStraggler runs the straggler experiment: two fixtures on 127.0.0.1,
// read directly with alternating primaries (baseline), then through the
// real gateway in-process (hedged). Latency is measured from each read's
// scheduled time; the work is the fixtures' own count.
func RunStraggler(ctx context.Context, cfg StragglerConfig) (*StragglerReport, error) {
	if cfg.Requests == 0 {
		cfg.Requests = 500
	}
	if cfg.Rate == 0 {
		cfg.Rate = 100
	}
	if cfg.Model == nil {
		cfg.Model = DefaultStragglerModel(cfg.Requests)
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Requests < 1 || cfg.Rate < 0 {
		return nil, errors.New("lab: straggler needs at least one request and a non-negative rate")
	}
	rep := &StragglerReport{Version: ReportVersion, Experiment: "straggler", Model: cfg.Model.String(),
		Requests: cfg.Requests, Rate: cfg.Rate, Environment: newEnvironment(cfg.Seed)}
	fixtures, err := startPair(cfg.Model, cfg.Seed)
	if err != nil {
		return nil, err
	}
	defer closeAll(fixtures)
	gcfg := cfg.Gateway
	gcfg.Backends = []string{fixtures[0].URL(), fixtures[1].URL()}
	g, err := gateway.New(gcfg)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	p := g.Hedger().Policy()
	rep.HedgeDelay = "adaptive p" + strconv.FormatFloat(100*p.Adaptive.Quantile, 'g', -1, 64)
	if p.Delay > 0 {
		rep.HedgeDelay = p.Delay.String()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	client := &http.Client{Transport: hedge.NewBaseTransport(), Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return hedge.ErrRedirectRefused }}
	defer client.CloseIdleConnections()
	urls := []string{fixtures[0].URL(), fixtures[1].URL()}
	load := Load{Requests: cfg.Requests, Rate: cfg.Rate, Seed: cfg.Seed}
	rep.Baseline, rep.latencies.baseline, err = stragglerSide(ctx, "baseline", load, fixtures, func(i int) string {
		return urls[i%2] + "/item?id=" + strconv.Itoa(i)
	}, client, nil)
	if err != nil {
		return nil, err
	}
	if cfg.Progress != nil {
		cfg.Progress(1, 2)
	}
	front := "http://" + ln.Addr().String()
	attempts := func() int64 { p, h := GatewayAttempts(g); return p + h }
	rep.Hedged, rep.latencies.hedged, err = stragglerSide(ctx, "hedged", load, fixtures, func(i int) string {
		return front + "/item?id=" + strconv.Itoa(i)
	}, client, attempts)
	if err != nil {
		return nil, err
	}
	if cfg.Progress != nil {
		cfg.Progress(2, 2)
	}
	if b, h := rep.Baseline.P99Ms, rep.Hedged.P99Ms; h > 0 && drawable(b) && drawable(h) {
		rep.P99Ratio = rep.Baseline.P99Ms / rep.Hedged.P99Ms
	}
	rep.Environment.finish()
	return rep, nil
}

// stragglerSide runs one side. attempts, when non-nil, counts the attempts
// the gateway started (for reconciliation); otherwise the client's own
// requests are the attempts.
func stragglerSide(ctx context.Context, name string, load Load, fixtures []*Fixture, url func(int) string, client *http.Client, attempts func() int64) (StragglerSide, []float64, error) {
	before := sumStats(fixtures)
	var attemptsBefore int64
	if attempts != nil {
		attemptsBefore = attempts()
	}
	start := time.Now()
	outs := Generate(ctx, load, func(ctx context.Context, i int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url(i), nil)
		if err != nil {
			return err
		}
		return fetch(func(int) (*http.Response, error) { return client.Do(req) }, i)
	})
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return StragglerSide{}, nil, err
	}
	if err := settleAll(ctx, fixtures); err != nil {
		return StragglerSide{}, nil, err
	}
	s := StragglerSide{Name: name, Summary: Summarize(outs, elapsed)}
	sent := int64(load.Requests - s.Dropped)
	if attempts != nil {
		sent = attempts() - attemptsBefore
	}
	s.Work = workBetween(before, sumStats(fixtures), sent, load.Requests)
	s.BackendAttemptsPerRequest = s.Work.PerRequest
	return s, LatenciesMs(outs), nil
}
