package tied

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/internal/target"
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
	// canonicalised as a hedge.Transport's targets are (lower-case scheme and host,
	// no default port) and without a path. A Server sends cancel messages
	// only to these, at <peer><CancelPath>: a request whose Tailgate-Tie-Peer
	// names any other address is served untied (counted in UnknownPeer),
	// so that a client cannot make the server send requests to an address
	// of its choosing. Empty means every request is served untied.
	Peers []string

	// CancelPath is the path of the cancel endpoint, which Handler serves
	// before anything else (cancels never wait in the queue). It must be
	// the same on every peer. Default DefaultCancelPath.
	CancelPath string

	// CancelToken, when non-empty, is a secret shared by the peers: cancel
	// messages carry it in Tailgate-Tie-Token, and the endpoint refuses those
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
	// UnknownPeer counts requests whose Tailgate-Tie-Peer named a server outside
	// the allow-list.
	UnknownPeer uint64 `json:"unknownPeer"`
	// InvalidTie counts requests with malformed tie headers (a bad or
	// repeated Tailgate-Tie, a missing or oversized Tailgate-Tie-Peer), or whose tie
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
		return nil, fmt.Errorf("%w: negative workers %d", ErrInvalid, s.workers)
	case s.limit < 0:
		return nil, fmt.Errorf("%w: negative queue limit %d", ErrInvalid, s.limit)
	case s.timeout < 0:
		return nil, fmt.Errorf("%w: negative cancel timeout %v", ErrInvalid, s.timeout)
	case s.maxCancels < 0:
		return nil, fmt.Errorf("%w: negative max cancels in flight %d", ErrInvalid, s.maxCancels)
	case remember < 0:
		return nil, fmt.Errorf("%w: negative remembered ties %d", ErrInvalid, remember)
	case rememberFor < 0:
		return nil, fmt.Errorf("%w: negative remember-for %v", ErrInvalid, rememberFor)
	case !strings.HasPrefix(s.cancelPath, "/") || strings.ContainsAny(s.cancelPath, "?#%") ||
		strings.ContainsFunc(s.cancelPath, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return nil, fmt.Errorf("%w: cancel path %q must be an absolute path without query, escapes or spaces", ErrInvalid, s.cancelPath)
	case strings.ContainsFunc(s.token, func(r rune) bool { return r < ' ' || r >= 0x7f }):
		return nil, fmt.Errorf("%w: cancel token must be printable ASCII", ErrInvalid)
	}
	for _, p := range cfg.Peers {
		key, err := canonicalPeer(p)
		if err != nil {
			return nil, err
		}
		if _, dup := s.peers[key]; dup {
			return nil, fmt.Errorf("%w: duplicate peer %q", ErrInvalid, p)
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
	u, err := target.Parse(p)
	if err != nil {
		return "", fmt.Errorf("%w: peer: %w", ErrInvalid, err) // err names it
	}
	if u.Path != "" || u.RawPath != "" {
		return "", fmt.Errorf("%w: peer %q must not have a path", ErrInvalid, p)
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
