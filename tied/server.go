package tied

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// Defaults of a ServerConfig.
const (
	DefaultQueueLimit         = 128
	DefaultCancelTimeout      = 250 * time.Millisecond
	DefaultMaxCancelsInFlight = 128
	DefaultRememberTies       = 16384
	DefaultRememberFor        = 10 * time.Second
)

// ServerConfig configures a Server. The zero value is useful: GOMAXPROCS
// workers, a queue of 128 with hedge priority, no peers (every request is
// served untied, but cancels from peers are still honoured).
type ServerConfig struct {
	// Workers is how many requests run at once; the others wait in the
	// queue. Default runtime.GOMAXPROCS(0), which suits handlers bound by
	// CPU; set it to the concurrency the handler sustains (the size of its
	// database pool, say) otherwise. Negative is an error.
	Workers int

	// QueueLimit is how many requests may wait for a worker. A request
	// arriving at a full queue is refused with 503 and Retry-After: 1,
	// except that, with hedge priority, an unmarked request takes the
	// place of the hedge that queued last, which is refused instead.
	// Default DefaultQueueLimit (128). Negative is an error.
	QueueLimit int

	// Peers is the allow-list of servers that may hold the twins of the
	// copies this server receives: base URLs ("http://10.0.0.2:8080"),
	// canonicalised as hedge.ParseTarget does (lower-case scheme and host,
	// no default port) and without a path. A Server sends cancel messages
	// only to these, at <peer><CancelPath>: a request whose PeerHeader
	// names any other address is served untied (counted in UnknownPeer),
	// so that a client cannot make the server send requests to an address
	// of its choosing. Empty means every request is served untied.
	Peers []string

	// CancelPath is the path of the cancel endpoint, which Handler serves
	// before anything else (cancels never wait in the queue). It must be
	// the same on every peer. Default DefaultCancelPath.
	CancelPath string

	// CancelToken, when non-empty, is a secret shared by the peers: cancel
	// messages carry it in TokenHeader, and the endpoint refuses those
	// that do not (403). Without it the endpoint trusts whoever reaches
	// it, so it must be reachable from the internal network only: anyone
	// who can call it and knows a tie identity can drop that tie's queued
	// copy (the twin, already running, still answers).
	CancelToken string

	// CancelTimeout bounds each cancel message, connection included; a
	// message that has not been answered by then is abandoned and counted
	// as failed. Default DefaultCancelTimeout (250ms).
	CancelTimeout time.Duration

	// MaxCancelsInFlight bounds the cancel messages being sent at once;
	// beyond it a cancel is not sent and is counted as failed (the twin
	// then runs too: extra work, never a wrong answer). Default
	// DefaultMaxCancelsInFlight (128).
	MaxCancelsInFlight int

	// CancelTransport sends cancel messages. Nil means a dedicated
	// http.Transport (no proxy, small idle pool) that Close shuts down.
	CancelTransport http.RoundTripper

	// RememberTies bounds how many ties the server remembers after their
	// copy left (to count a late cancel as "both executed") or before it
	// arrived (a cancel that overtook its copy, which is then dropped on
	// arrival). Beyond it the oldest are forgotten, which costs at worst a
	// copy run twice. Default DefaultRememberTies (16384).
	RememberTies int

	// RememberFor is how long a tie is remembered. It must exceed the time
	// between a cancel and the arrival of the copy it overtook: the
	// client's delay plus a network delay. Default DefaultRememberFor (10s).
	RememberFor time.Duration

	// NoHedgePriority serves queued requests in arrival order. By default
	// requests marked with hedge.HedgeHeader (duplicates sent by a hedging
	// client, the second copy of a tied request among them) wait in a
	// second FIFO that is served only when no unmarked request waits, so
	// that duplicate work never delays first copies; under sustained
	// overload marked requests may wait until their clients give up.
	NoHedgePriority bool
}

