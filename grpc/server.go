package hedgegrpc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/target"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/tied"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// ServerConfig configures a Server. The zero value is useful: GOMAXPROCS
// workers, a queue of 128 with hedge priority, no peers (every call is
// served untied, but cancels from peers are still honoured). The fields
// mean what tied.ServerConfig's do; the defaults are its.
type ServerConfig struct {
	// Workers is how many unary calls run at once; the others wait in the
	// queue. Default runtime.GOMAXPROCS(0). Negative is an error.
	Workers int

	// QueueLimit is how many calls may wait for a worker. A call arriving
	// at a full queue is refused with Unavailable, except that with hedge
	// priority a first copy takes the place of the hedge that queued last.
	// Default tied.DefaultQueueLimit (128). Negative is an error.
	QueueLimit int

	// NoHedgePriority serves queued calls in arrival order. By default
	// calls marked with tailgate-hedge (hedges, second copies of tied calls)
	// wait until no unmarked call waits, so that duplicate work never
	// delays a first copy.
	NoHedgePriority bool

	// Peers is the allow-list of the servers that may hold the twins of
	// the tied copies this server receives, as host:port (what clients
	// name in tailgate-tie-peer: ReplicasConfig's Target.Name). Cancels go only to
	// these, as calls of CancelMethod; a copy naming another server is
	// served untied. Empty means every call is served untied.
	Peers []string

	// PeerDialOptions are the dial options of the connections to Peers
	// (transport credentials are required, as for any grpc.NewClient).
	PeerDialOptions []grpc.DialOption

	// CancelToken, when non-empty, is a secret the peers share: cancels
	// carry it (tailgate-tie-token), and CancelMethod refuses those that do not
	// (PermissionDenied). Without it, CancelMethod trusts whoever reaches
	// it: anyone who can call it and knows a tie can drop that tie's
	// queued copy (the twin, already running, still answers).
	CancelToken string

	// CancelTimeout bounds each cancel. Default tied.DefaultCancelTimeout
	// (250ms).
	CancelTimeout time.Duration

	// MaxCancelsInFlight bounds the cancels being sent at once; beyond it
	// a cancel is not sent (the twin then runs too). Default
	// tied.DefaultMaxCancelsInFlight (128).
	MaxCancelsInFlight int

	// RememberTies and RememberFor bound what the server remembers of ties
	// (a cancel that overtook its copy; a copy that ran). Defaults
	// tied.DefaultRememberTies (16384) and tied.DefaultRememberFor (10s).
	RememberTies int
	RememberFor  time.Duration
}

// CancelMethod is the full name of the method over which Servers cancel
// each other's queued copies: its request is the tie
// (wrapperspb.StringValue), its reply the outcome ("dropped",
// "started" or "remembered"). A server interceptor that allow-lists
// methods (authentication, say) names it to let peers' cancels through.
const CancelMethod = "/tailgate.tied.v1.Tie/Cancel"

// Server is the server side of hedged and tied unary calls: a bounded
// queue in front of a bounded pool of workers, in which calls marked as
// hedges wait behind first copies, and tied copies cancel their twins on
// other servers when they start. It is tied.Server, whose queue, ties and
// counters it uses, in gRPC's terms. Streams are not queued. Safe for
// concurrent use.
type Server struct {
	ts    *tied.Server
	h     http.Handler
	peers map[string]*grpc.ClientConn // by canonical host:port
}

// NewServer validates cfg and returns a Server. Install its interceptor
// (UnaryServerInterceptor) and, for tied calls, its cancel method
// (Register); call Close when done.
func NewServer(cfg ServerConfig) (*Server, error) {
	s := &Server{peers: make(map[string]*grpc.ClientConn, len(cfg.Peers))}
	urls := make([]string, 0, len(cfg.Peers))
	for i, p := range cfg.Peers {
		field := fmt.Sprintf("Peers[%d]", i)
		if err := hostPort(field, p); err != nil {
			s.closePeers()
			return nil, err
		}
		u, err := target.Parse("http://" + p)
		if err != nil {
			s.closePeers()
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, field, err)
		}
		if s.peers[u.Host] != nil {
			s.closePeers()
			return nil, fmt.Errorf("%w: %s: %q listed twice", ErrInvalid, field, p)
		}
		conn, err := grpc.NewClient(p, cfg.PeerDialOptions...)
		if err != nil {
			s.closePeers()
			return nil, fmt.Errorf("%w: %s: %q: %w", ErrInvalid, field, p, err)
		}
		s.peers[u.Host] = conn
		urls = append(urls, "http://"+p)
	}
	ts, err := tied.NewServer(tied.ServerConfig{
		Workers:            cfg.Workers,
		QueueLimit:         cfg.QueueLimit,
		NoHedgePriority:    cfg.NoHedgePriority,
		Peers:              urls,
		CancelToken:        cfg.CancelToken,
		CancelTimeout:      cfg.CancelTimeout,
		MaxCancelsInFlight: cfg.MaxCancelsInFlight,
		RememberTies:       cfg.RememberTies,
		RememberFor:        cfg.RememberFor,
		CancelTransport:    cancelSender{s},
	})
	if err != nil {
		s.closePeers()
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	s.ts = ts
	s.h = ts.Handler(http.HandlerFunc(runCall))
	return s, nil
}

