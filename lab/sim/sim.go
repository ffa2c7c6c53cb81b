package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Latency draws one shard's service time. Run calls it from several
// goroutines at once, each with its own rng, so it must not share mutable
// state unless it guards it; given the same rng draws it must return the
// same value, or runs are not reproducible. Negative values count as 0.
type Latency func(rng *rand.Rand) time.Duration

// Policy is how a simulated user request fans out and when it completes.
type Policy struct {
	// Name labels the Result.
	Name string
	// Fanout is N, the number of shards (leaves) a request goes to; at
	// least 1 and at most MaxFanout.
	Fanout int
	// Need is k: the request completes when k shards have answered (a
	// good-enough result). 0 means N, waiting for every shard.
	Need int
	// HedgeAfter, when > 0, sends each shard that has not answered by then
	// a duplicate to another replica with an independent latency, so the
	// shard answers at min(L1, HedgeAfter+L2). Hedges are sent only while
	// the request is still waiting: none once Need shards have answered or
	// the deadline has passed. 0 disables hedging.
	HedgeAfter time.Duration
	// Deadline, when > 0, returns the request at the deadline with what
	// has arrived if fewer than Need shards have (a partial result), so
	// its latency is at most Deadline. 0 means no deadline.
	Deadline time.Duration
	// BudgetFraction, when > 0, limits hedges with a budget shared by the
	// whole simulated fleet, like hedge.Budget: it starts full, earns
	// BudgetFraction of a credit per shard request, is capped at
	// BudgetBurst, and each hedge spends one credit. 0 means unlimited
	// hedging. It must be within [0, 1]. A budget couples requests, so Run
	// then uses the exact method.
	BudgetFraction float64
	// BudgetBurst caps the budget's credits; default 10 when BudgetFraction
	// > 0, and then at least 1. Ignored when BudgetFraction is 0.
	BudgetBurst float64
}

// Method is how Run simulates requests.
type Method int

const (
	// MethodAuto picks MethodExact when the policy has a budget or when
	// drawing every shard costs no more draws than building the empirical
	// distribution (Requests × Fanout <= SampleSize), and
	// MethodOrderStats otherwise.
	MethodAuto Method = iota
	// MethodExact draws every shard of every request (and every hedge).
	MethodExact
	// MethodOrderStats draws each request's completion time from the order
	// statistics of an empirical shard distribution: fast at any fan-out,
	// approximate (see the package documentation), and not available with a
	// budget.
	MethodOrderStats
)