// Server is the server side of tied requests: a bounded queue in front of a
// bounded pool of workers, with cross-server cancellation. Each request
// waits in the queue for a worker; a tied copy, on starting, tells its
// twin's server to drop the twin if still queued. The handlers made by one
// Server share its queue, its workers and its ties. Safe for concurrent use.
type Server struct {
	workers    int
	limit      int
	priority   bool
	cancelPath string
	token      string
	timeout    time.Duration
	maxCancels int64
	cancelRT   http.RoundTripper
	ownRT      *http.Transport   // cancelRT, if the Server made it
	peers      map[string]string // canonical peer -> its cancel URL, up to the tie

	mu      sync.Mutex
	running int
	queued  int
	peak    int
	lanes   [2]lane // [0] first copies (everyone without priority), [1] hedges
	ties    map[string]*entry
	memory  *memory

	// Cancel messages in flight, and their shutdown.
	inflight  atomic.Int64
	cmu       sync.Mutex
	closed    bool
	wg        sync.WaitGroup
	baseCtx   context.Context
	cancelAll context.CancelFunc

	entries sync.Pool // *entry, idle

	c counters
}

type counters struct {
	dequeued, tied, untied, unknownPeer, invalidTie         atomic.Uint64
	droppedByTwin, droppedOnArrival, bothExecuted           atomic.Uint64
	cancelsSent, cancelsFailed, cancelsRecv, cancelsRefused atomic.Uint64
	queueFull, displaced, abandoned                         atomic.Uint64
}

// Stats is a point-in-time view of a Server's counters, JSON-ready. Each
// field is read atomically; the fields are not one atomic snapshot.
type Stats struct {
	// Dequeued counts requests given a worker and run, whether they had
	// to wait or not.
	Dequeued uint64 `json:"dequeued"`
	// Tied counts requests accepted as tied copies.
	Tied uint64 `json:"tied"`
	// Untied counts requests served without a tie: those that carried no
	// tie headers, and those whose tie was refused (UnknownPeer,
	// InvalidTie). Tied + Untied counts every request but cancels.
	Untied uint64 `json:"untied"`
	// UnknownPeer counts requests whose PeerHeader named a server outside
	// the allow-list.
	UnknownPeer uint64 `json:"unknownPeer"`
	// InvalidTie counts requests with malformed tie headers (a bad or
	// repeated TieHeader, a missing or oversized PeerHeader), or whose tie
	// was already queued or running here.
	InvalidTie uint64 `json:"invalidTie"`
	// DroppedByTwin counts queued copies removed because their twin
	// started on its server.
	DroppedByTwin uint64 `json:"droppedByTwin"`
	// DroppedOnArrival counts copies dropped as they arrived because their
	// twin's cancel had come first.
	DroppedOnArrival uint64 `json:"droppedOnArrival"`
	// BothExecuted counts cancels that found their copy already started
	// or finished here: both copies executed. A pair whose copies both
	// started is counted once by each server (each gets the other's
	// cancel), so summed over servers it counts such pairs twice.
	BothExecuted uint64 `json:"bothExecuted"`
	// CancelsSent counts cancel messages the twin's server acknowledged;
	// CancelsFailed those that failed, timed out, were refused, or were
	// not sent because MaxCancelsInFlight were in flight or the Server was
	// closed. CancelsReceived counts valid cancels received,
	// CancelsRefused invalid ones (wrong method, tie or token).
	CancelsSent     uint64 `json:"cancelsSent"`
	CancelsFailed   uint64 `json:"cancelsFailed"`
	CancelsReceived uint64 `json:"cancelsReceived"`
	CancelsRefused  uint64 `json:"cancelsRefused"`
	// QueueFull counts requests refused with 503 on arrival because the
	// queue was full; Displaced counts queued hedges refused with 503
	// later, to make room for an unmarked request (not in QueueFull).
	QueueFull uint64 `json:"queueFull"`
	Displaced uint64 `json:"displaced"`
	// Abandoned counts queued requests whose context ended (the client
	// left) before they could run; they are not run.
	Abandoned uint64 `json:"abandoned"`
	// Queued and Running are the requests waiting and running now;
	// MaxQueued is the longest the queue has been.
	Queued    int `json:"queued"`
	MaxQueued int `json:"maxQueued"`
	Running   int `json:"running"`
}

