package probation

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/replica"
)

// Run runs the probation experiment: Replicas fixtures on
// 127.0.0.1 behind the real gateway in-process, read in open loop at Rate
// for Duration, while the last replica serves the reads that arrive within
// [DegradeFrom, DegradeTo) Factor times slower; once with probation off
// (gateway.Config.DisableProbation), then with it on, each on fresh
// fixtures and a fresh gateway, with the same arrivals and the same
// service-time draws. Latency is from each read's scheduled time; what
// each replica received is its own count of arrivals; the gateway's
// replica states are polled every 100ms for the probation timeline.
//
// The comparison means something only when the degraded replica would
// still get primaries without probation. Peak-EWMA prices a replica by its
// latency times its attempts in flight: it steers primaries away from a
// slow replica from its first slow answer, and tries it again as its
// price decays, the sooner the busier its peers are. Under light load it
// starves the slow replica by itself, which then also gives probation too
// few samples to judge; at the default rate the primaries spread evenly
// before the degradation and the slow replica keeps a share of them
// during it. The report gives that share, before and during the
// degradation, so that the reader can see which regime a run was in.
// Hedging rescues the slow primaries it can, within its budget and gate;
// the extra attempts of each run show what that costs, and the shadows
// what probation costs.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	setup, err := cfg.setup()
	if err != nil {
		return nil, err
	}
	rep := &Report{Header: exp.Start("probation", cfg.Seed), Config: setup}
	seconds := int((cfg.Duration + time.Second - 1) / time.Second)
	err = exp.Run(ctx, &rep.Header, 2, nil, func(i int) error {
		var progress func(int)
		if cfg.Progress != nil {
			progress = func(s int) { cfg.Progress(i*seconds+min(s, seconds), 2*seconds) }
		}
		run, err := runOne(ctx, cfg, setup, i == 1, progress)
		if err != nil {
			return fmt.Errorf("lab: probation, %s: %w", run.Condition, err)
		}
		rep.Runs = append(rep.Runs, run)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// Kinds of request a replica receives.
const (
	kindPrimary = iota
	kindHedge
	kindShadow
)

// arrival is one request a replica received.
type arrival struct {
	at      time.Time
	replica int
	kind    int
}

// arrivalLog records what the replicas receive. It is safe for concurrent
// use.
type arrivalLog struct {
	mu     sync.Mutex
	events []arrival
}

func (l *arrivalLog) wrap(i int) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/stats" {
				a := arrival{at: time.Now(), replica: i, kind: kindPrimary}
				switch {
				case r.Header.Get(gateway.ShadowHeader) != "":
					a.kind = kindShadow
				case r.Header.Get(hedge.HedgeHeader) != "":
					a.kind = kindHedge
				}
				l.mu.Lock()
				l.events = append(l.events, a)
				l.mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	}
}

func (l *arrivalLog) all() []arrival {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// pollInterval is how often a run reads the gateway's replica states.
const pollInterval = 100 * time.Millisecond

// runOne runs one condition on fresh fixtures and a fresh gateway.
func runOne(ctx context.Context, cfg Config, setup runSetup, on bool, progress func(int)) (run Result, err error) {
	run = Result{Condition: withoutProbation, Probation: on}
	if on {
		run.Condition = withProbation
	}
	log := &arrivalLog{}
	var rig exp.Rig
	defer rig.Close()
	var fixtures []*fixture.Fixture
	var backends []string
	for i := range setup.Replicas {
		m := cfg.Model
		if i == setup.DegradedIndex {
			m = fixture.Phase{From: cfg.DegradeFrom, To: cfg.DegradeTo, Factor: cfg.Factor, Base: cfg.Model}
		}
		f, err := rig.Start(fixture.Config{Name: setup.ReplicaNames[i], Model: m, Seed: setup.FixtureSeeds[i], Middleware: log.wrap(i)})
		if err != nil {
			return run, err
		}
		fixtures = append(fixtures, f)
		backends = append(backends, f.URL())
	}
	g, front, err := rig.Gateway(gatewayConfig(cfg, setup, backends, on))
	if err != nil {
		return run, err
	}
	client := rig.GatewayClient(time.Duration(setup.TimeoutMs*float64(time.Millisecond)) + 5*time.Second)
	front += "/item?id="

	offer := load.Config{Requests: setup.Reads, Rate: cfg.Rate, Seed: setup.ArrivalSeed}
	start := time.Now()
	// The degraded fixture's phase counts from its own start, a moment
	// before the run's.
	lag := start.Sub(fixtures[setup.DegradedIndex].Started())
	run.DegradedFromMs, run.DegradedToMs = load.Ms(cfg.DegradeFrom-lag), load.Ms(cfg.DegradeTo-lag)
	poller := newPoller(g.Replicas(), setup.ReplicaNames, start)
	poller.poll(start)
	stop := make(chan struct{})
	var pollWG sync.WaitGroup
	pollWG.Go(func() {
		t := time.NewTicker(pollInterval)
		defer t.Stop()
		next := 1
		for {
			select {
			case now := <-t.C:
				poller.poll(now)
				if s := int(now.Sub(start) / time.Second); s >= next && progress != nil {
					progress(s)
					next = s + 1
				}
			case <-stop:
				return
			}
		}
	})
	outs := load.Generate(ctx, offer, func(ctx context.Context, i int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, front+strconv.Itoa(i), nil)
		if err != nil {
			return err
		}
		return exp.Fetch(client, req)
	})
	elapsed := time.Since(start)
	close(stop)
	pollWG.Wait()
	poller.poll(time.Now())
	if err := ctx.Err(); err != nil {
		return run, err
	}
	// Shadows still in flight are work the replicas do: let them finish,
	// then stop the gateway so that its counters are final.
	if err := fixture.SettleAll(ctx, fixtures); err != nil {
		return run, err
	}
	poller.poll(time.Now())
	// Then the gateway stops (its counters final) and lets its backend
	// connections go, and every request it wrote is read before the
	// arrivals are counted: on a busy machine a loser written late may
	// still be in a socket, and would count as sent, not received. Close
	// is called at each look for a connection a loser gave back late; done
	// once, it only releases idle connections (this gateway has no
	// affinity mode), as it does again when the rig closes.
	if err := fixture.QuiesceAll(ctx, fixtures, g.Close); err != nil {
		return run, err
	}
	if progress != nil {
		progress(math.MaxInt)
	}

	run.Summary = load.Summarize(outs, elapsed)
	var during []load.Outcome
	from, to := time.Duration(run.DegradedFromMs*float64(time.Millisecond)), time.Duration(run.DegradedToMs*float64(time.Millisecond))
	for _, o := range outs {
		if o.Scheduled >= from && o.Scheduled < to {
			during = append(during, o)
		}
	}
	run.DuringDegradation = load.Summarize(during, to-from)
	run.Primaries, run.Hedges = exp.GatewayAttempts(g)
	run.Shadows = exp.GatewayShadows(g)
	if sent := int64(run.Requests - run.Dropped); sent > 0 {
		run.ExtraAttemptsPct = exp.Round2(100 * float64(run.Hedges) / float64(sent))
		run.ShadowsPct = exp.Round2(100 * float64(run.Shadows) / float64(sent))
	}
	states := g.Replicas().Snapshot(time.Now())
	tl := timeline{
		seconds: int((cfg.Duration + time.Second - 1) / time.Second), names: setup.ReplicaNames, degraded: setup.DegradedIndex,
		from: run.DegradedFromMs, to: run.DegradedToMs, probation: on, transitions: poller.transitions,
	}
	arrivals := offsets(log.all(), start)
	run.Seconds = tl.build(outs, arrivals)
	run.Transitions = poller.transitions
	run.finish(tl, arrivals, states)
	return run, nil
}

