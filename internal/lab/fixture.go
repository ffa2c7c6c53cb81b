package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// FixtureConfig configures a Fixture.
type FixtureConfig struct {
	// Name labels the fixture in its answers and reports.
	Name string
	// Model draws each request's service time. Nil means Constant(0).
	Model Model
	// Seed makes the model's draws reproducible. Each request draws from
	// its own random source, seeded by a hash of Seed, the request's id
	// (the "id" query parameter) and its attempt (0 for a primary; for a
	// hedge, the value of the Tailgate-Hedge header, or 1 if that is not a
	// positive integer). So the same seed and request get the same service
	// time whatever requests arrived before or alongside it: runs are
	// reproducible under concurrency, and experiments that send the same
	// ids to the same fixtures (plain and hedged reads, the points of a
	// sweep) compare the same draws. A hedge draws independently of its
	// primary; give replicas different seeds, or the primaries of an id
	// draw alike on each.
	// A request without a numeric id is keyed instead by its rank among
	// the arrivals without one (0, 1, ..., never confused with an id), so
	// such draws are reproducible only if they arrive in the same order.
	Seed uint64
	// StopOnCancel makes the handler stop as soon as the client cancels.
	// By default it keeps working, as most servers do: a cancelled request
	// does not prove saved computation, and the lab counts what it costs.
	StopOnCancel bool
	// Addr is the address to listen on. Default "127.0.0.1:0"; it must be
	// a loopback address.
	Addr string
	// Capacity is how many requests are served at once; the rest wait in a FIFO queue (0 = unlimited, no queue).
	// The time a request waits counts in its latency, and its service time
	// is drawn when its service starts (the model still sees its arrival
	// time). A request whose client cancels while it waits stays in the
	// queue and is served in its turn (wasted work), unless StopOnCancel:
	// then it leaves the queue, counted as a cancellation observed, never
	// as Started.
	Capacity int
	// QueueLimit bounds the waiting requests; beyond it the fixture answers 503 at once (0 = 10000).
	// It applies only with a Capacity.
	QueueLimit int
	// DeprioritizeHedges serves queued hedge attempts (Tailgate-Hedge header) only when no primary waits.
	// Each class is served in FIFO order; the queue limit counts both.
	DeprioritizeHedges bool
	// Middleware, when non-nil, wraps the fixture's handler (its reads and
	// /stats) once, as the fixture starts: the listener serves what it
	// returns, which must not be nil. It puts server-side layers in front
	// of the fixture, such as a tied.Server's queue; leave Capacity at 0
	// then, so that the fixture adds no queue of its own. The counters,
	// Settle and Close see only the requests the middleware passes on.
	Middleware func(http.Handler) http.Handler
}

// defaultQueueLimit is FixtureConfig.QueueLimit's default.
const defaultQueueLimit = 10000

// Stats are a fixture's counters. In JSON, QueueWait is the number
// queueWaitMs, in milliseconds.
type Stats struct {
	// Started counts requests whose handler began work (after any wait in
	// the queue).
	Started int64 `json:"started"`
	// Completed counts requests whose work ran to the end, whether or not
	// the client still waited.
	Completed int64 `json:"completed"`
	// CompletedAfterCancel counts completed work whose client had already
	// gone: wasted work.
	CompletedAfterCancel int64 `json:"completedAfterCancel"`
	// CancellationsObserved counts requests whose cancellation the handler
	// saw while it worked or while the request waited in the queue (such a
	// request leaves the queue and is never Started).
	CancellationsObserved int64 `json:"cancellationsObserved"`
	// Hedges counts requests marked as hedges by the hedging engine
	// (the Tailgate-Hedge header) that the fixture received.
	Hedges int64 `json:"hedges"`
	// MaxInFlight is the peak of requests in service at once (at most
	// Capacity, if set); requests waiting in the queue are not in it.
	MaxInFlight int64 `json:"maxInFlight"`
	// HedgesServed counts hedges that began work: Hedges less those
	// rejected or cancelled in the queue.
	HedgesServed int64 `json:"hedgesServed"`
	// Queued counts requests that had to wait for a slot, including those
	// whose client cancelled while they waited.
	Queued int64 `json:"queued"`
	// MaxQueue is the peak of requests waiting at once.
	MaxQueue int64 `json:"maxQueue"`
	// Rejected counts requests answered 503 because the queue was full.
	Rejected int64 `json:"rejected"`
	// QueueWait is the total time the Queued requests waited, counted as
	// each wait ends.
	QueueWait time.Duration `json:"-"`
}

// statsJSON is Stats without its methods.
type statsJSON Stats