// NewServer validates cfg and returns a Server. Call Close or Shutdown when
// done with it, to stop its cancel messages.
func NewServer(cfg ServerConfig) (*Server, error) {
	s := &Server{
		workers:    cfg.Workers,
		limit:      cfg.QueueLimit,
		priority:   !cfg.NoHedgePriority,
		cancelPath: cfg.CancelPath,
		token:      cfg.CancelToken,
		timeout:    cfg.CancelTimeout,
		maxCancels: int64(cfg.MaxCancelsInFlight),
		cancelRT:   cfg.CancelTransport,
		peers:      make(map[string]string, len(cfg.Peers)),
		ties:       make(map[string]*entry),
	}
	if s.workers == 0 {
		s.workers = runtime.GOMAXPROCS(0)
	}
	if s.limit == 0 {
		s.limit = DefaultQueueLimit
	}
	if s.cancelPath == "" {
		s.cancelPath = DefaultCancelPath
	}
	if s.timeout == 0 {
		s.timeout = DefaultCancelTimeout
	}
	if s.maxCancels == 0 {
		s.maxCancels = DefaultMaxCancelsInFlight
	}
	remember, rememberFor := cfg.RememberTies, cfg.RememberFor
	if remember == 0 {
		remember = DefaultRememberTies
	}
	if rememberFor == 0 {
		rememberFor = DefaultRememberFor
	}
	switch {
	case s.workers < 0:
		return nil, fmt.Errorf("%w: negative workers %d", ErrInvalidConfig, s.workers)
	case s.limit < 0:
		return nil, fmt.Errorf("%w: negative queue limit %d", ErrInvalidConfig, s.limit)
	case s.timeout < 0:
		return nil, fmt.Errorf("%w: negative cancel timeout %v", ErrInvalidConfig, s.timeout)
	case s.maxCancels < 0:
		return nil, fmt.Errorf("%w: negative max cancels in flight %d", ErrInvalidConfig, s.maxCancels)
	case remember < 0:
		return nil, fmt.Errorf("%w: negative remembered ties %d", ErrInvalidConfig, remember)
	case rememberFor < 0:
		return nil, fmt.Errorf("%w: negative remember-for %v", ErrInvalidConfig, rememberFor)
	case !strings.HasPrefix(s.cancelPath, "/") || strings.ContainsAny(s.cancelPath, "?#%") ||
		strings.ContainsFunc(s.cancelPath, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return nil, fmt.Errorf("%w: cancel path %q must be an absolute path without query, escapes or spaces", ErrInvalidConfig, s.cancelPath)
	case strings.ContainsFunc(s.token, func(r rune) bool { return r < ' ' || r >= 0x7f }):
		return nil, fmt.Errorf("%w: cancel token must be printable ASCII", ErrInvalidConfig)
	}
	for _, p := range cfg.Peers {
		key, err := canonicalPeer(p)
		if err != nil {
			return nil, err
		}
		if _, dup := s.peers[key]; dup {
			return nil, fmt.Errorf("%w: duplicate peer %q", ErrInvalidConfig, p)
		}
		// A valid tie needs no escaping, nor does the checked path.
		s.peers[key] = key + s.cancelPath + "?tie="
	}
	s.memory = newMemory(remember, rememberFor)
	if s.cancelRT == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil // peers are internal: never route cancels through a proxy
		t.MaxIdleConnsPerHost = 16
		t.MaxIdleConns = 256
		s.cancelRT, s.ownRT = t, t
	}
	s.baseCtx, s.cancelAll = context.WithCancel(context.Background())
	return s, nil
}

// canonicalPeer parses a peer base URL and returns its canonical form.
func canonicalPeer(p string) (string, error) {
	u, err := hedge.ParseTarget(p)
	if err != nil {
		return "", fmt.Errorf("%w: peer %q: %w", ErrInvalidConfig, p, err)
	}
	if u.Path != "" || u.RawPath != "" {
		return "", fmt.Errorf("%w: peer %q must not have a path", ErrInvalidConfig, p)
	}
	return u.String(), nil
}