// Close stops the Server's cancels (see tied.Server.Close) and closes its
// connections to Peers. Interceptors keep serving, untied in effect.
func (s *Server) Close() error {
	err := s.ts.Close()
	s.closePeers()
	return err
}

func (s *Server) closePeers() {
	for _, c := range s.peers {
		c.Close()
	}
}

// Stats reports the Server's counters (tied.Stats: queue, ties, cancels).
func (s *Server) Stats() tied.Stats { return s.ts.Stats() }

// UnaryServerInterceptor returns the interceptor that runs every unary
// call but CancelMethod through the Server's queue and workers:
//
//   - A call gets a worker at once if one is free and nobody waits;
//     otherwise it waits (hedge-marked calls behind the others). A full
//     queue answers Unavailable.
//   - A tied copy (tailgate-tie, and tailgate-tie-peer naming one of Peers) that gets a
//     worker sends a cancel for its tie to its twin's server; a copy
//     dropped for its twin is answered Unavailable with an ErrorInfo that
//     Dropped recognises, and never runs.
//   - A queued call whose context ends is not run: DeadlineExceeded or
//     Canceled.
//
// The handler sees the call's own context, tie metadata removed.
func (s *Server) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return s.intercept
}

func (s *Server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod == CancelMethod {
		return handler(ctx, req)
	}
	c := &serverCall{ctx: ctx, req: req, handler: handler}
	var h http.Header
	mark := incomingMark(ctx)
	tie := metadata.ValueFromIncomingContext(ctx, tieKey)
	peer := metadata.ValueFromIncomingContext(ctx, tiePeerKey)
	if mark != "" || len(tie) > 0 || len(peer) > 0 {
		h = make(http.Header, 3)
		if mark != "" {
			h[hedge.HedgeHeader] = []string{mark}
		}
		if len(tie)+len(peer) > 0 {
			h[tiedwire.TieHeader] = tie
			for i := range peer {
				peer[i] = "http://" + peer[i] // a copy: ours to change
			}
			h[tiedwire.PeerHeader] = peer
			c.ctx = withoutTie(ctx)
		}
	}
	r := (&http.Request{Method: http.MethodPost, URL: &url.URL{Path: info.FullMethod}, Header: h}).WithContext(ctx)
	s.h.ServeHTTP(c, r)
	if c.ran {
		return c.resp, c.err
	}
	return nil, c.refusal()
}

// withoutTie returns ctx with its incoming metadata less the tie keys,
// which concern this hop only.
func withoutTie(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx) // a copy
	delete(md, tieKey)
	delete(md, tiePeerKey)
	return metadata.NewIncomingContext(ctx, md)
}

// serverCall is one unary call in the Server's queue. It is the
// http.ResponseWriter tied.Server answers into when it does not run the
// call, and runCall finds the call through it when it does.
type serverCall struct {
	ctx     context.Context
	req     any
	handler grpc.UnaryHandler
	resp    any
	err     error
	ran     bool
	code    int
	hdr     http.Header
}

// runCall runs the queued call that w is, on the worker tied.Server gave it.
func runCall(w http.ResponseWriter, _ *http.Request) {
	c := w.(*serverCall)
	c.ran = true
	c.resp, c.err = c.handler(c.ctx, c.req)
}

func (c *serverCall) Header() http.Header {
	if c.hdr == nil {
		c.hdr = make(http.Header, 2)
	}
	return c.hdr
}

func (c *serverCall) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}

func (c *serverCall) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return len(b), nil
}

var (
	droppedQueued    = droppedStatus(tiedwire.DroppedQueued)
	droppedOnArrival = droppedStatus(tiedwire.DroppedOnArrival)
)

// refusal is the status of a call tied.Server answered without running it.
func (c *serverCall) refusal() error {
	switch {
	case c.hdr.Get(tiedwire.DroppedHeader) == tiedwire.DroppedOnArrival:
		return droppedOnArrival.Err()
	case c.hdr.Get(tiedwire.DroppedHeader) != "":
		return droppedQueued.Err()
	case c.code == http.StatusGatewayTimeout:
		return status.Error(codes.DeadlineExceeded, "hedgegrpc: deadline passed while queued")
	case c.hdr.Get("Retry-After") != "":
		return status.Error(codes.Unavailable, "hedgegrpc: overloaded: queue full")
	}
	return status.Error(codes.Canceled, "hedgegrpc: call cancelled while queued")
}

var errUnknownPeer = errors.New("hedgegrpc: cancel for a server not in Peers")