// String returns "auto", "exact" or "order-statistics".
func (m Method) String() string {
	switch m {
	case MethodAuto:
		return "auto"
	case MethodExact:
		return "exact"
	case MethodOrderStats:
		return "order-statistics"
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// Result summarises a run. Percentiles are nearest-rank over the simulated
// requests.
type Result struct {
	Policy   string
	Method   Method // the method Run used: MethodExact or MethodOrderStats
	Requests int
	// User-facing latency: until the request completes, or its deadline.
	Mean                          time.Duration
	P50, P90, P95, P99, P999, Max time.Duration
	// ExtraAttemptsPct is hedges per shard request, in percent.
	ExtraAttemptsPct float64
	// PartialShare is the share of requests returned partial: the
	// deadline came before Need shards had answered.
	PartialShare float64
	// SlowShare is the share of requests whose completion waited on at
	// least one shard slower than Options.SlowThreshold; 0 when the
	// threshold is 0. A request completes when its Need-th shard answers,
	// and every shard it waited on answered no later, so it waited on a
	// slow shard exactly when its latency exceeds the threshold. A partial
	// request counts when its deadline exceeds the threshold: it waited
	// that long on the shards that never answered.
	SlowShare float64
}

// Options control a run. All but RequestFactor are about the simulation
// rather than the system simulated.
type Options struct {
	// Requests simulated; default 100000, at most MaxRequests. Run keeps
	// every latency (8 bytes a request) to compute exact percentiles.
	Requests int
	// Seed makes the run reproducible: the same Seed, Policy, Latency and
	// Options give the same Result whatever Workers is.
	Seed uint64
	// Workers is the number of goroutines; default GOMAXPROCS.
	Workers int
	// SlowThreshold defines a slow shard for Result.SlowShare; 0 means
	// SlowShare is not computed.
	SlowThreshold time.Duration
	// Method; default MethodAuto.
	Method Method
	// SampleSize is the number of draws behind the empirical distribution
	// of MethodOrderStats; default DefaultSampleSize, at most
	// MaxSampleSize. Its error shrinks as 1/sqrt(SampleSize).
	SampleSize int
	// RequestFactor, when non-nil, is drawn once per request and multiplies
	// the latency of every attempt of that request (first attempts and
	// hedges alike): a cause all of a request's leaves share, such as the
	// query's cost or a burst on shared machines. nil means the leaves are
	// independent. With independent leaves the time until 95% of N leaves
	// finish concentrates near the leaf p95 as N grows, so its p99 stays
	// below a single leaf's p99; the paper's Table 1, where it is 7 times
	// higher, implies such a shared cause. Values that are negative or NaN
	// count as 0. It must be safe to call like Latency.
	RequestFactor func(rng *rand.Rand) float64
}

// Defaults and limits.
const (
	DefaultRequests    = 100_000
	DefaultSampleSize  = 1 << 22
	DefaultBudgetBurst = 10
	MaxFanout          = 10_000_000
	MaxRequests        = 100_000_000
	MaxSampleSize      = 1 << 30
)

// ErrInvalid is wrapped by every error about an invalid policy, latency or
// options.
var ErrInvalid = errors.New("sim: invalid policy")

// creditUnit makes budget credits integers (micro-credits), as hedge.Budget
// does, so that millions of fractional earnings do not drift.
const creditUnit = 1_000_000

// sim is a validated Policy and Options with defaults applied.
type sim struct {
	name     string
	n, k     int
	d        time.Duration // HedgeAfter
	deadline time.Duration
	// hedging: HedgeAfter > 0 and it comes before the deadline; a hedge
	// due at or after the deadline is never sent because the request has
	// already returned.
	hedging   bool
	budget    bool
	perAdmit  int64 // micro-credits earned per shard request
	maxCredit int64 // micro-credits cap

	lat        Latency
	factor     func(rng *rand.Rand) float64
	requests   int
	seed       uint64
	workers    int
	slow       time.Duration
	method     Method
	sampleSize int
}

func newSim(p Policy, lat Latency, o Options) (*sim, error) {
	if lat == nil {
		return nil, fmt.Errorf("%w: nil Latency", ErrInvalid)
	}
	if p.Fanout < 1 || p.Fanout > MaxFanout {
		return nil, fmt.Errorf("%w: fan-out %d outside [1, %d]", ErrInvalid, p.Fanout, MaxFanout)
	}
	if p.Need < 0 || p.Need > p.Fanout {
		return nil, fmt.Errorf("%w: need %d outside [0, fan-out %d]", ErrInvalid, p.Need, p.Fanout)
	}
	if p.HedgeAfter < 0 {
		return nil, fmt.Errorf("%w: negative hedge delay %v", ErrInvalid, p.HedgeAfter)
	}
	if p.Deadline < 0 {
		return nil, fmt.Errorf("%w: negative deadline %v", ErrInvalid, p.Deadline)
	}
	if math.IsNaN(p.BudgetFraction) || p.BudgetFraction < 0 || p.BudgetFraction > 1 {
		return nil, fmt.Errorf("%w: budget fraction %v outside [0, 1]", ErrInvalid, p.BudgetFraction)
	}
	if o.Requests < 0 || o.Requests > MaxRequests {
		return nil, fmt.Errorf("%w: requests %d outside [0, %d]", ErrInvalid, o.Requests, MaxRequests)
	}
	if o.Workers < 0 {
		return nil, fmt.Errorf("%w: negative workers %d", ErrInvalid, o.Workers)
	}
	if o.SlowThreshold < 0 {
		return nil, fmt.Errorf("%w: negative slow threshold %v", ErrInvalid, o.SlowThreshold)
	}
	if o.SampleSize < 0 || o.SampleSize > MaxSampleSize {
		return nil, fmt.Errorf("%w: sample size %d outside [0, %d]", ErrInvalid, o.SampleSize, MaxSampleSize)
	}
	s := &sim{
		name:       p.Name,
		n:          p.Fanout,
		k:          orDefault(p.Need, p.Fanout),
		d:          p.HedgeAfter,
		deadline:   p.Deadline,
		lat:        lat,
		factor:     o.RequestFactor,
		requests:   orDefault(o.Requests, DefaultRequests),
		seed:       o.Seed,
		workers:    orDefault(o.Workers, runtime.GOMAXPROCS(0)),
		slow:       o.SlowThreshold,
		sampleSize: orDefault(o.SampleSize, DefaultSampleSize),
	}
	s.hedging = s.d > 0 && (s.deadline == 0 || s.d < s.deadline)
	if p.BudgetFraction > 0 {
		burst := p.BudgetBurst
		if burst == 0 {
			burst = DefaultBudgetBurst
		}
		if math.IsNaN(burst) || burst < 1 || burst > 1e9 {
			return nil, fmt.Errorf("%w: budget burst %v outside [1, 1e9]", ErrInvalid, burst)
		}
		s.budget = true
		s.perAdmit = int64(p.BudgetFraction * creditUnit)
		s.maxCredit = int64(burst * creditUnit)
	}
	switch o.Method {
	case MethodAuto:
		s.method = MethodOrderStats
		if s.budget || int64(s.requests)*int64(s.n) <= int64(s.sampleSize) {
			s.method = MethodExact
		}
	case MethodExact:
		s.method = MethodExact
	case MethodOrderStats:
		if s.budget {
			return nil, fmt.Errorf("%w: a budget couples requests, so it needs MethodExact", ErrInvalid)
		}
		s.method = MethodOrderStats
	default:
		return nil, fmt.Errorf("%w: unknown method %d", ErrInvalid, int(o.Method))
	}
	return s, nil
}

// orDefault returns v, or def when v is 0.
func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Run simulates opts.Requests user requests under policy p, each shard's
// latency drawn from lat, and summarises their latency and cost.
func Run(p Policy, lat Latency, opts Options) (Result, error) {
	s, err := newSim(p, lat, opts)
	if err != nil {
		return Result{}, err
	}
	var e *empirical
	if s.method == MethodOrderStats {
		e = buildEmpirical(lat, s.sampleSize, s.seed, s.workers)
	}
	return s.run(e), nil
}

// Table1Row is one row of Table1: latency percentiles until a given share
// of the leaves has finished.
type Table1Row struct {
	Name          string
	P50, P95, P99 time.Duration
}

// Table1 returns, for fan-out n, the latency percentiles (p50, p95, p99)
// until one random leaf finishes, until 95% of the leaves finish, and until
// 100% finish: the rows of Table 1 of The Tail at Scale. One random leaf
// is a request to a single leaf; 95% waits for ceil(0.95·n) leaves. The
// rows share opts.Seed (common random numbers, so their differences are
// not blurred by independent noise) and, when they use
// MethodOrderStats, one empirical distribution.
func Table1(n int, lat Latency, opts Options) ([]Table1Row, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: fan-out %d must be at least 1", ErrInvalid, n)
	}
	policies := []Policy{
		{Name: "one random leaf", Fanout: 1},
		{Name: "95% of leaves", Fanout: n, Need: (95*n + 99) / 100},
		{Name: "100% of leaves", Fanout: n},
	}
	var e *empirical
	rows := make([]Table1Row, 0, len(policies))
	for _, p := range policies {
		s, err := newSim(p, lat, opts)
		if err != nil {
			return nil, err
		}
		if s.method == MethodOrderStats && e == nil {
			e = buildEmpirical(lat, s.sampleSize, s.seed, s.workers)
		}
		r := s.run(e)
		rows = append(rows, Table1Row{Name: p.Name, P50: r.P50, P95: r.P95, P99: r.P99})
	}
	return rows, nil
}

// requestChunk is the number of requests a worker takes at a time: large
// enough that the shared counter is not contended, small enough to balance.
const requestChunk = 256

// tally is one worker's counts. Integer sums do not depend on which worker
// counted what, so Results do not depend on Workers.
type tally struct {
	hedges, partial int64
	_               [48]byte // keep workers' tallies on separate cache lines
}

// run simulates the requests with s.method; e is the empirical
// distribution when that is MethodOrderStats.
func (s *sim) run(e *empirical) Result {
	lats := make([]time.Duration, s.requests)
	tallies := make([]tally, s.workers)
	switch {
	case s.method == MethodOrderStats:
		s.runOrderStats(e, lats, tallies)
	case s.budget && s.hedging:
		s.runBudget(lats, tallies)
	default:
		s.runExact(lats, nil, tallies)
	}
	var hedges, partial int64
	for _, t := range tallies {
		hedges += t.hedges
		partial += t.partial
	}
	return s.summarise(lats, hedges, partial)
}

// parallel runs fn over [0, n) in chunks on up to workers goroutines; fn
// learns its worker index so it can keep per-worker state without locks.
func parallel(workers, n, chunk int, fn func(w, lo, hi int)) {
	workers = max(1, min(workers, (n+chunk-1)/chunk))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				lo := int(next.Add(int64(chunk))) - chunk
				if lo >= n {
					return
				}
				fn(w, lo, min(lo+chunk, n))
			}
		})
	}
	wg.Wait()
}