// Close stops the Server's cancel messages at once: those in flight are
// abandoned (and counted as failed) and later ones are not sent. It waits
// for the goroutines that sent them, which return promptly, and closes the
// idle connections of the default CancelTransport. Handlers keep serving,
// untied in effect. Close may be called more than once, also after
// Shutdown.
func (s *Server) Close() error {
	s.stop()
	s.cancelAll()
	s.wg.Wait()
	s.closeIdle()
	return nil
}

// Shutdown stops the Server's cancel messages gracefully: later ones are
// not sent, and it waits for those in flight to end (each within
// CancelTimeout) or for ctx to end, whichever comes first; then it acts as
// Close. It returns ctx's error if it had to abandon messages.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.cancelAll()
		<-done
	}
	s.cancelAll()
	s.closeIdle()
	return err
}

func (s *Server) stop() {
	s.cmu.Lock()
	s.closed = true
	s.cmu.Unlock()
}

func (s *Server) closeIdle() {
	if s.ownRT != nil {
		s.ownRT.CloseIdleConnections()
	}
}

// Stats reports the Server's counters now.
func (s *Server) Stats() Stats {
	c := &s.c
	st := Stats{
		Dequeued:         c.dequeued.Load(),
		Tied:             c.tied.Load(),
		Untied:           c.untied.Load(),
		UnknownPeer:      c.unknownPeer.Load(),
		InvalidTie:       c.invalidTie.Load(),
		DroppedByTwin:    c.droppedByTwin.Load(),
		DroppedOnArrival: c.droppedOnArrival.Load(),
		BothExecuted:     c.bothExecuted.Load(),
		CancelsSent:      c.cancelsSent.Load(),
		CancelsFailed:    c.cancelsFailed.Load(),
		CancelsReceived:  c.cancelsRecv.Load(),
		CancelsRefused:   c.cancelsRefused.Load(),
		QueueFull:        c.queueFull.Load(),
		Displaced:        c.displaced.Load(),
		Abandoned:        c.abandoned.Load(),
	}
	s.mu.Lock()
	st.Queued, st.MaxQueued, st.Running = s.queued, s.peak, s.running
	s.mu.Unlock()
	return st
}

// Handler returns middleware that serves the cancel endpoint at CancelPath
// and runs every other request through the Server's queue and workers
// before next:
//
//   - A request gets a worker at once if one is free and nobody waits;
//     otherwise it waits in the queue (hedge-marked requests behind the
//     others, unless NoHedgePriority). A full queue answers 503 with
//     Retry-After: 1.
//   - A tied copy (valid TieHeader, PeerHeader in Peers) that gets a
//     worker sends, asynchronously, a cancel for its tie to its peer; it
//     runs whatever becomes of that message.
//   - A tied copy dropped for its twin, queued or on arrival, is answered
//     503 with DroppedHeader and never reaches next.
//   - A queued request whose context ends (its client left, or a deadline
//     passed) leaves the queue and is not run: 504 after a deadline, 503
//     otherwise (the client is usually gone and sees nothing).
//
// next sees the request without TieHeader and PeerHeader, under the
// request's own context, which net/http cancels when the client goes.
func (s *Server) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("tied: Handler(nil)")
	}
	return &handler{s: s, next: next}
}

type handler struct {
	s    *Server
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	if r.URL.Path == s.cancelPath {
		s.serveCancel(w, r)
		return
	}
	e := s.getEntry()
	s.classify(r, e)
	if !s.admit(w, r, e) {
		s.putEntry(e)
		return
	}
	s.run(w, r, e, h.next)
}