// arrivalAt is an arrival in time since the run started.
type arrivalAt struct {
	atMs    float64
	replica int
	kind    int
}

func offsets(events []arrival, start time.Time) []arrivalAt {
	out := make([]arrivalAt, len(events))
	for i, e := range events {
		out[i] = arrivalAt{atMs: load.Ms(e.at.Sub(start)), replica: e.replica, kind: e.kind}
	}
	return out
}

// finish fills in the run's totals from the timeline, the arrivals and
// the replicas' final states.
func (run *Result) finish(tl timeline, arrivals []arrivalAt, states []replica.State) {
	var received int64
	run.Received = make([]replicaWork, len(tl.names))
	var before, beforeAll, duringAll, hedgesDuring int
	for i, n := range tl.names {
		run.Received[i].Name = n
	}
	for _, a := range arrivals {
		w := &run.Received[a.replica]
		during := a.atMs >= tl.from && a.atMs < tl.to
		switch a.kind {
		case kindPrimary:
			w.Primaries++
			received++
			switch {
			case during:
				w.DegradedPrimaries++
				duringAll++
			case a.atMs < tl.from:
				beforeAll++
				if a.replica == tl.degraded {
					before++
				}
			}
		case kindHedge:
			w.Hedges++
			received++
			if during {
				hedgesDuring++
			}
		case kindShadow:
			w.Shadows++
		}
		if a.replica == tl.degraded && during && a.kind != kindShadow {
			run.DegradedAttemptsDuring++
		}
	}
	d := run.Received[tl.degraded]
	run.DegradedShadows = d.Shadows
	if duringAll > 0 {
		run.DegradedPrimarySharePct = exp.Round2(100 * float64(d.DegradedPrimaries) / float64(duringAll))
	}
	if beforeAll > 0 {
		run.PrimarySharePctBefore = exp.Round2(100 * float64(before) / float64(beforeAll))
	}
	if n := run.DuringDegradation.Requests - run.DuringDegradation.Dropped; n > 0 {
		run.ExtraAttemptsPctDuring = exp.Round2(100 * float64(hedgesDuring) / float64(n))
	}
	run.Unreconciled = run.Primaries + run.Hedges - received
	var shadows int64
	for i, s := range states {
		if i < len(run.Received) && s.Probation != nil {
			run.Received[i].Entries, run.Received[i].Exits = s.Probation.Entries, s.Probation.Exits
			if i != tl.degraded {
				run.OtherEntries += s.Probation.Entries
			}
		}
	}
	for _, w := range run.Received {
		shadows += int64(w.Shadows)
	}
	run.UnreconciledShadows = run.Shadows - shadows

	// The degraded replica's first move on probation and its next move off.
	for _, t := range tl.transitions {
		if t.index != tl.degraded {
			continue
		}
		if run.EnteredAtMs == nil && t.To.OnProbation() && !t.From.OnProbation() {
			run.EnteredAtMs = ptr(t.AtMs)
			run.TimeToEnterMs = ptr(exp.Round3(t.AtMs - tl.from))
			continue
		}
		if run.EnteredAtMs != nil && run.ExitedAtMs == nil && !t.To.OnProbation() && t.From.OnProbation() {
			run.ExitedAtMs = ptr(t.AtMs)
			run.TimeToExitMs = ptr(exp.Round3(t.AtMs - tl.to))
		}
	}
	for _, iv := range tl.onProbation(tl.degraded) {
		run.OnProbationMs += iv[1] - iv[0]
	}
	run.OnProbationMs = exp.Round3(run.OnProbationMs)
}

func ptr(x float64) *float64 { return &x }