// forRequests runs fn for every request index on s.workers goroutines,
// with an rng reseeded for each request from (Seed, index): request i sees
// the same draws whichever worker runs it.
func (s *sim) forRequests(fn func(w, i int, rng *rand.Rand)) {
	srcs := make([]*rand.PCG, s.workers)
	rngs := make([]*rand.Rand, s.workers)
	parallel(s.workers, s.requests, requestChunk, func(w, lo, hi int) {
		if srcs[w] == nil {
			srcs[w] = rand.NewPCG(0, 0)
			rngs[w] = rand.New(srcs[w])
		}
		for i := lo; i < hi; i++ {
			srcs[w].Seed(streamSeed(s.seed, saltRequest, uint64(i)))
			fn(w, i, rngs[w])
		}
	})
}

// draw calls lat, counting a negative latency as 0.
func draw(lat Latency, rng *rand.Rand) time.Duration {
	return max(lat(rng), 0)
}

// requestFactor draws the request's shared latency factor: 1 without a
// RequestFactor, and never negative or NaN.
func (s *sim) requestFactor(rng *rand.Rand) float64 {
	if s.factor == nil {
		return 1
	}
	x := s.factor(rng)
	if !(x > 0) { // negative or NaN
		return 0
	}
	return x
}

// scale multiplies l by the request factor x, saturating.
func scale(l time.Duration, x float64) time.Duration {
	if x == 1 { // keep exact integers exact
		return l
	}
	f := float64(l) * x
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(f)
}

