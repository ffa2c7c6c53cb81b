package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
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
	// answer GET with 200 and JSON {"value": ...}). Each is read at its
	// own path and query, with the read's "id" added to the query. Empty
	// means two fixtures on 127.0.0.1: a primary taking 80ms and a
	// secondary 5ms.
	Primary, Secondary string
	// Seed makes arrivals (and fixtures) reproducible. Default 1.
	Seed uint64
	// Progress, when non-nil, is told how many reads of both sides have
	// completed, out of total = 2×Samples: about every tenth of a side
	// while it runs, and as each side ends. Calls do not overlap, done
	// never decreases, and done == total only in the last call.
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
	Version     int               `json:"version"`
	Experiment  string            `json:"experiment"`
	Config      CompareConfigJSON `json:"config"`
	Environment Environment       `json:"environment"`
	// BaselineCalls and HedgedCalls count the calls each side launched,
	// hedges included: HedgedCalls/BaselineCalls is the call ratio, the
	// duplicate work hedging cost the client (about 2 when every read
	// hedges, as with the default 80ms primary and a 10ms delay).
	BaselineCalls int `json:"baselineCalls"`
	HedgedCalls   int `json:"hedgedCalls"`
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
	var endpoints []endpoint
	for _, u := range []string{cfg.Primary, cfg.Secondary} {
		e, err := parseEndpoint(u)
		if err != nil {
			return nil, err
		}
		endpoints = append(endpoints, e)
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
		compareSide(ctx, cfg, base, fixtures, hedge.Policy{MaxAttempts: 1}, endpoints[:1], 0)
	if err != nil {
		return nil, err
	}
	if cfg.Progress != nil {
		cfg.Progress(cfg.Samples, 2*cfg.Samples)
	}
	budget, err := hedge.NewBudget(1, float64(cfg.Samples))
	if err != nil {
		return nil, err
	}
	hedged := hedge.Policy{Delay: cfg.Delay, Budget: budget, Gate: hedge.Gate{Disabled: true}}
	rep.Hedged, rep.Receipts.Hedged, rep.latencies.hedged, work.Hedged, err =
		compareSide(ctx, cfg, base, fixtures, hedged, endpoints, cfg.Samples)
	if err != nil {
		return nil, err
	}
	if cfg.Progress != nil {
		cfg.Progress(2*cfg.Samples, 2*cfg.Samples)
	}
	rep.BaselineCalls, rep.HedgedCalls = rep.Baseline.Attempts, rep.Hedged.Attempts
	if fixtures != nil {
		rep.FixtureWork = &work
	}
	rep.Environment.finish()
	return rep, nil
}

// endpoint is a URL compared: read at its own path and query.
type endpoint struct {
	url *url.URL
	// target is the URL without its query, as a hedge target: it names
	// the endpoint in receipts.
	target string
}

// parseEndpoint checks a full URL given to compare; errors name it as given.
func parseEndpoint(s string) (endpoint, error) {
	u, err := url.Parse(s)
	if err != nil {
		return endpoint{}, fmt.Errorf("lab: endpoint %q: %w", s, err)
	}
	t := *u
	t.RawQuery, t.ForceQuery = "", false
	target, err := hedge.ParseTarget(t.String())
	if err != nil {
		return endpoint{}, fmt.Errorf("lab: endpoint %q: %w", s, err)
	}
	return endpoint{url: u, target: target.String()}, nil
}

// readIndexKey carries a read's index in its context, for endpointRouter.
type readIndexKey struct{}

// endpointRouter sends each attempt of a read to its endpoint, at the
// endpoint's own path and query with the read's id added: the hedging
// Transport re-aims attempts at its targets' scheme, host and path prefix
// but keeps the request's path and query, which are the primary's.
// An attempt's index (hedge.HedgeHeader, absent for the primary) is its
// endpoint's: the primary goes to the first target and the one hedge to
// the second, the only other. Errors name the URL the attempt went to.
type endpointRouter struct {
	base      http.RoundTripper
	endpoints []endpoint
}