// classify reads r's tie and hedge marks into e and counts what it finds.
func (s *Server) classify(r *http.Request, e *entry) {
	if hv := r.Header[hedge.HedgeHeader]; len(hv) > 0 && hv[0] != "" && hv[0] != "0" {
		e.hedge = true
	}
	tv, pv := r.Header[TieHeader], r.Header[PeerHeader]
	if len(tv) == 0 && len(pv) == 0 {
		s.c.untied.Add(1)
		return
	}
	e.marked = true
	if len(tv) != 1 || len(pv) != 1 || !ValidTie(tv[0]) || len(pv[0]) > maxPeerLen {
		s.c.invalidTie.Add(1)
		s.c.untied.Add(1)
		return
	}
	u, ok := s.peers[pv[0]]
	if !ok && len(s.peers) > 0 {
		// Not in canonical form, perhaps: canonicalise and look again.
		if p, err := canonicalPeer(pv[0]); err == nil {
			u, ok = s.peers[p]
		}
	}
	if !ok {
		s.c.unknownPeer.Add(1)
		s.c.untied.Add(1)
		return
	}
	e.tie, e.cancel = tv[0], u
}

// admit gives e a worker, waiting in the queue if need be, and reports
// whether it should run; if not, the answer has been written.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, e *entry) bool {
	s.mu.Lock()
	if e.tie != "" {
		if s.ties[e.tie] != nil {
			// Both copies here, or a replay: the tie cannot work.
			e.tie, e.cancel = "", ""
			s.c.invalidTie.Add(1)
			s.c.untied.Add(1)
		} else {
			s.c.tied.Add(1)
			if k, ok := s.memory.get(e.tie, time.Now()); ok && k == memoTombstone {
				s.memory.forget(e.tie)
				s.mu.Unlock()
				s.c.droppedOnArrival.Add(1)
				writeDropped(w, DroppedOnArrival)
				return false
			}
		}
	}
	if s.running < s.workers && s.queued == 0 {
		s.running++
		e.state = stateRunning
		if e.tie != "" {
			s.ties[e.tie] = e
		}
		s.mu.Unlock()
		return true
	}
	if !s.enqueue(e) {
		s.mu.Unlock()
		s.c.queueFull.Add(1)
		writeFull(w)
		return false
	}
	s.mu.Unlock()
	return s.wait(w, r, e)
}

// enqueue queues e, making room by displacing the last queued hedge if e
// is not one and priority is on. It reports false if the queue is full.
// Called with s.mu held.
func (s *Server) enqueue(e *entry) bool {
	l := 0
	if e.hedge && s.priority {
		l = 1
	}
	if s.queued >= s.limit {
		v := s.lanes[1].Back()
		if l == 1 || v == nil {
			return false
		}
		s.unqueue(v)
		v.state = stateDisplaced
		v.ready <- struct{}{}
		s.c.displaced.Add(1)
	}
	e.state, e.lane = stateQueued, l
	s.lanes[l].Push(e)
	s.queued++
	s.peak = max(s.peak, s.queued)
	if e.tie != "" {
		s.ties[e.tie] = e
	}
	return true
}

// unqueue takes a queued e out of its lane and out of the ties. Called with
// s.mu held.
func (s *Server) unqueue(e *entry) {
	s.lanes[e.lane].Remove(e)
	s.queued--
	if e.tie != "" {
		delete(s.ties, e.tie)
	}
}

// wait blocks until the queued e gets a worker, is dropped or displaced, or
// its context ends, and reports whether it should run; if not, the answer
// has been written.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, e *entry) bool {
	ctx := r.Context()
	select {
	case <-e.ready:
	case <-ctx.Done():
		s.mu.Lock()
		if e.state == stateQueued {
			s.unqueue(e)
			s.mu.Unlock()
			s.c.abandoned.Add(1)
			writeGone(w, ctx.Err())
			return false
		}
		s.mu.Unlock()
		<-e.ready // it was decided meanwhile, and told
	}
	// The state was written before the send on e.ready.
	switch e.state {
	case stateRunning:
		if err := ctx.Err(); err != nil {
			// Granted a worker as the client left: pass the worker on.
			s.release(e)
			s.c.abandoned.Add(1)
			writeGone(w, err)
			return false
		}
		return true
	case stateDropped:
		writeDropped(w, DroppedQueued)
	default: // stateDisplaced, counted when it happened
		writeFull(w)
	}
	return false
}

