package tied

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/tied"
)

// backgroundPath is the path of background requests; reads use /item.
const backgroundPath = "/bg"

// tiedCluster is one run's servers: per server, a read fixture listening on
// loopback and a background fixture in memory, both behind the same
// tied.Server, behind a front that counts what becomes of every request.
type tiedCluster struct {
	reads   []*fixture.Fixture
	bgs     []*fixture.Fixture
	fronts  []*tiedFront
	servers []*tied.Server
	urls    []string
	execs   []atomic.Int32 // executions by read id
}

// startCluster starts cfg's servers; cancelRT, when not nil, sends
// their cancel messages (tests hold them back with it).
func startCluster(cfg Config, cancelRT http.RoundTripper) (*tiedCluster, error) {
	cl := &tiedCluster{execs: make([]atomic.Int32, cfg.Reads)}
	ok := false
	defer func() {
		if !ok {
			cl.close()
		}
	}()
	for i := range cfg.Servers {
		name := "server-" + strconv.Itoa(i)
		bgf, err := fixture.New(fixture.Config{Name: name + "-background", Model: cfg.BackgroundModel, Seed: cfg.Seed*1_000_003 + 1000 + uint64(i)})
		if err != nil {
			return nil, err
		}
		cl.bgs = append(cl.bgs, bgf)
		front := &tiedFront{cancelPath: tied.DefaultCancelPath}
		f, err := fixture.Start(fixture.Config{Name: name, Model: cfg.ReadModel, Seed: cfg.Seed*1_000_003 + uint64(i),
			Middleware: func(read http.Handler) http.Handler {
				front.route = tiedRoute{read: read, bg: bgf.Handler(), execs: cl.execs}
				return front
			}})
		if err != nil {
			return nil, err
		}
		cl.reads = append(cl.reads, f)
		cl.fronts = append(cl.fronts, front)
		cl.urls = append(cl.urls, f.URL())
	}
	// The servers' peers are known once every fixture listens: each
	// allows cancels to and from all the others.
	for i, front := range cl.fronts {
		var peers []string
		for j, u := range cl.urls {
			if j != i {
				peers = append(peers, u)
			}
		}
		s, err := tied.NewServer(tied.ServerConfig{Workers: cfg.Workers, QueueLimit: cfg.QueueLimit, Peers: peers,
			NoHedgePriority: !cfg.HedgePriority, CancelTransport: cancelRT})
		if err != nil {
			return nil, err
		}
		cl.servers = append(cl.servers, s)
		h := s.Handler(front.route)
		front.h.Store(&h)
	}
	ok = true
	return cl, nil
}