// MarshalJSON encodes s with QueueWait as queueWaitMs, a number of
// milliseconds.
func (s Stats) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		statsJSON
		QueueWaitMs float64 `json:"queueWaitMs"`
	}{statsJSON(s), float64(s.QueueWait) / float64(time.Millisecond)})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (s *Stats) UnmarshalJSON(b []byte) error {
	v := struct {
		*statsJSON
		QueueWaitMs float64 `json:"queueWaitMs"`
	}{statsJSON: (*statsJSON)(s)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	s.QueueWait = time.Duration(math.Round(v.QueueWaitMs * float64(time.Millisecond)))
	return nil
}

// Fixture is a controlled replica listening on loopback. It draws each
// request's service time from its Model with a random source of its own,
// seeded by the fixture's seed, the request's id and its attempt, so that a
// request's draw does not depend on the order of arrivals (see
// FixtureConfig.Seed). It is safe for concurrent use.
type Fixture struct {
	cfg      FixtureConfig
	srv      *http.Server
	ln       net.Listener
	url      string
	handler  http.Handler
	start    time.Time     // with its monotonic reading: Request.At counts from it
	queue    *fixtureQueue // nil without a Capacity
	mu       sync.Mutex    // guards pcg and rng
	pcg      rand.PCG      // reseeded for each request's draw
	rng      *rand.Rand    // draws from pcg
	anon     atomic.Uint64 // arrivals without an id, numbering their draws
	pending  atomic.Int64  // handlers waiting or working, including after a cancel
	inFlight atomic.Int64  // handlers working, including after a cancel
	stats    struct {
		started, completed, wasted, cancelled, hedges, maxInFlight atomic.Int64
		hedgesServed, rejected, queueWaitNs                        atomic.Int64
	}
}

// StartFixture starts a fixture. Close it when done. It refuses a model of
// this package that ParseModel would refuse, with an error wrapping
// ErrModel.
func StartFixture(cfg FixtureConfig) (*Fixture, error) {
	f, err := newFixture(cfg)
	if err != nil {
		return nil, err
	}
	cfg = f.cfg
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("lab: fixture address %q: %w", cfg.Addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("lab: fixture address %q: must be a loopback IP address", cfg.Addr)
	}
	h := f.handler
	if cfg.Middleware != nil {
		if h = cfg.Middleware(h); h == nil {
			return nil, fmt.Errorf("lab: fixture %s: middleware returned a nil handler", cfg.Name)
		}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("lab: fixture %s: %w", cfg.Name, err)
	}
	f.ln = ln
	f.url = "http://" + ln.Addr().String()
	f.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	f.start = time.Now()
	go f.srv.Serve(ln)
	return f, nil
}

// newFixture builds a fixture's handler and state without listening, so
// that tests can drive it in memory.
func newFixture(cfg FixtureConfig) (*Fixture, error) {
	if cfg.Model == nil {
		cfg.Model = Constant(0)
	}
	if err := validateModel(cfg.Model); err != nil {
		return nil, fmt.Errorf("lab: fixture %s: %w", cfg.Name, err)
	}
	if cfg.Capacity < 0 || cfg.QueueLimit < 0 {
		return nil, fmt.Errorf("lab: fixture %s: capacity %d and queue limit %d must not be negative", cfg.Name, cfg.Capacity, cfg.QueueLimit)
	}
	if cfg.QueueLimit == 0 {
		cfg.QueueLimit = defaultQueueLimit
	}
	f := &Fixture{
		cfg:   cfg,
		start: time.Now(),
	}
	f.rng = rand.New(&f.pcg)
	if cfg.Capacity > 0 {
		f.queue = newFixtureQueue(cfg.Capacity, cfg.QueueLimit, cfg.DeprioritizeHedges)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", f.serveStats)
	mux.HandleFunc("GET /", f.serveItem)
	f.handler = mux
	return f, nil
}

// URL is the fixture's base URL.
func (f *Fixture) URL() string { return f.url }

// Name is the fixture's name.
func (f *Fixture) Name() string { return f.cfg.Name }

// Stats returns the counters now.
func (f *Fixture) Stats() Stats {
	s := &f.stats
	st := Stats{
		Started:               s.started.Load(),
		Completed:             s.completed.Load(),
		CompletedAfterCancel:  s.wasted.Load(),
		CancellationsObserved: s.cancelled.Load(),
		Hedges:                s.hedges.Load(),
		MaxInFlight:           s.maxInFlight.Load(),
		HedgesServed:          s.hedgesServed.Load(),
		Rejected:              s.rejected.Load(),
		QueueWait:             time.Duration(s.queueWaitNs.Load()),
	}
	if f.queue != nil {
		q := f.queue.state()
		st.Queued, st.MaxQueue = q.total, int64(q.peak)
	}
	return st
}

// Settle waits until no handler is working or queued, or ctx ends: work
// that goes on after a cancellation must be counted before the counters are
// read.
func (f *Fixture) Settle(ctx context.Context) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for f.pending.Load() > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("lab: fixture %s: %d requests still waiting or working: %w", f.cfg.Name, f.pending.Load(), ctx.Err())
		}
	}
	return nil
}