func (r endpointRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	k := 0
	if h := req.Header.Get(hedge.HedgeHeader); h != "" {
		var err error
		if k, err = strconv.Atoi(h); err != nil || k < 0 || k >= len(r.endpoints) {
			return nil, fmt.Errorf("lab: attempt %q has no endpoint", h)
		}
	}
	i, ok := req.Context().Value(readIndexKey{}).(int)
	if !ok {
		return nil, errors.New("lab: request without a read index")
	}
	u := *r.endpoints[k].url
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += "id=" + strconv.Itoa(i)
	out := req.WithContext(req.Context()) // a shallow copy: req is not ours
	out.URL, out.Host = &u, ""
	resp, err := r.base.RoundTrip(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u.Redacted(), err)
	}
	return resp, nil
}

// compareSide runs one side: cfg.Samples reads through a client hedging
// over endpoints (the first is the primary). prior is how many reads the
// sides before this one made, for Progress.
func compareSide(ctx context.Context, cfg CompareConfig, base http.RoundTripper, fixtures []*Fixture, p hedge.Policy, endpoints []endpoint, prior int) (CompareSide, []hedge.Receipt, []float64, Work, error) {
	var targets []string
	for _, e := range endpoints {
		targets = append(targets, e.target)
	}
	if len(targets) == 2 && targets[0] == targets[1] {
		// Endpoints that differ only in their query cannot both be
		// targets; without targets every attempt goes to the request's
		// URL, and endpointRouter still routes it (receipts then do not
		// name the endpoints).
		targets = nil
	}
	client, err := hedge.NewClient(hedge.ClientConfig{
		Client: &http.Client{Transport: endpointRouter{base: base, endpoints: endpoints}},
		Policy: p, Targets: targets, Accept: AcceptValue,
	})
	if err != nil {
		return CompareSide{}, nil, nil, Work{}, err
	}
	// The read's URL is the primary's as configured, so that errors name it.
	primary := endpoints[0].url.String()
	receipts := make([]hedge.Receipt, cfg.Samples)
	var mu sync.Mutex
	got := 0
	before := sumStats(fixtures)
	prog := startProgress(cfg.Progress, prior, cfg.Samples, 2*cfg.Samples)
	start := time.Now()
	outs := Generate(ctx, Load{Requests: cfg.Samples, Rate: cfg.Rate, Seed: cfg.Seed}, func(ctx context.Context, i int) error {
		rctx := hedge.WithReceipt(ctx, func(r hedge.Receipt) {
			mu.Lock()
			receipts[i] = r
			got++
			mu.Unlock()
		})
		err := readValue(context.WithValue(rctx, readIndexKey{}, i), client, withID(primary, i))
		prog.add()
		return err
	})
	elapsed := time.Since(start)
	prog.finish()
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

// progress reports a side's progress from its own goroutine while the side
// runs. Reads call add as they complete, which only counts and wakes it, so
// that a slow Progress delays neither a read nor its measured latency.
type progress struct {
	report                func(done, total int)
	prior, samples, total int
	n                     atomic.Int64
	wake, stop, stopped   chan struct{}
}

// startProgress starts reporting to report (nil: nothing to do) the side
// after prior reads, which makes samples of total. It reports about every
// tenth of the side, never its last read: the caller reports the side's
// end once the side is over.
func startProgress(report func(done, total int), prior, samples, total int) *progress {
	if report == nil {
		return nil
	}
	p := &progress{report: report, prior: prior, samples: samples, total: total,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go p.run()
	return p
}

func (p *progress) run() {
	defer close(p.stopped)
	step := max((p.samples+9)/10, 1)
	next := step
	for {
		select {
		case <-p.wake:
		case <-p.stop:
			return
		}
		if n := int(p.n.Load()); n >= next && n < p.samples {
			p.report(p.prior+n, p.total)
			next = (n/step + 1) * step
		}
	}
}

// add counts a completed read.
func (p *progress) add() {
	if p == nil {
		return
	}
	p.n.Add(1)
	select {
	case p.wake <- struct{}{}:
	default: // awake already: it will read the count
	}
}

// finish stops the reports and waits until the last has returned.
func (p *progress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.stopped
}
