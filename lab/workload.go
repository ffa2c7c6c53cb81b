package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
)

// WorkloadConfig configures RunGatewayWorkload. Zero fields take the
// defaults shown.
type WorkloadConfig struct {
	// Requests per run (direct and through the gateway). Default 2000.
	Requests int
	// Concurrency is how many requests are in flight at once. Default 4.
	Concurrency int
	// Model is each replica's latency. Default: 5% of requests take 40ms,
	// the rest 1ms.
	Model Model
	// Seed makes the replicas' draws reproducible. Default 1.
	Seed uint64
	// Gateway configures the gateway under test; Backends are filled in.
	Gateway gateway.Config
}

// Percentiles summarises latencies in milliseconds.
type Percentiles struct {
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
	MaxMs  float64 `json:"maxMs"`
}

// WorkloadRun is one side of the comparison.
type WorkloadRun struct {
	Name     string      `json:"name"`
	Requests int         `json:"requests"`
	Latency  Percentiles `json:"latency"`
	// BackendAttemptsPerRequest counts requests the replicas received,
	// per client request (their own counters, not the client's).
	BackendAttemptsPerRequest float64 `json:"backendAttemptsPerRequest"`
	// WastedPerRequest counts work the replicas completed for clients that
	// had gone, per client request.
	WastedPerRequest float64 `json:"wastedPerRequest"`
}

// WorkloadResult compares the replicas reached directly with the gateway.
type WorkloadResult struct {
	Model       string      `json:"model"`
	Concurrency int         `json:"concurrency"`
	HedgeDelay  string      `json:"hedgeDelay"`
	GoVersion   string      `json:"goVersion"`
	CPUs        int         `json:"cpus"`
	Direct      WorkloadRun `json:"direct"`
	Gateway     WorkloadRun `json:"gateway"`
	// P99Ratio is direct p99 over gateway p99.
	P99Ratio float64 `json:"p99Ratio"`
}

// RunGatewayWorkload starts two fixtures and a gateway in front of them on
// 127.0.0.1, then sends the same reads directly (alternating replicas, as a
// client-side balancer would) and through the gateway, and compares
// latency and the work the replicas did. Every answer must be 200 with a
// non-empty JSON value.
func RunGatewayWorkload(ctx context.Context, cfg WorkloadConfig) (WorkloadResult, error) {
	if cfg.Requests == 0 {
		cfg.Requests = 2000
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 4
	}
	if cfg.Model == nil {
		cfg.Model = Straggler{Fraction: 0.05, Fast: time.Millisecond, Slow: 40 * time.Millisecond}
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Requests < 1 || cfg.Concurrency < 1 {
		return WorkloadResult{}, errors.New("lab: a workload needs at least one request and one worker")
	}
	res := WorkloadResult{Model: cfg.Model.String(), Concurrency: cfg.Concurrency, GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	fixtures, err := startPair(cfg.Model, cfg.Seed)
	if err != nil {
		return res, err
	}
	defer closeAll(fixtures)
	gcfg := cfg.Gateway
	gcfg.Backends = []string{fixtures[0].URL(), fixtures[1].URL()}
	g, err := gateway.New(gcfg)
	if err != nil {
		return res, err
	}
	defer g.Close()
	st := g.Hedger().Policy()
	res.HedgeDelay = "adaptive p" + strconv.FormatFloat(100*st.Adaptive.Quantile, 'g', -1, 64)
	if st.Delay > 0 {
		res.HedgeDelay = st.Delay.String()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	client := &http.Client{Transport: hedge.NewBaseTransport(), Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return hedge.ErrRedirectRefused }}
	defer client.CloseIdleConnections()
	urls := []string{fixtures[0].URL(), fixtures[1].URL()}
	res.Direct, err = runWorkload(ctx, "direct", cfg, fixtures, func(i int) (*http.Response, error) {
		return client.Get(urls[i%2] + "/item?id=" + strconv.Itoa(i))
	})
	if err != nil {
		return res, err
	}
	gw := "http://" + ln.Addr().String()
	res.Gateway, err = runWorkload(ctx, "gateway", cfg, fixtures, func(i int) (*http.Response, error) {
		return client.Get(gw + "/item?id=" + strconv.Itoa(i))
	})
	if err != nil {
		return res, err
	}
	if res.Gateway.Latency.P99Ms > 0 {
		res.P99Ratio = res.Direct.Latency.P99Ms / res.Gateway.Latency.P99Ms
	}
	return res, nil
}

func runWorkload(ctx context.Context, name string, cfg WorkloadConfig, fixtures []*Fixture, get func(int) (*http.Response, error)) (WorkloadRun, error) {
	before := sumStats(fixtures)
	lat, errs, err := closedLoop(ctx, cfg.Requests, cfg.Concurrency, get)
	if err != nil {
		return WorkloadRun{}, err
	}
	for i, err := range errs {
		if err != nil {
			return WorkloadRun{}, fmt.Errorf("lab: %s: request %d: %w", name, i, err)
		}
	}
	if err := settleAll(ctx, fixtures); err != nil {
		return WorkloadRun{}, err
	}
	after := sumStats(fixtures)
	slices.Sort(lat)
	n := float64(cfg.Requests)
	return WorkloadRun{
		Name:     name,
		Requests: cfg.Requests,
		Latency: Percentiles{
			P50Ms: ms(rank(lat, 0.5)), P90Ms: ms(rank(lat, 0.9)), P99Ms: ms(rank(lat, 0.99)),
			P999Ms: ms(rank(lat, 0.999)), MaxMs: ms(lat[len(lat)-1]),
		},
		BackendAttemptsPerRequest: float64(after.Started-before.Started) / n,
		WastedPerRequest:          float64(after.CompletedAfterCancel-before.CompletedAfterCancel) / n,
	}, nil
}
