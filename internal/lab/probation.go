package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/lab/report"
	"github.com/tailgate-dev/tailgate/replica"
)

// ProbationConfig configures the probation experiment. Zero fields take the
// defaults shown.
type ProbationConfig struct {
	// Duration is how long each run offers reads. Default
	// DefaultProbationDuration (60s: with the gateway's default probation
	// window of 5s, going on probation takes about two windows after the
	// degradation starts, coming off about two after it ends); within
	// [100ms, MaxProbationDuration]. The timeline has one entry per second
	// or part of one.
	Duration time.Duration
	// Rate is the offered load in reads per second (open loop, Poisson
	// arrivals). Default DefaultProbationRate: enough that the gateway's
	// peak-EWMA picker spreads primaries over every replica, which it does
	// not under light load (see RunProbation).
	Rate float64
	// Replicas is how many fixtures serve behind the gateway; the last one
	// degrades. Default 3; within [2, MaxProbationReplicas].
	Replicas int
	// Model is every replica's service time, and the degraded replica's
	// outside its degradation. Default DefaultProbationModel.
	Model Model
	// DegradeFrom and DegradeTo bound the degradation, in time since the
	// run started: the last replica serves the requests that arrive within
	// [DegradeFrom, DegradeTo) Factor times slower (a Phase over Model).
	// When both are zero they default to a fifth and a half of Duration
	// (12s and 30s of the default 60s); otherwise 0 <= DegradeFrom <
	// DegradeTo <= Duration.
	DegradeFrom, DegradeTo time.Duration
	// Factor is how many times slower the degraded replica is. Default
	// DefaultProbationFactor (10); within (1, 1000]. A much larger factor
	// makes the picker starve the slow replica of primaries by itself, and
	// with few samples probation does not judge it at all.
	Factor float64
	// Gateway configures the gateway of both runs: Backends and
	// DisableProbation are set for each run, the rest is kept (its zero
	// value is the gateway's defaults: adaptive hedging, probation at 3×
	// the peers' median for 5s, one shadow a second). Without a
	// Replica.Seed the picks are seeded from Seed.
	Gateway gateway.Config
	// Seed makes arrivals and service times reproducible. Default 1. Both
	// runs read the same arrivals, and each replica draws the same service
	// time for the same read in both.
	Seed uint64
	// Progress, when non-nil, is told each second of each run.
	Progress func(done, total int)
}

// Defaults and limits of a ProbationConfig.
const (
	DefaultProbationDuration = 60 * time.Second
	DefaultProbationRate     = 400.0
	DefaultProbationReplicas = 3
	DefaultProbationFactor   = 10.0
	MaxProbationDuration     = 5 * time.Minute
	MaxProbationReplicas     = 10
	MaxProbationRate         = 2000.0
	// MaxProbationReads bounds the reads of one run (Rate × Duration).
	MaxProbationReads = 300_000
)

// DefaultProbationModel is the replicas' default service time. Its tail
// matters: probation judges the slow replica by its answers and by the
// attempts hedges cut short (at about the hedge delay, the p95 of recent
// latencies, plus a fast answer), so its median as probation sees it is
// capped near that, well below its true median. With a tight tail (p99 at
// 4× p50) that cap sits near the default factor of 3 and the replica
// flaps between serving and diverging; with this one (p99 at 8× p50) it
// is clearly above.
var DefaultProbationModel Model = Lognormal{P50: 5 * time.Millisecond, P99: 40 * time.Millisecond}

// The two runs of the probation experiment.
const (
	ProbationOn  = "probation"
	ProbationOff = "no probation"
)

// ErrProbationConfig wraps every configuration error of the probation
// experiment.
var ErrProbationConfig = errors.New("lab: invalid probation experiment config")

// ProbationSetup is the probation experiment's configuration with its
// defaults filled in, as the gateway applies them.
type ProbationSetup struct {
	DurationMs float64 `json:"durationMs"`
	Rate       float64 `json:"rate"`
	// Reads is how many reads each run offers: the Poisson arrivals of
	// ArrivalSeed within Duration, the same in both runs.
	Reads    int    `json:"readsPerRun"`
	Replicas int    `json:"replicas"`
	Model    string `json:"model"`
	// DegradedReplica is the replica that degrades, DegradedModel its
	// model (a phase, in time since the fixture started).
	DegradedReplica string  `json:"degradedReplica"`
	DegradedModel   string  `json:"degradedModel"`
	DegradeFromMs   float64 `json:"degradeFromMs"`
	DegradeToMs     float64 `json:"degradeToMs"`
	Factor          float64 `json:"factor"`
	// HedgeDelay is the gateway's hedge delay ("adaptive p95", or a
	// duration), MaxAttempts its attempts per read.
	HedgeDelay  string  `json:"hedgeDelay"`
	MaxAttempts int     `json:"maxAttempts"`
	TimeoutMs   float64 `json:"timeoutMs"`
	// Probation is the probation of the run with it, as the replica set
	// applies it.
	Probation     ProbationSettings `json:"probation"`
	Seed          uint64            `json:"seed"`
	ArrivalSeed   uint64            `json:"arrivalSeed"`
	FixtureSeeds  []uint64          `json:"fixtureSeeds"`
	PickSeed      uint64            `json:"pickSeed"`
	ReplicaNames  []string          `json:"replicaNames"`
	DegradedIndex int               `json:"degradedIndex"`
}