// settle waits until no request is queued or running on any server, and
// none has arrived for a while (a cancelled copy may still be on its way).
func (cl *tiedCluster) settle(ctx context.Context) error {
	const quiet = 50 * time.Millisecond
	deadline := time.Now().Add(fixture.SettleCap)
	last, lastChange := int64(-1), time.Now()
	for {
		var pending, arrived int64
		for _, f := range cl.fronts {
			pending += f.pending.Load()
			arrived += f.arrivals.Load()
		}
		now := time.Now()
		if arrived != last {
			last, lastChange = arrived, now
		}
		if pending == 0 && now.Sub(lastChange) >= quiet {
			return nil
		}
		if now.After(deadline) {
			return fmt.Errorf("%w: %d requests still queued or running after %v", fixture.ErrStillBusy, pending, fixture.SettleCap)
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// shutdown lets the servers' cancel messages in flight finish, so that
// their counters are final.
func (cl *tiedCluster) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range cl.servers {
		s.Shutdown(ctx)
	}
}

func (cl *tiedCluster) close() error {
	for _, s := range cl.servers {
		s.Close()
	}
	var err error
	for _, f := range cl.reads {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	for _, f := range cl.bgs {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// account fills in w and bg's server-side counts, and checks that every
// request was counted once, by each of the counters that saw it.
func (cl *tiedCluster) account(w *serverWork, bg *bgWork) {
	var reads, bgs copyFates
	var ts tied.Stats
	for i, f := range cl.fronts {
		reads.add(f.read.load())
		bgs.add(f.bg.load())
		s := cl.servers[i].Stats()
		ts.Tied += s.Tied
		ts.Untied += s.Untied
		ts.Dequeued += s.Dequeued
		ts.DroppedByTwin += s.DroppedByTwin
		ts.DroppedOnArrival += s.DroppedOnArrival
		ts.QueueFull += s.QueueFull
		ts.Displaced += s.Displaced
		ts.Abandoned += s.Abandoned
		ts.BothExecuted += s.BothExecuted
		ts.CancelsSent += s.CancelsSent
		ts.CancelsFailed += s.CancelsFailed
	}
	w.Copies, bg.Copies = reads, bgs
	w.BothExecuted, w.CancelsSent, w.CancelsFailed = ts.BothExecuted, ts.CancelsSent, ts.CancelsFailed
	fr, fb := fixture.Sum(cl.reads), fixture.Sum(cl.bgs)
	w.CompletedAfterCancel = fr.CompletedAfterCancel
	var byID int64
	for i := range cl.execs {
		n := int64(cl.execs[i].Load())
		byID += n
		switch {
		case n == 0:
			w.ReadsNotRun++ // less the reads never sent: see runOne
		case n > 1:
			w.ReadsRunTwice++
			w.ExtraExecutions += n - 1
		}
	}
	var all copyFates
	all.add(reads)
	all.add(bgs)
	check := func(what string, got, want int64) {
		if got != want {
			w.Mismatches = append(w.Mismatches, fmt.Sprintf("%s: %d, want %d", what, got, want))
		}
	}
	check("read copies arrived vs their fates", reads.Arrived, reads.sum())
	check("background requests arrived vs their fates", bgs.Arrived, bgs.sum())
	check("unexpected fates", all.Other, 0)
	check("requests arrived vs tied.Server tied+untied", all.Arrived, int64(ts.Tied+ts.Untied))
	check("executed vs tied.Server dequeued", all.Executed, int64(ts.Dequeued))
	check("dropped by twin vs tied.Server", all.DroppedByTwin, int64(ts.DroppedByTwin))
	check("dropped on arrival vs tied.Server", all.DroppedOnArrival, int64(ts.DroppedOnArrival))
	check("refused vs tied.Server queue full + displaced", all.Refused, int64(ts.QueueFull+ts.Displaced))
	check("abandoned vs tied.Server", all.Abandoned, int64(ts.Abandoned))
	check("read copies executed vs read fixtures started", reads.Executed, fr.Started)
	check("read copies executed vs executions by id", reads.Executed, byID)
	check("background executed vs background fixtures started", bgs.Executed, fb.Started)
	check("background dropped (untied)", bgs.DroppedByTwin+bgs.DroppedOnArrival, 0)
	w.Reconciled = len(w.Mismatches) == 0
}

// tiedFront sits in front of a server's tied.Server: it counts every
// request that reaches the server, and what became of it, exactly once.
type tiedFront struct {
	h          atomic.Pointer[http.Handler] // the tied.Server's handler, once made
	route      tiedRoute
	cancelPath string
	pending    atomic.Int64 // requests in the server, cancels included
	arrivals   atomic.Int64 // every request that arrived, cancels included
	read, bg   fateCounters
}

type fateCounters struct {
	arrived, executed, droppedByTwin, droppedOnArrival, refused, abandoned, other atomic.Int64
}

func (c *fateCounters) load() copyFates {
	return copyFates{Arrived: c.arrived.Load(), Executed: c.executed.Load(), DroppedByTwin: c.droppedByTwin.Load(),
		DroppedOnArrival: c.droppedOnArrival.Load(), Refused: c.refused.Load(), Abandoned: c.abandoned.Load(), Other: c.other.Load()}
}

// copyState travels in a request's context from the front to the route,
// which marks that the request ran.
type copyState struct{ ran bool }

type copyKey struct{}

func (f *tiedFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := f.h.Load()
	if h == nil {
		http.Error(w, "lab: tied server not ready", http.StatusServiceUnavailable)
		return
	}
	f.pending.Add(1)
	defer f.pending.Add(-1)
	f.arrivals.Add(1)
	if r.URL.Path == f.cancelPath {
		(*h).ServeHTTP(w, r)
		return
	}
	c := &f.read
	if r.URL.Path == backgroundPath {
		c = &f.bg
	}
	c.arrived.Add(1)
	st := &copyState{}
	rec := &statusRecorder{ResponseWriter: w}
	(*h).ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), copyKey{}, st)))
	// The tied.Server runs the route in this goroutine, so st is settled.
	switch hd := w.Header(); {
	case st.ran:
		c.executed.Add(1)
	case hd.Get(tiedwire.DroppedHeader) == tiedwire.DroppedQueued:
		c.droppedByTwin.Add(1)
	case hd.Get(tiedwire.DroppedHeader) == tiedwire.DroppedOnArrival:
		c.droppedOnArrival.Add(1)
	case rec.code == http.StatusServiceUnavailable && hd.Get("Retry-After") != "":
		c.refused.Add(1)
	case rec.code == http.StatusServiceUnavailable || rec.code == http.StatusGatewayTimeout:
		c.abandoned.Add(1)
	default:
		c.other.Add(1)
	}
}

// statusRecorder notes the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// tiedRoute is what runs on a worker: a read on the read fixture, a
// background request on the background fixture.
type tiedRoute struct {
	read, bg http.Handler
	execs    []atomic.Int32
}

func (rt tiedRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if st, ok := r.Context().Value(copyKey{}).(*copyState); ok {
		st.ran = true
	}
	if r.URL.Path == backgroundPath {
		rt.bg.ServeHTTP(w, r)
		return
	}
	if id, err := strconv.ParseUint(r.URL.Query().Get("id"), 10, 64); err == nil && id < uint64(len(rt.execs)) {
		rt.execs[id].Add(1)
	}
	rt.read.ServeHTTP(w, r)
}
