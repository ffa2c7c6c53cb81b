package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// FixtureConfig configures a Fixture.
type FixtureConfig struct {
	// Name labels the fixture in its answers and reports.
	Name string
	// Model draws each request's service time. Nil means Constant(0).
	Model Model
	// Seed makes the model's draws reproducible.
	Seed uint64
	// StopOnCancel makes the handler stop as soon as the client cancels.
	// By default it keeps working, as most servers do: a cancelled request
	// does not prove saved computation, and the lab counts what it costs.
	StopOnCancel bool
	// Addr is the address to listen on. Default "127.0.0.1:0"; it must be
	// a loopback address.
	Addr string
}

// Stats are a fixture's counters.
type Stats struct {
	// Started counts requests whose handler began work.
	Started int64 `json:"started"`
	// Completed counts requests whose work ran to the end, whether or not
	// the client still waited.
	Completed int64 `json:"completed"`
	// CompletedAfterCancel counts completed work whose client had already
	// gone: wasted work.
	CompletedAfterCancel int64 `json:"completedAfterCancel"`
	// CancellationsObserved counts requests whose cancellation the handler
	// saw while it worked.
	CancellationsObserved int64 `json:"cancellationsObserved"`
	// Hedges counts requests marked as hedges by the hedging engine.
	Hedges int64 `json:"hedges"`
	// MaxInFlight is the peak of concurrent requests.
	MaxInFlight int64 `json:"maxInFlight"`
}

// Fixture is a controlled replica listening on loopback.
type Fixture struct {
	cfg      FixtureConfig
	srv      *http.Server
	ln       net.Listener
	url      string
	mu       sync.Mutex // guards rng
	rng      *rand.Rand
	inFlight atomic.Int64 // handlers working, including after a cancel
	stats    struct {
		started, completed, wasted, cancelled, hedges, maxInFlight atomic.Int64
	}
}

// StartFixture starts a fixture. Close it when done.
func StartFixture(cfg FixtureConfig) (*Fixture, error) {
	if cfg.Model == nil {
		cfg.Model = Constant(0)
	}
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
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("lab: fixture %s: %w", cfg.Name, err)
	}
	f := &Fixture{
		cfg: cfg,
		ln:  ln,
		url: "http://" + ln.Addr().String(),
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x7461696c67617465)),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", f.serveStats)
	mux.HandleFunc("GET /", f.serveItem)
	f.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	go f.srv.Serve(ln)
	return f, nil
}

// URL is the fixture's base URL.
func (f *Fixture) URL() string { return f.url }

// Name is the fixture's name.
func (f *Fixture) Name() string { return f.cfg.Name }

// Stats returns the counters now.
func (f *Fixture) Stats() Stats {
	s := &f.stats
	return Stats{
		Started:               s.started.Load(),
		Completed:             s.completed.Load(),
		CompletedAfterCancel:  s.wasted.Load(),
		CancellationsObserved: s.cancelled.Load(),
		Hedges:                s.hedges.Load(),
		MaxInFlight:           s.maxInFlight.Load(),
	}
}

// Settle waits until no handler is working, or ctx ends: work that goes on
// after a cancellation must be counted before the counters are read.
func (f *Fixture) Settle(ctx context.Context) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for f.inFlight.Load() > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("lab: fixture %s: %d requests still working: %w", f.cfg.Name, f.inFlight.Load(), ctx.Err())
		}
	}
	return nil
}

// Close stops the fixture and waits (up to a minute) for its handlers.
func (f *Fixture) Close() error {
	err := f.srv.Close()
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
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	s := &f.stats
	s.started.Add(1)
	if r.Header.Get("Tailgate-Hedge") != "" {
		s.hedges.Add(1)
	}
	for {
		m := s.maxInFlight.Load()
		if n <= m || s.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	id, _ := strconv.ParseUint(r.URL.Query().Get("id"), 10, 64)
	f.mu.Lock()
	d := f.cfg.Model.Sample(f.rng, id)
	f.mu.Unlock()

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
	fmt.Fprintf(w, "{\"value\":%q}\n", f.cfg.Name+":"+strconv.FormatUint(id, 10))
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