// ProbationSettings are the probation settings in effect.
type ProbationSettings struct {
	Factor         float64 `json:"factor"`
	ExitFactor     float64 `json:"exitFactor"`
	WindowMs       float64 `json:"windowMs"`
	MinSamples     int     `json:"minSamples"`
	MaxShare       float64 `json:"maxShare"`
	MaxOnProbation int     `json:"maxOnProbation"`
	ShadowRate     float64 `json:"shadowRate"`
}

// ProbationTransition is a replica's move from one probation status to
// another, in time since the run started. The times of moves on and off
// probation and of the start of a divergence are the replica set's own
// (its status's since); the others are when a poll (every 100ms) saw them.
type ProbationTransition struct {
	AtMs    float64                 `json:"atMs"`
	Replica string                  `json:"replica"`
	From    replica.ProbationStatus `json:"from"`
	To      replica.ProbationStatus `json:"to"`
	Reason  string                  `json:"reason,omitempty"`
	index   int
}

// ProbationReplicaSecond is what one replica received in one second, by
// its own count of arrivals, and its probation status.
type ProbationReplicaSecond struct {
	Name string `json:"name"`
	// Primaries are attempts without a mark, Hedges attempts marked as
	// hedges (hedges and retries), Shadows shadow requests.
	Primaries int `json:"primaries"`
	Hedges    int `json:"hedges"`
	Shadows   int `json:"shadows"`
	// Status is the replica's probation status at the end of the second,
	// OnProbationMs how much of the second it spent on probation (out of
	// the rotation); absent without probation.
	Status        string  `json:"status,omitempty"`
	OnProbationMs float64 `json:"onProbationMs"`
}

// ProbationSecond is one second of a run: the reads scheduled in it and
// what the replicas received in it.
type ProbationSecond struct {
	// Second is the second's start, in seconds since the run started.
	Second int `json:"second"`
	// Reads counts the reads scheduled in the second, Failed those that
	// failed or were dropped.
	Reads  int `json:"reads"`
	Failed int `json:"failed"`
	// P50Ms and P99Ms are the reads' percentiles, from their scheduled
	// times; a failed read counts as infinitely slow, and a percentile
	// that falls on one (or a second without reads) is null.
	P50Ms *float64 `json:"p50Ms"`
	P99Ms *float64 `json:"p99Ms"`
	// Degraded says that the degraded replica was slow during some of the
	// second; OnProbation that it was on probation during some of it.
	Degraded    bool `json:"degraded"`
	OnProbation bool `json:"onProbation"`
	// DegradedAttempts and DegradedShadows are what the degraded replica
	// received: primaries and hedges, and shadows.
	DegradedAttempts int                      `json:"degradedAttempts"`
	DegradedShadows  int                      `json:"degradedShadows"`
	Replicas         []ProbationReplicaSecond `json:"replicas"`
	p99              float64
}

// ProbationReplicaWork is what one replica received in a run.
type ProbationReplicaWork struct {
	Name      string `json:"name"`
	Primaries int    `json:"primaries"`
	Hedges    int    `json:"hedges"`
	Shadows   int    `json:"shadows"`
	// DegradedPrimaries are the primaries it received while the degraded
	// replica was slow.
	DegradedPrimaries int `json:"primariesDuringDegradation"`
	// Entries and Exits count its moves on and off probation.
	Entries uint64 `json:"entries"`
	Exits   uint64 `json:"exits"`
}