// Close stops the fixture and waits (up to a minute) for its handlers.
func (f *Fixture) Close() error {
	var err error
	if f.srv != nil {
		err = f.srv.Close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if serr := f.Settle(ctx); err == nil {
		err = serr
	}
	return err
}

func (f *Fixture) serveStats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(f.Stats())
}

func (f *Fixture) serveItem(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	f.pending.Add(1)
	defer f.pending.Add(-1)
	s := &f.stats
	req, key := f.arrival(r, arrived)
	if req.Hedge {
		s.hedges.Add(1)
	}
	if f.queue != nil {
		// A server that keeps working after a cancel does not notice it in
		// its queue either: the request waits its turn and is served, so
		// a duplicate's cost shows at the server. With StopOnCancel, it
		// leaves the queue instead.
		qctx := r.Context()
		if !f.cfg.StopOnCancel {
			qctx = context.WithoutCancel(qctx)
		}
		queued, err := f.queue.acquire(qctx, req.Hedge)
		if queued {
			s.queueWaitNs.Add(int64(time.Since(arrived)))
		}
		switch {
		case errors.Is(err, errQueueFull):
			s.rejected.Add(1)
			http.Error(w, fmt.Sprintf("lab: fixture %s: queue full (%d waiting)", f.cfg.Name, f.cfg.QueueLimit), http.StatusServiceUnavailable)
			return
		case err != nil:
			// The client left while the request waited: it never started.
			s.cancelled.Add(1)
			return
		}
		defer f.queue.release()
	}

	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	s.started.Add(1)
	if req.Hedge {
		s.hedgesServed.Add(1)
	}
	for {
		m := s.maxInFlight.Load()
		if n <= m || s.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	d := f.sample(req, key)

	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
		s.cancelled.Add(1)
		if f.cfg.StopOnCancel {
			return
		}
		<-timer.C // the work goes on: a real server rarely stops mid-query
	}
	s.completed.Add(1)
	if r.Context().Err() != nil {
		s.wasted.Add(1)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"value\":%q}\n", f.cfg.Name+":"+strconv.FormatUint(req.ID, 10))
}

// drawKey names a request's draw: see FixtureConfig.Seed.
type drawKey struct {
	n       uint64 // the request's id, or its number among arrivals without one
	anon    bool   // the request has no id: n numbers its arrival
	attempt uint64 // 0 for a primary, the hedge's index for a hedge
}

// arrival reads what the model and the draw know of request r, arrived at
// arrived. A request without an id takes the next arrival number.
func (f *Fixture) arrival(r *http.Request, arrived time.Time) (Request, drawKey) {
	var key drawKey
	mark := r.Header.Get(hedge.HedgeHeader)
	req := Request{Hedge: mark != "", At: arrived.Sub(f.start)}
	if req.Hedge {
		key.attempt, _ = strconv.ParseUint(mark, 10, 64)
		key.attempt = max(key.attempt, 1)
	}
	id, err := strconv.ParseUint(r.URL.Query().Get("id"), 10, 64)
	if err != nil {
		key.anon, key.n = true, f.anon.Add(1)-1
	} else {
		req.ID, key.n = id, id
	}
	return req, key
}

// sample draws request req's service time from a source seeded by the
// fixture's seed and key, without allocating.
func (f *Fixture) sample(req Request, key drawKey) time.Duration {
	s1, s2 := drawSeeds(f.cfg.Seed, key)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pcg.Seed(s1, s2)
	return f.cfg.Model.Sample(f.rng, req)
}

// drawSeeds hashes a fixture's seed and a request's key into the two seeds
// of its PCG source, with SplitMix64's finalizer, so that nearby seeds, ids
// and attempts give unrelated streams.
func drawSeeds(seed uint64, key drawKey) (uint64, uint64) {
	tag := key.attempt << 1
	if key.anon {
		tag |= 1
	}
	h := splitMix64(seed ^ 0x7461696c67617465) // "tailgate"
	h = splitMix64(h ^ key.n)
	h = splitMix64(h ^ tag)
	return h, splitMix64(h ^ 0x6669787475726573) // "fixtures"
}

// splitMix64 is one step of the SplitMix64 generator: it adds the golden
// gamma to x and mixes the sum's bits.
func splitMix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// startPair starts two fixtures, replica-a and replica-b, with the same
// model and consecutive seeds.
func startPair(m Model, seed uint64) ([]*Fixture, error) {
	var fs []*Fixture
	for i, name := range []string{"replica-a", "replica-b"} {
		f, err := StartFixture(FixtureConfig{Name: name, Model: m, Seed: seed + uint64(i)})
		if err != nil {
			closeAll(fs)
			return nil, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}

func closeAll(fs []*Fixture) {
	for _, f := range fs {
		f.Close()
	}
}
