package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// CompareConfig configures the compare experiment. Zero fields take the
// defaults shown.
type CompareConfig struct {
	// Samples is the number of reads per side. Default 200.
	Samples int
	// Delay is the hedge delay. Default 10ms.
	Delay time.Duration
	// Rate is the offered load per second (open loop). Default 20.
	Rate float64
	// Primary and Secondary are the endpoints to compare (full URLs that
	// answer GET with 200 and JSON {"value": ...}). Empty means two
	// fixtures on 127.0.0.1: a primary taking 80ms and a secondary 5ms.
	Primary, Secondary string
	// Seed makes arrivals (and fixtures) reproducible. Default 1.
	Seed uint64
	// Progress, when non-nil, is told as each side completes.
	Progress func(done, total int)
}

// CompareSide is one side of the comparison.
type CompareSide struct {
	Summary
	// Attempts counts attempts the client launched.
	Attempts int `json:"attempts"`
	// Refused counts attempts whose answer failed the acceptance check.
	Refused int `json:"refusedAttempts"`
}

// CompareReport is the compare experiment's JSON report.
type CompareReport struct {
	Version       int               `json:"version"`
	Experiment    string            `json:"experiment"`
	Config        CompareConfigJSON `json:"config"`
	Environment   Environment       `json:"environment"`
	BaselineCalls int               `json:"baselineCalls"`
	HedgedCalls   int               `json:"hedgedCalls"`
	// FixtureWork is the work the fixtures did, by their own counters; null
	// for external endpoints, whose work cannot be seen.
	FixtureWork *CompareWork `json:"fixtureWork"`
	Baseline    CompareSide  `json:"baseline"`
	Hedged      CompareSide  `json:"hedged"`
	Receipts    struct {
		Baseline []hedge.Receipt `json:"baseline"`
		Hedged   []hedge.Receipt `json:"hedged"`
	} `json:"receipts"`
	latencies struct{ baseline, hedged []float64 }
}

// CompareConfigJSON is the configuration as reported.
type CompareConfigJSON struct {
	Samples   int     `json:"samples"`
	DelayMs   float64 `json:"delayMs"`
	Rate      float64 `json:"rate"`
	Primary   string  `json:"primary"`
	Secondary string  `json:"secondary"`
	Fixtures  bool    `json:"fixtures"`
	Policy    string  `json:"policy"`
}

// CompareWork is the fixtures' work for each side.
type CompareWork struct {
	Baseline Work `json:"baseline"`
	Hedged   Work `json:"hedged"`
}

// Latencies returns the successful latencies of each side, in ms, for plots.
func (r *CompareReport) Latencies() (baseline, hedged []float64) {
	return r.latencies.baseline, r.latencies.hedged
}