// ProbationRun is one run: with or without probation.
type ProbationRun struct {
	Condition string `json:"condition"`
	Probation bool   `json:"probation"`
	// Summary is over every read of the run.
	Summary
	// DuringDegradation is over the reads scheduled while the degraded
	// replica was slow.
	DuringDegradation Summary `json:"duringDegradation"`
	// DegradedFromMs and DegradedToMs are the degradation in time since
	// this run started: the phase's bounds less the time from the
	// fixture's start to the run's.
	DegradedFromMs float64 `json:"degradedFromMs"`
	DegradedToMs   float64 `json:"degradedToMs"`
	// Primaries and Hedges are the gateway's backend attempts;
	// ExtraAttemptsPct is Hedges in % of the reads sent: the duplicate
	// work hedging paid. Shadows counts the shadow requests the gateway
	// sent, ShadowsPct in % of the reads sent.
	Primaries        int64   `json:"primaries"`
	Hedges           int64   `json:"hedges"`
	ExtraAttemptsPct float64 `json:"extraAttemptsPct"`
	Shadows          int64   `json:"shadows"`
	ShadowsPct       float64 `json:"shadowsPct"`
	// ExtraAttemptsPctDuring is the hedges the replicas received while
	// the degraded replica was slow, in % of the reads scheduled then.
	ExtraAttemptsPctDuring float64 `json:"extraAttemptsPctDuringDegradation"`
	// DegradedShadows counts the shadows the degraded replica received;
	// DegradedAttemptsDuring the primaries and hedges it received while
	// slow, DegradedPrimarySharePct its share of all primaries then, and
	// PrimarySharePctBefore its share before the degradation.
	DegradedShadows         int     `json:"degradedShadows"`
	DegradedAttemptsDuring  int     `json:"degradedAttemptsDuringDegradation"`
	DegradedPrimarySharePct float64 `json:"degradedPrimarySharePct"`
	PrimarySharePctBefore   float64 `json:"degradedPrimarySharePctBefore"`
	// EnteredAtMs is when the degraded replica first went on probation,
	// ExitedAtMs when it next came off, in time since the run started;
	// TimeToEnterMs and TimeToExitMs count from the start and the end of
	// the degradation. Null when it did not happen.
	EnteredAtMs   *float64 `json:"enteredProbationAtMs"`
	ExitedAtMs    *float64 `json:"exitedProbationAtMs"`
	TimeToEnterMs *float64 `json:"timeToEnterMs"`
	TimeToExitMs  *float64 `json:"timeToExitMs"`
	// OnProbationMs is how long the degraded replica was on probation;
	// OtherEntries counts the other replicas' moves on probation.
	OnProbationMs float64 `json:"onProbationMs"`
	OtherEntries  uint64  `json:"otherEntries"`
	// Received is what each replica received, by its own count.
	Received []ProbationReplicaWork `json:"received"`
	// Unreconciled is the gateway's attempts less what the replicas
	// received (attempts cancelled before they were sent never arrive),
	// UnreconciledShadows the same for shadows.
	Unreconciled        int64                 `json:"unreconciled"`
	UnreconciledShadows int64                 `json:"unreconciledShadows"`
	Transitions         []ProbationTransition `json:"transitions"`
	// Seconds is the timeline, one entry per second of the run.
	Seconds []ProbationSecond `json:"seconds,omitempty"`
}

// ProbationReport is the probation experiment's report.
type ProbationReport struct {
	Version     int            `json:"version"`
	Experiment  string         `json:"experiment"`
	Config      ProbationSetup `json:"config"`
	Environment Environment    `json:"environment"`
	// Runs are the run without probation, then the one with it.
	Runs []ProbationRun `json:"runs"`
}

// Check fills in cfg's defaults, validates it and returns the setup a run
// of it would have. Its errors wrap ErrProbationConfig, ErrModel or
// gateway.ErrInvalid.
func (cfg ProbationConfig) Check() (ProbationSetup, error) {
	_, setup, err := cfg.withDefaults()
	return setup, err
}

