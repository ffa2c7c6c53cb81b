package compare

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
)

// Run runs the compare experiment: the lab's bounded client reading
// from the primary alone (baseline), then hedging to the secondary after
// Delay. The budget and gate are opened wide (every read may hedge): this
// experiment measures what a hedge can do; overload studies their limits.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Header: exp.Start("compare", cfg.Seed)}
	var rig exp.Rig
	defer rig.Close()
	var fixtures []*fixture.Fixture
	if cfg.Primary == "" {
		for i, d := range fixtureLatency {
			f, err := rig.Start(fixture.Config{Name: []string{"primary", "secondary"}[i], Model: fixture.Constant(d), Seed: cfg.Seed + uint64(i)})
			if err != nil {
				return nil, err
			}
			fixtures = append(fixtures, f)
		}
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
	rep.Config = Setup{
		Samples: cfg.Samples, DelayMs: load.Ms(cfg.Delay), Rate: cfg.Rate,
		Primary: cfg.Primary, Secondary: cfg.Secondary, Fixtures: fixtures != nil,
		Policy: "at most 2 attempts, fixed delay, budget and gate open (every read may hedge), 64 KiB, 2 s ceiling",
	}
	base := rig.Transport()

	var work FixtureWork
	budget, err := hedge.NewBudget(1, float64(cfg.Samples))
	if err != nil {
		return nil, err
	}
	sides := []struct {
		policy    hedge.Policy
		endpoints []endpoint
		out       *Side
		receipts  *[]hedge.Receipt
		work      *exp.Work
	}{
		{hedge.Policy{MaxAttempts: 1}, endpoints[:1], &rep.Baseline, &rep.Receipts.Baseline, &work.Baseline},
		{hedge.Policy{Delay: cfg.Delay, Budget: budget, Gate: hedge.Gate{Disabled: true}}, endpoints, &rep.Hedged, &rep.Receipts.Hedged, &work.Hedged},
	}
	var progress func(done, total int)
	if cfg.Progress != nil {
		progress = func(done, total int) { cfg.Progress(done*cfg.Samples, total*cfg.Samples) }
	}
	err = exp.Run(ctx, &rep.Header, len(sides), progress, func(i int) (err error) {
		s := sides[i]
		*s.out, *s.receipts, rep.latencies[i], *s.work, err = runSide(ctx, cfg, base, fixtures, s.policy, s.endpoints, i*cfg.Samples)
		return err
	})
	if err != nil {
		return nil, err
	}
	rep.BaselineCalls, rep.HedgedCalls = rep.Baseline.Attempts, rep.Hedged.Attempts
	if fixtures != nil {
		rep.FixtureWork = &work
	}
	return rep, nil
}

// fixtureLatency is how long the primary and the secondary fixture take
// to answer, when no endpoints are given.
var fixtureLatency = [2]time.Duration{80 * time.Millisecond, 5 * time.Millisecond}

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

// runSide runs one side: cfg.Samples reads through a client hedging
// over endpoints (the first is the primary). prior is how many reads the
// sides before this one made, for Progress.
func runSide(ctx context.Context, cfg Config, base http.RoundTripper, fixtures []*fixture.Fixture, p hedge.Policy, endpoints []endpoint, prior int) (Side, []hedge.Receipt, []float64, exp.Work, error) {
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
	client, err := hedge.NewClient(hedge.TransportConfig{
		Base:   endpointRouter{base: base, endpoints: endpoints},
		Policy: p, Targets: targets, Accept: exp.AcceptValue,
	})
	if err != nil {
		return Side{}, nil, nil, exp.Work{}, err
	}
	client.Transport = exp.InOrder(client.Transport.(*hedge.Transport)) // the primary as configured
	// The read's URL is the primary's as configured, so that errors name it.
	primary := endpoints[0].url.String()
	receipts := make([]hedge.Receipt, cfg.Samples)
	var mu sync.Mutex
	got := 0
	before := fixture.Sum(fixtures)
	prog := startProgress(cfg.Progress, prior, cfg.Samples, 2*cfg.Samples)
	start := time.Now()
	outs := load.Generate(ctx, load.Config{Requests: cfg.Samples, Rate: cfg.Rate, Seed: cfg.Seed}, func(ctx context.Context, i int) error {
		rctx := hedge.WithReceipt(ctx, func(r hedge.Receipt) {
			mu.Lock()
			receipts[i] = r
			got++
			mu.Unlock()
		})
		err := exp.Read(context.WithValue(rctx, readIndexKey{}, i), client, withID(primary, i))
		prog.add()
		return err
	})
	elapsed := time.Since(start)
	prog.finish()
	if err := ctx.Err(); err != nil {
		return Side{}, nil, nil, exp.Work{}, err
	}
	// Receipts arrive once losers are accounted for (100ms at most).
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		n := got
		mu.Unlock()
		if n >= cfg.Samples-countErrs(outs, load.ErrDropped) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The sides share the fixtures: what a side's cancelled losers wrote
	// must be counted as its, not the next one's.
	if err := fixture.QuiesceAll(ctx, fixtures, exp.CloseIdle(base)); err != nil {
		return Side{}, nil, nil, exp.Work{}, err
	}
	side := Side{Summary: load.Summarize(outs, elapsed)}
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
	return side, receipts, load.LatenciesMs(outs), exp.WorkBetween(before, fixture.Sum(fixtures), int64(side.Attempts), cfg.Samples), nil
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

func countErrs(outs []load.Outcome, target error) int {
	n := 0
	for _, o := range outs {
		if errors.Is(o.Err, target) {
			n++
		}
	}
	return n
}