// satAdd adds two non-negative durations without overflowing.
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// finish turns the time the Need-th shard answered into the user-facing
// latency, applying the deadline.
func (s *sim) finish(tk time.Duration) (time.Duration, bool) {
	if s.deadline > 0 && tk > s.deadline {
		return s.deadline, true
	}
	return tk, false
}

// summarise sorts the latencies (in place) and computes the Result.
func (s *sim) summarise(lats []time.Duration, hedges, partial int64) Result {
	slices.Sort(lats)
	n := len(lats)
	pct := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(n))) - 1
		return lats[min(max(i, 0), n-1)]
	}
	sum := 0.0
	for _, l := range lats {
		sum += float64(l)
	}
	r := Result{
		Policy:           s.name,
		Method:           s.method,
		Requests:         n,
		Mean:             time.Duration(sum / float64(n)),
		P50:              pct(0.50),
		P90:              pct(0.90),
		P95:              pct(0.95),
		P99:              pct(0.99),
		P999:             pct(0.999),
		Max:              lats[n-1],
		ExtraAttemptsPct: 100 * float64(hedges) / (float64(n) * float64(s.n)),
		PartialShare:     float64(partial) / float64(n),
	}
	if s.slow > 0 {
		// lats is sorted: the slow requests are the ones after the last
		// latency <= threshold.
		fast := sort.Search(n, func(i int) bool { return lats[i] > s.slow })
		r.SlowShare = float64(n-fast) / float64(n)
	}
	return r
}