func (cfg ProbationConfig) withDefaults() (ProbationConfig, ProbationSetup, error) {
	if cfg.Duration == 0 {
		cfg.Duration = DefaultProbationDuration
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultProbationRate
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = DefaultProbationReplicas
	}
	if cfg.Model == nil {
		cfg.Model = DefaultProbationModel
	}
	if cfg.DegradeFrom == 0 && cfg.DegradeTo == 0 {
		cfg.DegradeFrom, cfg.DegradeTo = cfg.Duration/5, cfg.Duration/2
	}
	if cfg.Factor == 0 {
		cfg.Factor = DefaultProbationFactor
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	bad := func(format string, args ...any) (ProbationConfig, ProbationSetup, error) {
		return cfg, ProbationSetup{}, fmt.Errorf("%w: "+format, append([]any{ErrProbationConfig}, args...)...)
	}
	switch {
	case cfg.Duration < 100*time.Millisecond || cfg.Duration > MaxProbationDuration:
		return bad("duration %v must be within [100ms, %v]", cfg.Duration, MaxProbationDuration)
	case !(cfg.Rate > 0 && cfg.Rate <= MaxProbationRate):
		return bad("rate %v must be within (0, %v]", cfg.Rate, MaxProbationRate)
	case cfg.Rate*cfg.Duration.Seconds() > MaxProbationReads:
		return bad("%.0f reads/s for %v would be %.0f reads per run: keep it within %d", cfg.Rate, cfg.Duration, cfg.Rate*cfg.Duration.Seconds(), MaxProbationReads)
	case cfg.Replicas < 2 || cfg.Replicas > MaxProbationReplicas:
		return bad("replicas %d must be within [2, %d]", cfg.Replicas, MaxProbationReplicas)
	case cfg.DegradeFrom < 0 || cfg.DegradeTo <= cfg.DegradeFrom || cfg.DegradeTo > cfg.Duration:
		return bad("degradation [%v, %v) must be within the run [0, %v], and not empty", cfg.DegradeFrom, cfg.DegradeTo, cfg.Duration)
	case !(cfg.Factor > 1 && cfg.Factor <= maxPhaseFactor):
		return bad("factor %v must be within (1, %d]", cfg.Factor, maxPhaseFactor)
	}
	if err := validateModel(cfg.Model); err != nil {
		return cfg, ProbationSetup{}, err
	}
	degraded := Phase{From: cfg.DegradeFrom, To: cfg.DegradeTo, Factor: cfg.Factor, Base: cfg.Model}
	if err := validateModel(degraded); err != nil {
		return cfg, ProbationSetup{}, err
	}
	s := ProbationSetup{
		DurationMs: ms(cfg.Duration), Rate: cfg.Rate, Replicas: cfg.Replicas, Model: cfg.Model.String(),
		DegradedModel: degraded.String(), DegradeFromMs: ms(cfg.DegradeFrom), DegradeToMs: ms(cfg.DegradeTo), Factor: cfg.Factor,
		Seed: cfg.Seed, ArrivalSeed: pointSeed(cfg.Seed, 0), PickSeed: cfg.Gateway.Replica.Seed, DegradedIndex: cfg.Replicas - 1,
	}
	if s.PickSeed == 0 {
		s.PickSeed = pointSeed(cfg.Seed, 1)
	}
	for i := range cfg.Replicas {
		s.ReplicaNames = append(s.ReplicaNames, "replica-"+replicaLetter(i))
		s.FixtureSeeds = append(s.FixtureSeeds, cfg.Seed*1_000_003+uint64(i))
	}
	s.DegradedReplica = s.ReplicaNames[s.DegradedIndex]
	s.Reads = poissonArrivals(Load{Rate: cfg.Rate, Seed: s.ArrivalSeed}, cfg.Duration)
	if s.Reads < 1 {
		return bad("no read arrives within %v at %v reads/s with seed %d", cfg.Duration, cfg.Rate, cfg.Seed)
	}
	// The gateway applies its own defaults and checks the rest: ask it,
	// with placeholder backends it never contacts.
	gcfg := probationGateway(cfg, s, make([]string, cfg.Replicas), true)
	for i := range gcfg.Backends {
		gcfg.Backends[i] = "http://127.0.0.1:" + strconv.Itoa(9+i)
	}
	g, err := gateway.New(gcfg)
	if err != nil {
		return cfg, ProbationSetup{}, err
	}
	defer g.Close()
	p := g.Hedger().Policy()
	s.HedgeDelay = "adaptive p" + strconv.FormatFloat(100*p.Adaptive.Quantile, 'g', -1, 64)
	if p.Delay > 0 {
		s.HedgeDelay = p.Delay.String()
	}
	s.MaxAttempts = p.MaxAttempts
	s.TimeoutMs = ms(gateway.DefaultTimeout)
	if gcfg.Timeout > 0 {
		s.TimeoutMs = ms(gcfg.Timeout)
	}
	pr := g.Replicas().Config().Probation
	s.Probation = ProbationSettings{Factor: pr.Factor, ExitFactor: pr.ExitFactor, WindowMs: ms(pr.Window), MinSamples: pr.MinSamples,
		MaxShare: pr.MaxShare, MaxOnProbation: pr.MaxOnProbation(cfg.Replicas), ShadowRate: pr.ShadowRate}
	return cfg, s, nil
}

func replicaLetter(i int) string {
	if i < 26 {
		return string(rune('a' + i))
	}
	return strconv.Itoa(i)
}

// probationGateway is the gateway configuration of a run.
func probationGateway(cfg ProbationConfig, s ProbationSetup, backends []string, on bool) gateway.Config {
	g := cfg.Gateway
	g.Backends = backends
	g.DisableProbation = !on
	g.Replica.Seed = s.PickSeed
	return g
}

// RunProbation runs the probation experiment: Replicas fixtures on
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
func RunProbation(ctx context.Context, cfg ProbationConfig) (*ProbationReport, error) {
	cfg, setup, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rep := &ProbationReport{Version: ReportVersion, Experiment: "probation", Config: setup, Environment: newEnvironment(cfg.Seed)}
	seconds := int((cfg.Duration + time.Second - 1) / time.Second)
	for i, on := range []bool{false, true} {
		var progress func(int)
		if cfg.Progress != nil {
			progress = func(s int) { cfg.Progress(i*seconds+min(s, seconds), 2*seconds) }
		}
		run, err := runProbation(ctx, cfg, setup, on, progress)
		if err != nil {
			return nil, fmt.Errorf("lab: probation, %s: %w", run.Condition, err)
		}
		rep.Runs = append(rep.Runs, run)
	}
	rep.Environment.finish()
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

// runProbation runs one condition on fresh fixtures and a fresh gateway.
func runProbation(ctx context.Context, cfg ProbationConfig, setup ProbationSetup, on bool, progress func(int)) (run ProbationRun, err error) {
	run = ProbationRun{Condition: ProbationOff, Probation: on}
	if on {
		run.Condition = ProbationOn
	}
	log := &arrivalLog{}
	var fixtures []*Fixture
	defer func() { closeAll(fixtures) }()
	var backends []string
	for i := range setup.Replicas {
		m := cfg.Model
		if i == setup.DegradedIndex {
			m = Phase{From: cfg.DegradeFrom, To: cfg.DegradeTo, Factor: cfg.Factor, Base: cfg.Model}
		}
		f, err := StartFixture(FixtureConfig{Name: setup.ReplicaNames[i], Model: m, Seed: setup.FixtureSeeds[i], Middleware: log.wrap(i)})
		if err != nil {
			return run, err
		}
		fixtures = append(fixtures, f)
		backends = append(backends, f.URL())
	}
	g, err := gateway.New(probationGateway(cfg, setup, backends, on))
	if err != nil {
		return run, err
	}
	gClosed := false
	defer func() {
		if !gClosed {
			g.Close()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return run, err
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	timeout := time.Duration(setup.TimeoutMs*float64(time.Millisecond)) + 5*time.Second
	base := hedge.NewBaseTransport()
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: base, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return hedge.ErrRedirectRefused }}
	front := "http://" + ln.Addr().String() + "/item?id="

	load := Load{Requests: setup.Reads, Rate: cfg.Rate, Seed: setup.ArrivalSeed}
	start := time.Now()
	// The degraded fixture's phase counts from its own start, a moment
	// before the run's.
	lag := start.Sub(fixtures[setup.DegradedIndex].start)
	run.DegradedFromMs, run.DegradedToMs = ms(cfg.DegradeFrom-lag), ms(cfg.DegradeTo-lag)
	poller := newProbationPoller(g.Replicas(), setup.ReplicaNames, start)
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
	outs := Generate(ctx, load, func(ctx context.Context, i int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, front+strconv.Itoa(i), nil)
		if err != nil {
			return err
		}
		return fetch(func(int) (*http.Response, error) { return client.Do(req) }, i)
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
	if err := settleAll(ctx, fixtures); err != nil {
		return run, err
	}
	poller.poll(time.Now())
	g.Close()
	gClosed = true
	if progress != nil {
		progress(math.MaxInt)
	}

	run.Summary = Summarize(outs, elapsed)
	var during []Outcome
	from, to := time.Duration(run.DegradedFromMs*float64(time.Millisecond)), time.Duration(run.DegradedToMs*float64(time.Millisecond))
	for _, o := range outs {
		if o.Scheduled >= from && o.Scheduled < to {
			during = append(during, o)
		}
	}
	run.DuringDegradation = Summarize(during, to-from)
	run.Primaries, run.Hedges = GatewayAttempts(g)
	run.Shadows = GatewayShadows(g)
	if sent := int64(run.Requests - run.Dropped); sent > 0 {
		run.ExtraAttemptsPct = round2(100 * float64(run.Hedges) / float64(sent))
		run.ShadowsPct = round2(100 * float64(run.Shadows) / float64(sent))
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
		out[i] = arrivalAt{atMs: ms(e.at.Sub(start)), replica: e.replica, kind: e.kind}
	}
	return out
}

// finish fills in the run's totals from the timeline, the arrivals and
// the replicas' final states.
func (run *ProbationRun) finish(tl timeline, arrivals []arrivalAt, states []replica.State) {
	var received int64
	run.Received = make([]ProbationReplicaWork, len(tl.names))
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
		run.DegradedPrimarySharePct = round2(100 * float64(d.DegradedPrimaries) / float64(duringAll))
	}
	if beforeAll > 0 {
		run.PrimarySharePctBefore = round2(100 * float64(before) / float64(beforeAll))
	}
	if n := run.DuringDegradation.Requests - run.DuringDegradation.Dropped; n > 0 {
		run.ExtraAttemptsPctDuring = round2(100 * float64(hedgesDuring) / float64(n))
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
			run.TimeToEnterMs = ptr(round3(t.AtMs - tl.from))
			continue
		}
		if run.EnteredAtMs != nil && run.ExitedAtMs == nil && !t.To.OnProbation() && t.From.OnProbation() {
			run.ExitedAtMs = ptr(t.AtMs)
			run.TimeToExitMs = ptr(round3(t.AtMs - tl.to))
		}
	}
	for _, iv := range tl.onProbation(tl.degraded) {
		run.OnProbationMs += iv[1] - iv[0]
	}
	run.OnProbationMs = round3(run.OnProbationMs)
}

func ptr(x float64) *float64 { return &x }

// timeline turns a run's outcomes, arrivals and transitions into seconds.
type timeline struct {
	seconds     int
	names       []string
	degraded    int
	from, to    float64 // the degradation, ms since the run started
	probation   bool
	transitions []ProbationTransition
	end         float64 // ms; default: the end of the last second
}

// status returns replica i's probation status at ms since the run started:
// the destination of its last transition at or before it.
func (tl timeline) status(i int, at float64) replica.ProbationStatus {
	st := replica.Serving
	for _, t := range tl.transitions {
		if t.index == i && t.AtMs <= at {
			st = t.To
		}
	}
	return st
}

// onProbation returns the intervals (ms) during which replica i was out of
// the rotation, within the timeline.
func (tl timeline) onProbation(i int) [][2]float64 {
	end := tl.end
	if end == 0 {
		end = float64(tl.seconds) * 1000
	}
	var out [][2]float64
	open, since := false, 0.0
	for _, t := range tl.transitions {
		if t.index != i {
			continue
		}
		switch on := t.To.OnProbation(); {
		case on && !open:
			open, since = true, t.AtMs
		case !on && open:
			open = false
			out = append(out, [2]float64{since, t.AtMs})
		}
	}
	if open {
		out = append(out, [2]float64{since, max(end, since)})
	}
	return out
}

// build returns one entry per second: the reads scheduled in it, what each
// replica received in it (arrivals after the last second count in it) and
// the replicas' probation.
func (tl timeline) build(outs []Outcome, arrivals []arrivalAt) []ProbationSecond {
	secs := make([]ProbationSecond, tl.seconds)
	byReads := make([][]Outcome, tl.seconds)
	for _, o := range outs {
		s := min(max(int(o.Scheduled/time.Second), 0), tl.seconds-1)
		byReads[s] = append(byReads[s], o)
	}
	probation := make([][][2]float64, len(tl.names))
	for i := range tl.names {
		if tl.probation {
			probation[i] = tl.onProbation(i)
		}
	}
	for s := range secs {
		lo, hi := float64(s)*1000, float64(s+1)*1000
		sec := &secs[s]
		sec.Second = s
		sum := Summarize(byReads[s], time.Second)
		sec.Reads, sec.Failed = sum.Requests, sum.Failed+sum.Dropped
		sec.p99 = sum.P99Ms
		if drawable(sum.P50Ms) {
			sec.P50Ms = ptr(sum.P50Ms)
		}
		if drawable(sum.P99Ms) {
			sec.P99Ms = ptr(sum.P99Ms)
		}
		sec.Degraded = tl.from < hi && tl.to > lo
		sec.Replicas = make([]ProbationReplicaSecond, len(tl.names))
		for i, n := range tl.names {
			r := &sec.Replicas[i]
			r.Name = n
			if !tl.probation {
				continue
			}
			r.Status = tl.status(i, hi).String()
			for _, iv := range probation[i] {
				if d := min(iv[1], hi) - max(iv[0], lo); d > 0 {
					r.OnProbationMs += d
				}
			}
			r.OnProbationMs = round3(r.OnProbationMs)
		}
		sec.OnProbation = sec.Replicas[tl.degraded].OnProbationMs > 0
	}
	for _, a := range arrivals {
		s := min(max(int(math.Floor(a.atMs/1000)), 0), tl.seconds-1)
		r := &secs[s].Replicas[a.replica]
		switch a.kind {
		case kindPrimary:
			r.Primaries++
		case kindHedge:
			r.Hedges++
		case kindShadow:
			r.Shadows++
		}
	}
	for s := range secs {
		d := secs[s].Replicas[tl.degraded]
		secs[s].DegradedAttempts, secs[s].DegradedShadows = d.Primaries+d.Hedges, d.Shadows
	}
	return secs
}

// probationPoller follows the replicas' probation statuses and records
// their transitions. It is used from one goroutine at a time.
type probationPoller struct {
	set         *replica.Set
	names       []string // the replicas' names in the report, by index
	start       time.Time
	last        []replica.ProbationStatus
	lastAt      []float64
	transitions []ProbationTransition
}

func newProbationPoller(set *replica.Set, names []string, start time.Time) *probationPoller {
	return &probationPoller{set: set, names: names, start: start}
}

func (p *probationPoller) poll(now time.Time) {
	p.observe(p.set.Snapshot(now), now)
}

// observe records the transitions between the last statuses seen and
// states, read at now. A move on or off probation, and the start of a
// divergence, are dated by the replica set (the status's Since); other
// moves, and any date the set does not give, by now. Dates never go back
// for a replica, nor past now.
func (p *probationPoller) observe(states []replica.State, now time.Time) {
	if p.last == nil {
		p.last = make([]replica.ProbationStatus, len(states))
		p.lastAt = make([]float64, len(states))
	}
	nowMs := ms(now.Sub(p.start))
	for i, s := range states {
		if s.Probation == nil || i >= len(p.last) {
			continue
		}
		from, to := p.last[i], s.Probation.Status
		if from == to {
			continue
		}
		at := nowMs
		dated := to == replica.Diverging || to == replica.OnProbation && !from.OnProbation() ||
			to == replica.Serving && from.OnProbation()
		if dated && !s.Probation.Since.IsZero() {
			at = min(ms(s.Probation.Since.Sub(p.start)), nowMs)
		}
		at = max(at, p.lastAt[i])
		name := s.Name
		if i < len(p.names) {
			name = p.names[i]
		}
		p.transitions = append(p.transitions, ProbationTransition{AtMs: at, Replica: name, From: from, To: to,
			Reason: s.Probation.Reason, index: i})
		p.last[i], p.lastAt[i] = to, at
	}
}

// Section implements Sectioner: the p99 timeline of both runs with the
// degradation and the probation marked, the degraded replica's attempts
// per second, and a summary table.
func (r *ProbationReport) Section() report.Section {
	c := r.Config
	top := 0.0
	var p99s, attempts []report.Series
	failedSeconds := 0
	for _, run := range r.Runs {
		s := report.Series{Name: run.Condition, Dashed: !run.Probation, Marker: true}
		a := report.Series{Name: run.Condition + ": primaries and hedges", Dashed: !run.Probation}
		for _, sec := range run.Seconds {
			x := float64(sec.Second) + 0.5
			if sec.P99Ms != nil && *sec.P99Ms > 0 {
				s.Points = append(s.Points, report.Point{X: x, Y: *sec.P99Ms})
				top = max(top, *sec.P99Ms)
			} else if math.IsInf(sec.p99, 1) || sec.Reads > 0 && sec.P99Ms == nil {
				failedSeconds++
			}
			a.Points = append(a.Points, report.Point{X: x, Y: float64(sec.DegradedAttempts)})
		}
		p99s = append(p99s, s)
		attempts = append(attempts, a)
		if run.Probation {
			sh := report.Series{Name: run.Condition + ": shadows"}
			for _, sec := range run.Seconds {
				sh.Points = append(sh.Points, report.Point{X: float64(sec.Second) + 0.5, Y: float64(sec.DegradedShadows)})
			}
			attempts = append(attempts, sh)
		}
	}
	if top <= 0 {
		top = 1
	}
	// Bars above the data mark the degradation and each stay on probation.
	var notes []report.Note
	var first *ProbationRun
	if len(r.Runs) > 0 {
		first = &r.Runs[0]
	}
	var on *ProbationRun
	for i := range r.Runs {
		if r.Runs[i].Probation {
			on = &r.Runs[i]
		}
	}
	if first != nil {
		y := top * 2.5
		p99s = append(p99s, report.Series{Name: c.DegradedReplica + " degraded", Points: []report.Point{{X: first.DegradedFromMs / 1000, Y: y}, {X: first.DegradedToMs / 1000, Y: y}}})
		notes = append(notes, report.Note{X: first.DegradedFromMs / 1000, Y: y, Text: fmt.Sprintf("%s %g× slower", c.DegradedReplica, c.Factor)})
	}
	if on != nil {
		end := float64(len(on.Seconds))
		for k, iv := range probationIntervals(on, c.DegradedReplica, end*1000) {
			y := top * 1.6
			name := c.DegradedReplica + " on probation"
			if k > 0 {
				name += " (" + strconv.Itoa(k+1) + ")"
			}
			p99s = append(p99s, report.Series{Name: name, Points: []report.Point{{X: iv[0] / 1000, Y: y}, {X: iv[1] / 1000, Y: y}}})
			if k == 0 {
				notes = append(notes, report.Note{X: iv[0] / 1000, Y: y, Text: "on probation"})
			}
		}
	}
	caption := "Each point is the p99 of the reads scheduled in that second, from their scheduled times; the bars above mark when the degraded replica was slow and when it was on probation (run with probation)."
	if failedSeconds > 0 {
		caption += fmt.Sprintf(" In %d seconds more than 1%% of the reads failed, so their p99 read never succeeded: they are not drawn.", failedSeconds)
	}
	opt := func(x *float64, base float64) string {
		if x == nil {
			return "never"
		}
		return fmt.Sprintf("%.1f s (+%.1f s)", *x/1000, (*x-base)/1000)
	}
	var lat, cost, trows [][]string
	for _, run := range r.Runs {
		enter, exit := "—", "—"
		if run.Probation {
			enter, exit = opt(run.EnteredAtMs, run.DegradedFromMs), opt(run.ExitedAtMs, run.DegradedToMs)
		}
		lat = append(lat, []string{run.Condition, fms(run.P50Ms), fms(run.P99Ms), fms(run.P999Ms), fms(run.DuringDegradation.P50Ms), fms(run.DuringDegradation.P99Ms),
			fms(run.DuringDegradation.P999Ms), strconv.Itoa(run.Failed + run.Dropped)})
		cost = append(cost, []string{run.Condition, f2(run.ExtraAttemptsPct), f2(run.ExtraAttemptsPctDuring), strconv.FormatInt(run.Shadows, 10),
			f1(run.PrimarySharePctBefore), f1(run.DegradedPrimarySharePct), strconv.Itoa(run.DegradedAttemptsDuring), enter, exit})
		for _, t := range run.Transitions {
			trows = append(trows, []string{run.Condition, f1(t.AtMs / 1000), t.Replica, t.From.String() + " → " + t.To.String(), t.Reason})
		}
	}
	tables := []report.Table{{
		Title:   "Latency, ms (\"slow\": over the reads scheduled while " + c.DegradedReplica + " was slow)",
		Columns: []string{"run", "p50", "p99", "p99.9", "p50 slow", "p99 slow", "p99.9 slow", "failed"},
		Rows:    lat,
	}, {
		Title: "Cost and probation: hedges in % of the reads, overall and while " + c.DegradedReplica + " was slow; shadows sent; " + c.DegradedReplica +
			"'s share of the primaries before and while slow, and the attempts it got while slow; when it went on and came off probation (s since the run started, + since the slowness began or ended)",
		Columns: []string{"run", "hedges %", "… slow", "shadows", "share %", "… slow", "attempts", "on probation", "off probation"},
		Rows:    cost,
	}}
	if len(trows) > 0 {
		tables = append(tables, report.Table{Title: "Probation transitions (s since the run started)", Columns: []string{"run", "at s", "replica", "move", "reason"}, Rows: trows,
			Align: []string{"left", "right", "left", "left", "left"}})
	}
	story := ""
	if first != nil {
		story = fmt.Sprintf("The rate is chosen so that primaries spread over every replica: before the degradation %s took %.1f%% of them (a fair share is %.0f%%). "+
			"Under light load the peak-EWMA picker would keep a slow replica's primaries away by itself, and probation would have nothing to add. "+
			"While %s was slow, without probation, the picker alone cut its share to %.1f%% (it tries a replica again as its price decays), and hedging rescued what it could within its budget and gate.",
			c.DegradedReplica, first.PrimarySharePctBefore, 100/float64(c.Replicas), c.DegradedReplica, first.DegradedPrimarySharePct)
	}
	if on != nil {
		switch {
		case on.EnteredAtMs == nil:
			story += fmt.Sprintf(" With probation on, %s never went on probation: a replica the picker starves gives too few samples to be judged, or its median never stayed %g× its peers' for a window.",
				c.DegradedReplica, c.Probation.Factor)
		case on.ExitedAtMs == nil:
			story += fmt.Sprintf(" With probation on, %s went on probation %.1f s after the degradation began and was still on it when the run ended.", c.DegradedReplica, *on.TimeToEnterMs/1000)
		default:
			story += fmt.Sprintf(" With probation on, %s went on probation %.1f s after the degradation began (the divergence must last a window, after enough of the window's samples are slow) and came off %.1f s after it ended (its shadows must show the recovery for a window).",
				c.DegradedReplica, *on.TimeToEnterMs/1000, *on.TimeToExitMs/1000)
		}
	}
	if first != nil && on != nil {
		story += fmt.Sprintf(" What each costs: hedges were %.2f%% of the reads without probation and %.2f%% with it (%.2f%% and %.2f%% while the replica was slow), and probation sent %d shadows (%.2f%% of the reads).",
			first.ExtraAttemptsPct, on.ExtraAttemptsPct, first.ExtraAttemptsPctDuring, on.ExtraAttemptsPctDuring, on.Shadows, on.ShadowsPct)
	}
	return report.Section{
		Heading: "probation: one replica degrades mid-run and recovers",
		Text: fmt.Sprintf("%d replicas on 127.0.0.1 serving %s behind the real gateway in-process; %s serves the reads that arrive from %.1f s to %.1f s %g× slower (%s). "+
			"%.0f reads/s in open loop for %.0f s, read once with probation off (DisableProbation) and once with it on (%g× the peers' median for %.1f s to go on, below %g× for as long to come off, shadows at %g/s), "+
			"each on fresh replicas and a fresh gateway with the same arrivals and the same service-time draws; hedging is the gateway's (%s, at most %d attempts) in both. "+
			"Latency is from each read's scheduled time, and a failed read counts as infinitely slow; attempts are the replicas' own counts.\n\n%s",
			c.Replicas, c.Model, c.DegradedReplica, c.DegradeFromMs/1000, c.DegradeToMs/1000, c.Factor, c.DegradedModel,
			c.Rate, c.DurationMs/1000, c.Probation.Factor, c.Probation.WindowMs/1000, c.Probation.ExitFactor, c.Probation.ShadowRate,
			c.HedgeDelay, c.MaxAttempts, story),
		Plots: []report.Plot{{
			Title: "p99 per second", XLabel: "time since the run started (s)", YLabel: "p99 (ms, log scale)", LogY: true,
			XMin: 0, XMax: c.DurationMs / 1000, Series: p99s, Notes: notes, Caption: caption,
		}, {
			Title: "What " + c.DegradedReplica + " received per second", XLabel: "time since the run started (s)", YLabel: "requests",
			XMin: 0, XMax: c.DurationMs / 1000, Series: attempts,
			Caption: "Primaries and hedges it received in each run, and the shadows of the run with probation: on probation it gets no primaries and no hedges, only shadows.",
		}},
		Tables: tables,
	}
}

// probationIntervals returns when the named replica was on probation in
// run, in ms; end closes a stay that had not ended.
func probationIntervals(run *ProbationRun, name string, end float64) [][2]float64 {
	tl := timeline{transitions: slices.Clone(run.Transitions), end: end}
	for k := range tl.transitions {
		tl.transitions[k].index = -1
		if tl.transitions[k].Replica == name {
			tl.transitions[k].index = 0
		}
	}
	return tl.onProbation(0)
}
