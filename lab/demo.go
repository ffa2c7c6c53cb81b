package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// DemoConfig configures RunDemo. Zero fields take the defaults shown.
type DemoConfig struct {
	// Requests per run (baseline and hedged). Default 600.
	Requests int
	// Concurrency is how many requests are in flight at once. Default 4.
	Concurrency int
	// Model is each replica's latency. Default: 3% of requests take 50ms,
	// the rest 1ms.
	Model Model
	// Seed makes the replicas' draws reproducible. Default 1.
	Seed uint64
	// Policy is the hedging policy. The zero Policy is the library default:
	// an adaptive delay at p95, at most 2 attempts, a 10% budget.
	Policy hedge.Policy
}

func (c *DemoConfig) defaults() {
	if c.Requests == 0 {
		c.Requests = 600
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.Model == nil {
		c.Model = Straggler{Fraction: 0.03, Fast: time.Millisecond, Slow: 50 * time.Millisecond}
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
}

// RunSummary describes one run of the demo.
type RunSummary struct {
	Name     string  `json:"name"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	P50Ms    float64 `json:"p50Ms"`
	P90Ms    float64 `json:"p90Ms"`
	P99Ms    float64 `json:"p99Ms"`
	MaxMs    float64 `json:"maxMs"`
	// Attempts counts requests the client sent, hedges included.
	Attempts int `json:"attempts"`
	// Server counters summed over the replicas, for this run only.
	ServerStarted     int64   `json:"serverStarted"`
	ServerCompleted   int64   `json:"serverCompleted"`
	ServerWasted      int64   `json:"serverWasted"`
	ServerCancelsSeen int64   `json:"serverCancelsSeen"`
	HedgesWon         int     `json:"hedgesWon"`
	HedgesSuppressed  int     `json:"hedgesSuppressed"`
	CancelsRequested  int     `json:"cancellationsRequested"`
	CancelsObserved   int     `json:"cancellationsObserved"`
	LateCompletions   int     `json:"lateCompletions"`
	FinalHedgeDelayMs float64 `json:"finalHedgeDelayMs,omitempty"`
}

// DemoResult is what RunDemo measured.
type DemoResult struct {
	Model       string     `json:"model"`
	Concurrency int        `json:"concurrency"`
	GoVersion   string     `json:"goVersion"`
	CPUs        int        `json:"cpus"`
	Baseline    RunSummary `json:"baseline"`
	Hedged      RunSummary `json:"hedged"`
}

// RunDemo starts two straggling fixtures on loopback and sends the same
// number of reads to them twice: once plainly, alternating primaries, and
// once through the hedging client, whose hedge goes to the other replica.
// Every answer is checked to be HTTP 200 with a non-empty JSON value.
func RunDemo(ctx context.Context, cfg DemoConfig) (DemoResult, error) {
	cfg.defaults()
	if cfg.Requests < 1 || cfg.Concurrency < 1 {
		return DemoResult{}, errors.New("lab: demo needs at least one request and one worker")
	}
	res := DemoResult{Model: cfg.Model.String(), Concurrency: cfg.Concurrency, GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	fixtures, err := startPair(cfg.Model, cfg.Seed)
	if err != nil {
		return res, err
	}
	defer closeAll(fixtures)
	targets := []string{fixtures[0].URL(), fixtures[1].URL()}

	base := hedge.NewBaseTransport()
	defer base.CloseIdleConnections()
	plain := &http.Client{Transport: base, Timeout: hedge.DefaultClientTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return hedge.ErrRedirectRefused }}
	res.Baseline, err = runOnce(ctx, "baseline", cfg, fixtures, func(i int) (*http.Response, error) {
		return plain.Get(targets[i%2] + "/item?id=" + strconv.Itoa(i))
	}, nil)
	if err != nil {
		return res, err
	}

	var mu sync.Mutex
	var receipts []hedge.Receipt
	h, err := hedge.New(cfg.Policy)
	if err != nil {
		return res, err
	}
	tr, err := hedge.NewTransport(hedge.TransportConfig{
		Base: base, Hedger: h, Targets: targets, RotatePrimary: true,
		MaxBodyBytes: hedge.DefaultClientMaxBodyBytes,
		OnReceipt: func(_ *http.Request, r hedge.Receipt) {
			mu.Lock()
			receipts = append(receipts, r)
			mu.Unlock()
		},
	})
	if err != nil {
		return res, err
	}
	hedged := &http.Client{Transport: tr, Timeout: hedge.DefaultClientTimeout, CheckRedirect: plain.CheckRedirect}
	res.Hedged, err = runOnce(ctx, "hedged", cfg, fixtures, func(i int) (*http.Response, error) {
		return hedged.Get("http://replicas/item?id=" + strconv.Itoa(i))
	}, func() []hedge.Receipt {
		mu.Lock()
		defer mu.Unlock()
		return receipts
	})
	res.Hedged.FinalHedgeDelayMs = ms(h.Stats().Delay)
	return res, err
}

func runOnce(ctx context.Context, name string, cfg DemoConfig, fixtures []*Fixture, get func(i int) (*http.Response, error), receipts func() []hedge.Receipt) (RunSummary, error) {
	before := sumStats(fixtures)
	lat, errs, err := closedLoop(ctx, cfg.Requests, cfg.Concurrency, get)
	if err != nil {
		return RunSummary{}, err
	}
	if err := settleAll(ctx, fixtures); err != nil {
		return RunSummary{}, err
	}
	after := sumStats(fixtures)
	s := RunSummary{Name: name, Requests: cfg.Requests}
	ok := lat[:0:0]
	var firstErr error
	for i, err := range errs {
		if err != nil {
			s.Errors++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		ok = append(ok, lat[i])
	}
	if s.Errors > 0 {
		return s, fmt.Errorf("lab: %s: %d of %d requests failed; first: %w", name, s.Errors, cfg.Requests, firstErr)
	}
	slices.Sort(ok)
	s.P50Ms, s.P90Ms, s.P99Ms, s.MaxMs = ms(rank(ok, 0.5)), ms(rank(ok, 0.9)), ms(rank(ok, 0.99)), ms(ok[len(ok)-1])
	s.ServerStarted = after.Started - before.Started
	s.ServerCompleted = after.Completed - before.Completed
	s.ServerWasted = after.CompletedAfterCancel - before.CompletedAfterCancel
	s.ServerCancelsSeen = after.CancellationsObserved - before.CancellationsObserved
	s.Attempts = cfg.Requests
	if receipts != nil {
		// Receipts arrive once the losers are accounted for, at most the
		// observation window after each request.
		deadline := time.Now().Add(2 * time.Second)
		for len(receipts()) < cfg.Requests && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		rs := receipts()
		if len(rs) != cfg.Requests {
			return s, fmt.Errorf("lab: %s: %d receipts for %d requests", name, len(rs), cfg.Requests)
		}
		s.Attempts = 0
		for _, r := range rs {
			s.Attempts += r.AttemptsLaunched
			if r.WinnerAttempt > 0 {
				s.HedgesWon++
			}
			s.HedgesSuppressed += r.HedgesSuppressed.Total()
			s.CancelsRequested += r.CancellationsRequested
			s.CancelsObserved += r.CancellationsObserved
			s.LateCompletions += r.LateCompletions
		}
	}
	return s, nil
}

// fetch sends request i and validates the answer.
func fetch(get func(int) (*http.Response, error), i int) error {
	resp, err := get(i)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, hedge.DefaultClientMaxBodyBytes+1))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	var v struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Value == "" {
		return fmt.Errorf("body %.40q is not JSON with a non-empty value", body)
	}
	return nil
}

func sumStats(fs []*Fixture) Stats {
	var t Stats
	for _, f := range fs {
		s := f.Stats()
		t.Started += s.Started
		t.Completed += s.Completed
		t.CompletedAfterCancel += s.CompletedAfterCancel
		t.CancellationsObserved += s.CancellationsObserved
	}
	return t
}

// rank returns the nearest-rank q-quantile of sorted d.
func rank(d []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(d))+0.999999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// closedLoop sends requests 0..n-1 through get from concurrency workers,
// each sending its next request when the previous one is answered, and
// returns every request's latency and validation error.
func closedLoop(ctx context.Context, n, concurrency int, get func(int) (*http.Response, error)) ([]time.Duration, []error, error) {
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				start := time.Now()
				errs[i] = fetch(get, i)
				lat[i] = time.Since(start)
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return lat, errs, ctx.Err()
}

// settleAll lets work that outlived its client finish, so it is counted.
func settleAll(ctx context.Context, fixtures []*Fixture) error {
	settle, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, f := range fixtures {
		if err := f.Settle(settle); err != nil {
			return fmt.Errorf("lab: fixtures still busy: %w", err)
		}
	}
	return nil
}