// run runs e's request on the worker it holds, then passes the worker on.
func (s *Server) run(w http.ResponseWriter, r *http.Request, e *entry, next http.Handler) {
	defer s.finish(e) // also if next panics, so the worker is never lost
	s.c.dequeued.Add(1)
	if e.cancel != "" {
		s.sendCancel(e.tie, e.cancel)
	}
	if e.marked {
		// Tie headers concern this hop only.
		r = r.WithContext(r.Context())
		r.Header = r.Header.Clone()
		delete(r.Header, TieHeader)
		delete(r.Header, PeerHeader)
	}
	next.ServeHTTP(w, r)
}

// finish passes e's worker on, remembers that its tie ran, and recycles e.
func (s *Server) finish(e *entry) {
	s.mu.Lock()
	if e.tie != "" {
		delete(s.ties, e.tie)
		s.memory.add(e.tie, memoFinished, time.Now())
	}
	s.handOff()
	s.mu.Unlock()
	s.putEntry(e)
}

// release passes the worker of e, which will not run, on.
func (s *Server) release(e *entry) {
	s.mu.Lock()
	if e.tie != "" {
		delete(s.ties, e.tie)
	}
	s.handOff()
	s.mu.Unlock()
}

// handOff gives a freed worker to the next queued request: the first of the
// first lane, else the first of the second. Called with s.mu held.
func (s *Server) handOff() {
	n := s.lanes[0].Pop()
	if n == nil {
		n = s.lanes[1].Pop()
	}
	if n == nil {
		s.running--
		return
	}
	s.queued--
	n.state = stateRunning
	n.ready <- struct{}{}
}

// serveCancel serves the cancel endpoint.
func (s *Server) serveCancel(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.c.cancelsRefused.Add(1)
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "tied: cancel takes POST")
		return
	}
	if s.token != "" && !tokenOK(r.Header[TokenHeader], s.token) {
		s.c.cancelsRefused.Add(1)
		writeError(w, http.StatusForbidden, "tied: cancel token missing or wrong")
		return
	}
	tie, ok := tieParam(r.URL.RawQuery)
	if !ok {
		s.c.cancelsRefused.Add(1)
		writeError(w, http.StatusBadRequest, "tied: cancel needs one query parameter tie=<id> with a valid tie")
		return
	}
	s.c.cancelsRecv.Add(1)
	outcome := s.cancel(tie, time.Now())
	w.Header().Set(CancelOutcomeHeader, outcome)
	w.WriteHeader(http.StatusNoContent)
}

// cancel applies a cancel for tie received at now and returns its outcome.
func (s *Server) cancel(tie string, now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.ties[tie]; e != nil {
		if e.state == stateQueued {
			s.unqueue(e)
			e.state = stateDropped
			e.ready <- struct{}{}
			s.c.droppedByTwin.Add(1)
			return CancelDropped
		}
		s.c.bothExecuted.Add(1)
		return CancelStarted
	}
	switch k, ok := s.memory.get(tie, now); {
	case ok && k == memoFinished:
		// Counted once: a repeated cancel leaves a tombstone instead.
		s.memory.forget(tie)
		s.c.bothExecuted.Add(1)
		return CancelStarted
	case ok: // already a tombstone
		return CancelRemembered
	}
	s.memory.add(tie, memoTombstone, now)
	return CancelRemembered
}

// tieParam extracts the tie from a query that must be exactly "tie=<id>".
// The id needs no unescaping: ValidTie allows unreserved characters only.
func tieParam(q string) (string, bool) {
	tie, ok := strings.CutPrefix(q, "tie=")
	return tie, ok && ValidTie(tie)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	w.Write(append(b, '\n'))
}

func writeDropped(w http.ResponseWriter, when string) {
	w.Header().Set(DroppedHeader, when)
	writeError(w, http.StatusServiceUnavailable, "tied: copy dropped ("+when+"): its twin started on another server")
}

func writeFull(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "tied: overloaded: queue full")
}

func writeGone(w http.ResponseWriter, err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		writeError(w, http.StatusGatewayTimeout, "tied: deadline passed while queued")
		return
	}
	writeError(w, http.StatusServiceUnavailable, "tied: request cancelled while queued")
}