// RunCompare runs the compare experiment: the lab's bounded client reading
// from the primary alone (baseline), then hedging to the secondary after
// Delay. The budget and gate are opened wide (every read may hedge): this
// experiment measures what a hedge can do; overload studies their limits.
func RunCompare(ctx context.Context, cfg CompareConfig) (*CompareReport, error) {
	if cfg.Samples == 0 {
		cfg.Samples = 200
	}
	if cfg.Delay == 0 {
		cfg.Delay = 10 * time.Millisecond
	}
	if cfg.Rate == 0 {
		cfg.Rate = 20
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Samples < 1 || cfg.Delay < 0 || cfg.Rate < 0 {
		return nil, errors.New("lab: compare needs samples >= 1, a positive delay and rate")
	}
	if (cfg.Primary == "") != (cfg.Secondary == "") {
		return nil, errors.New("lab: compare needs both -primary and -secondary, or neither (fixtures)")
	}
	rep := &CompareReport{Version: ReportVersion, Experiment: "compare", Environment: newEnvironment(cfg.Seed)}
	var fixtures []*Fixture
	if cfg.Primary == "" {
		for i, m := range []Model{Constant(80 * time.Millisecond), Constant(5 * time.Millisecond)} {
			f, err := StartFixture(FixtureConfig{Name: []string{"primary", "secondary"}[i], Model: m, Seed: cfg.Seed + uint64(i)})
			if err != nil {
				closeAll(fixtures)
				return nil, err
			}
			fixtures = append(fixtures, f)
		}
		defer closeAll(fixtures)
		cfg.Primary, cfg.Secondary = fixtures[0].URL()+"/item", fixtures[1].URL()+"/item"
	}
	for _, u := range []string{cfg.Primary, cfg.Secondary} {
		if _, err := hedge.ParseTarget(baseOf(u)); err != nil {
			return nil, fmt.Errorf("lab: endpoint %q: %w", u, err)
		}
	}
	rep.Config = CompareConfigJSON{
		Samples: cfg.Samples, DelayMs: ms(cfg.Delay), Rate: cfg.Rate,
		Primary: cfg.Primary, Secondary: cfg.Secondary, Fixtures: fixtures != nil,
		Policy: "at most 2 attempts, fixed delay, budget and gate open (every read may hedge), 64 KiB, 2 s ceiling",
	}
	base := hedge.NewBaseTransport()
	defer base.CloseIdleConnections()

	var work CompareWork
	var err error
	rep.Baseline, rep.Receipts.Baseline, rep.latencies.baseline, work.Baseline, err =
		compareSide(ctx, cfg, base, fixtures, hedge.Policy{MaxAttempts: 1}, []string{cfg.Primary})
	if err != nil {
		return nil, err
	}
	if cfg.Progress != nil {
		cfg.Progress(1, 2)
	}
	budget, err := hedge.NewBudget(1, float64(cfg.Samples))
	if err != nil {
		return nil, err
	}
	hedged := hedge.Policy{Delay: cfg.Delay, Budget: budget, Gate: hedge.Gate{Disabled: true}}
	rep.Hedged, rep.Receipts.Hedged, rep.latencies.hedged, work.Hedged, err =
		compareSide(ctx, cfg, base, fixtures, hedged, []string{cfg.Primary, cfg.Secondary})
	if err != nil {
		return nil, err
	}
	if cfg.Progress != nil {
		cfg.Progress(2, 2)
	}
	rep.BaselineCalls, rep.HedgedCalls = cfg.Samples, cfg.Samples
	if fixtures != nil {
		rep.FixtureWork = &work
	}
	rep.Environment.finish()
	return rep, nil
}

// baseOf returns the scheme and host of a full URL, as a target base.
func baseOf(full string) string {
	for i := len("https://"); i < len(full); i++ {
		if full[i] == '/' {
			return full[:i]
		}
	}
	return full
}

// compareSide runs one side: cfg.Samples reads through a client hedging
// over targets (full URLs; the first is the primary).
func compareSide(ctx context.Context, cfg CompareConfig, base http.RoundTripper, fixtures []*Fixture, p hedge.Policy, targets []string) (CompareSide, []hedge.Receipt, []float64, Work, error) {
	var bases []string
	for _, t := range targets {
		bases = append(bases, baseOf(t))
	}
	path := targets[0][len(bases[0]):]
	client, err := hedge.NewClient(hedge.ClientConfig{
		Client: &http.Client{Transport: base}, Policy: p, Targets: bases, Accept: AcceptValue,
	})
	if err != nil {
		return CompareSide{}, nil, nil, Work{}, err
	}
	receipts := make([]hedge.Receipt, cfg.Samples)
	var mu sync.Mutex
	got := 0
	before := sumStats(fixtures)
	start := time.Now()
	outs := Generate(ctx, Load{Requests: cfg.Samples, Rate: cfg.Rate, Seed: cfg.Seed}, func(ctx context.Context, i int) error {
		rctx := hedge.WithReceipt(ctx, func(r hedge.Receipt) {
			mu.Lock()
			receipts[i] = r
			got++
			mu.Unlock()
		})
		return readValue(rctx, client, "http://endpoint"+withID(path, i))
	})
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return CompareSide{}, nil, nil, Work{}, err
	}
	// Receipts arrive once losers are accounted for (100ms at most).
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		n := got
		mu.Unlock()
		if n >= cfg.Samples-countErrs(outs, ErrDropped) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := settleAll(ctx, fixtures); err != nil {
		return CompareSide{}, nil, nil, Work{}, err
	}
	side := CompareSide{Summary: Summarize(outs, elapsed)}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range receipts {
		side.Attempts += r.AttemptsLaunched
		for _, a := range r.Attempts {
			if a.Fate == hedge.FateRejected {
				side.Refused++
			}
		}
	}
	return side, receipts, LatenciesMs(outs), workBetween(before, sumStats(fixtures), int64(side.Attempts), cfg.Samples), nil
}

// withID appends the request's id to path's query.
func withID(path string, i int) string {
	sep := "?"
	for j := 0; j < len(path); j++ {
		if path[j] == '?' {
			sep = "&"
			break
		}
	}
	return path + sep + "id=" + strconv.Itoa(i)
}

func countErrs(outs []Outcome, target error) int {
	n := 0
	for _, o := range outs {
		if errors.Is(o.Err, target) {
			n++
		}
	}
	return n
}
