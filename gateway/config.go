package gateway

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/h1"
	"github.com/tailgate-dev/tailgate/internal/target"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
	"go.opentelemetry.io/otel/trace"
)

// ErrInvalid wraps every configuration error of New.
var ErrInvalid = errors.New("gateway: invalid configuration")

// Defaults of a Config.
const (
	DefaultMaxInFlightRequests = 128
	DefaultTimeout             = 10 * time.Second
	DefaultMaxResponseBytes    = 1 << 20
	DefaultMaxInFlightShadows  = 8
	DefaultMaxRequestBodyBytes = 64 << 10

	// DefaultMaxResponseHeaderBytes bounds a backend's response header
	// block, as serve's -max-header-bytes bounds a client's request.
	DefaultMaxResponseHeaderBytes = 64 << 10
	// MinResponseHeaderBytes and MaxResponseHeaderBytesLimit bound
	// Config.MaxResponseHeaderBytes: below 1 KiB ordinary responses fail;
	// above 1 MiB a few backends' headers buffered at once cost as much
	// memory as net/http's own 10 MiB default, which the bound exists to
	// avoid.
	MinResponseHeaderBytes      = 1 << 10
	MaxResponseHeaderBytesLimit = 1 << 20
)

// ShadowHeader marks a shadow request: a duplicate of a read already
// answered, sent to a replica on probation only to measure its latency,
// its answer discarded. Its value is "1". Replicas may count shadows apart
// or serve them last. The library's Transport marks its shadows the same.
const ShadowHeader = hedge.ShadowHeader

// Backend protocols.
const (
	ProtocolHTTP1 = "http1" // HTTP/1.1 with a keep-alive pool
	ProtocolH2C   = "h2c"   // HTTP/2 without TLS: cancelling a loser resets one stream, not a connection
)

// Config configures a Gateway. Only Backends is required.
type Config struct {
	// Backends are the base URLs of the equivalent replicas: http:// or
	// https:// (see BackendTLS), a host and a port within 1 to 65535, no
	// path or query; at least one, no duplicates (however spelled: one
	// server under two names is only found by name lookups, which serve
	// makes at start to warn of it). A hedge always goes to
	// a different replica than the attempts before it while one is left.
	Backends []string

	// Policy is the hedging policy. The zero Policy hedges after an
	// adaptive delay (the p90 of recent latencies: the quantile follows
	// the budget), at most one hedge per read, within a budget of 10%
	// extra attempts (burst 10), with the overload gate on. Each class of
	// read (its method and path template, or its Route's Class) learns
	// its own latencies, delay and gate; a pool's reads share its
	// budget, whose rates are Policy.Budget's (the Budget itself is not
	// used: each pool has its own). Unless Policy.Gate.Load is set, the
	// gate also weighs the gateway's limits and the pool's breakers. With
	// Tied, see there.
	Policy hedge.Policy

	// Routes give classes of reads settings of their own: a pool of
	// backends, a delay, attempts, a timeout, a budget, tied or affinity
	// mode, a name for metrics (see Route). The first route that matches
	// a read takes it; the reads none matches take the settings above,
	// as the route "default".
	Routes []Route

	// Tied sends every read as a tied request (package tied) instead of
	// hedging it: a second copy TiedDelay after the first, to the replica
	// a hedge would get, both carrying one tie (Tailgate-Tie) and the other
	// copy's backend (Tailgate-Tie-Peer); the first acceptable answer
	// wins, and an answer dropped for its twin (tied.Dropped) never does.
	// The backends must run tied.Server with the other backends (as
	// written here) in its Peers, or every second copy runs in full; at
	// least two backends. The second copy is a hedge to the engine: the
	// budget (nil: one credit per read, burst MaxInFlightRequests, at
	// least 10), deadlines and MaxInFlightAttempts bound it; the overload
	// gate is off. Policy.Delay must be zero, Policy.MaxAttempts zero or
	// 2. The rules in full: docs/gateway.md. Default false.
	Tied bool

	// TiedDelay is how long the first copy of a tied request waits alone
	// before the second is sent. Default tied.DefaultDelay (1ms, about
	// twice a network delay inside a data centre, as in The Tail at
	// Scale); negative sends both at once (the second a nanosecond after
	// the first). Used only with Tied.
	TiedDelay time.Duration

	// MaxInFlightRequests bounds client requests being served; beyond it a
	// request is refused at once with 503 and Retry-After. Default 128.
	MaxInFlightRequests int

	// MaxInFlightAttempts bounds backend attempts (primaries and hedges)
	// in flight. A request whose primary finds no free slot gets 503; a
	// hedge that finds none is not sent (counted as suppressed for
	// capacity). Default MaxInFlightRequests + MaxInFlightRequests/4;
	// with Tied, 2 × MaxInFlightRequests.
	MaxInFlightAttempts int

	// Timeout bounds each request, hedges included; past it the client
	// gets 504. Default 10s. A client's Tailgate-Timeout header (package
	// deadline) shortens it, never lengthens it.
	Timeout time.Duration

	// MaxResponseBytes bounds each backend response body; a larger one is
	// not forwarded, the client gets 502. Responses are buffered whole so
	// that a response cut short can never win. Default 1 MiB.
	MaxResponseBytes int64

	// MaxResponseHeaderBytes bounds each backend response's header block
	// (with any 1xx before it; over h2c, the header list as HTTP/2 counts
	// it). A larger one fails its attempt as a replica failure (reading
	// stops and the connection is closed); if no attempt succeeds the
	// client gets 502. Default DefaultMaxResponseHeaderBytes (64 KiB);
	// within [MinResponseHeaderBytes, MaxResponseHeaderBytesLimit]. Not
	// applied to a Base of the caller's.
	MaxResponseHeaderBytes int64

	// MaxRequestBodyBytes bounds the body of a read whose Route declares
	// its method (a search POST, a gRPC call's request): the body is read
	// whole before the first attempt, so that every attempt sends the same
	// bytes. A larger body is refused with 413 (a gRPC call with
	// RESOURCE_EXHAUSTED), nothing forwarded. Default
	// DefaultMaxRequestBodyBytes (64 KiB).
	MaxRequestBodyBytes int64

	// BackendProtocol is the protocol to http:// backends: ProtocolHTTP1
	// (default) or ProtocolH2C. https:// backends negotiate HTTP/2 or
	// HTTP/1.1 by ALPN either way (see BackendTLS). gRPC routes (see
	// Route.GRPC) reach http:// backends over h2c whatever it says: gRPC
	// runs over HTTP/2 only.
	BackendProtocol string

	// BackendTLS configures TLS to https:// backends: RootCAs verify
	// their certificates (nil: the system's roots); Certificates or
	// GetClientCertificate give the client certificate of mutual TLS;
	// ServerName is the name verified, and sent as SNI, for every backend
	// (empty: each backend's host; an IP address is verified against the
	// certificate's IP addresses). NextProtos nil offers HTTP/2, then
	// HTTP/1.1, by ALPN: over HTTP/2 a cancelled loser resets one stream
	// and the connection goes on serving; ["http/1.1"] keeps to
	// HTTP/1.1. Nil means a zero tls.Config. The gateway uses a copy.
	// Reload puts a different one in force for the connections dialled
	// from then on, while those open keep theirs. A backend whose
	// certificate is refused fails the attempt, counted in
	// tailgate_attempt_failures_total as reason "tls" (a backend that
	// refuses the gateway's certificate, or the lack of one, does so
	// after the handshake under TLS 1.3: when its alert comes before the
	// first request, net/http reports only a dead connection, counted as
	// "transport"). http:// and https:// backends may be mixed (replicas
	// move to TLS one at a time); New and Reload log a warning when they
	// are. Not applied to a Base of the caller's.
	BackendTLS *tls.Config

	// Base sends each backend attempt; it must return at once when an
	// attempt's context is cancelled, as net/http does (the primary runs on
	// the handler's goroutine). Nil means a transport built from the limits
	// above: a keep-alive pool of MaxInFlightAttempts idle connections per
	// replica, 2s to connect, no proxy, no transparent decompression.
	Base http.RoundTripper

	// Replica configures breakers, latency tracking and probation (see
	// package replica). The gateway turns probation on unless
	// DisableProbation is set, and sends the shadow requests; the rules:
	// docs/gateway.md.
	Replica replica.Config

	// DisableProbation turns latency-induced probation off. Default false.
	DisableProbation bool

	// Affinity, when non-nil, turns on affinity mode: each read's key
	// (Affinity.Key) maps to a partition owned by a few replicas, the
	// primary is picked among them and a hedge goes to another of them,
	// partitions move off overloaded replicas and hot keys are read from
	// more replicas (see Affinity and package partition). Nil (the
	// default): every replica serves every read, and the request path
	// spends nothing on keys. Turning it on or off needs a new Gateway.
	Affinity *Affinity

	// MaxInFlightShadows bounds shadow requests in flight. A shadow due
	// without a free slot is skipped (counted as skipped). Default 8.
	MaxInFlightShadows int

	// ShadowTimeout bounds each shadow request, its body included; a
	// shadow cut short counts as a lower bound of its replica's latency.
	// Default Timeout.
	ShadowTimeout time.Duration

	// TrustedHop says that the gateway's clients are a trusted proxy hop
	// (another Tailgate gateway, a load balancer that sets the headers
	// below itself), not the internet. False (the default) removes from
	// each client request, before it is forwarded, every Tailgate-*
	// header (Tailgate-Hedge, Tailgate-Shadow, ...: marks the gateway and
	// its peers set) and the client-address headers (Forwarded,
	// X-Forwarded-*, X-Real-Ip, True-Client-Ip), and sets X-Forwarded-For,
	// -Host and -Proto afresh from what the gateway saw. True keeps them:
	// a hedge or shadow from the hop stays marked, the hop's
	// X-Forwarded-For gets its address appended, and its
	// X-Forwarded-Host and -Proto are kept. Either way ties
	// (Tailgate-Tie, Tailgate-Tie-Peer) are the gateway's own to make,
	// Tailgate-Timeout is written by the gateway (a client's value only
	// shortens the request's deadline), and a header named in Connection
	// is never forwarded.
	TrustedHop bool

	// AccessLog, when non-nil, gets one line per client request, at info
	// level, with the message "access" and these attributes: method,
	// path (no query: query strings carry tokens), status (0: the client
	// left before an answer), bytes (of the body sent), duration (from
	// the request's arrival to its answer), route (the Route that took it,
	// "default" for the top-level settings), class (the class of read the
	// engine learnt its latency in, absent when refused before it was
	// known), replica (the backend whose
	// answer was forwarded, absent when none was), attempts (sent to
	// replicas, the primary included), hedged (a hedge, or in tied mode a
	// second copy, was sent), hedgeWon (its answer was forwarded), reason
	// (why a request was refused or failed, absent when answered; see
	// AccessLogSample) and client (the peer's address). The line's time
	// is when the answer was written. Nil (the default) logs nothing, and
	// costs the request path nothing.
	//
	// Reasons: the refusals of tailgate_rejections_total (max_requests,
	// max_attempts, method, body, target, deadline); no_replica (every
	// breaker open), timeout, response_too_large, all_failed (every
	// attempt failed), client_gone.
	AccessLog *slog.Logger

	// AccessLogSample is the share of requests AccessLog gets, chosen at
	// random, in (0, 1]: 0.01 logs about one request in a hundred. Zero
	// means 1, every request.
	AccessLogSample float64

	// TracerProvider, when non-nil, traces reads with OpenTelemetry: a
	// server span per client request (its parent the span already in the
	// request's context, or else the client's W3C traceparent, if any),
	// and a client span per attempt (primary, hedge, tied copy) and per
	// shadow, with the replica, the role, why it was sent and its outcome
	// (won, lost, failed, timeout, canceled; a shadow's answered, ...). A
	// hedge wanted and not sent is an event on the request's span, with
	// its reason (budget, gate, deadline, maxAttempts, noTarget,
	// capacity). Each attempt and shadow carries its own span's
	// traceparent (and the tracestate that goes with it) to its replica,
	// in place of the client's. Which reads are recorded is the
	// provider's sampler's to say. Nil (the default) traces nothing and
	// costs the request path nothing; the client's traceparent and
	// tracestate are then forwarded as they came, like any end-to-end
	// header. Reload keeps New's.
	TracerProvider trace.TracerProvider

	// Logger receives the gateway's log: changes of state once each
	// (breakers, probation, the overload gate, readiness) at info and
	// warn level, failed requests at warn level (one line per cause a
	// second at most, with a count of those held back), and debug lines.
	// Nil discards them.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Backends) == 0 {
		return c, fmt.Errorf("%w: no backends", ErrInvalid)
	}
	seen := map[string]bool{}
	for _, b := range c.Backends {
		u, err := target.Parse(b)
		if err != nil {
			// One prefix: err is `"<backend>": <problem>`, the backend's
			// user information masked, with no hedge prefix of its own.
			return c, fmt.Errorf("%w: backend %w", ErrInvalid, err)
		}
		if u.Path != "" {
			// The client's path is forwarded byte for byte: a prefix would
			// have to be spliced into it. Put the prefix in the replicas.
			return c, fmt.Errorf("%w: backend %q: must not have a path", ErrInvalid, b)
		}
		if seen[u.String()] {
			return c, fmt.Errorf("%w: duplicate backend %q (the same replica twice would defeat hedging)", ErrInvalid, b)
		}
		seen[u.String()] = true
	}
	if c.MaxInFlightRequests == 0 {
		c.MaxInFlightRequests = DefaultMaxInFlightRequests
	}
	if c.MaxInFlightRequests < 1 {
		return c, fmt.Errorf("%w: max in-flight requests %d must be at least 1", ErrInvalid, c.MaxInFlightRequests)
	}
	if c.MaxInFlightAttempts == 0 {
		c.MaxInFlightAttempts = c.MaxInFlightRequests + c.MaxInFlightRequests/4
		if c.Tied {
			// Every read may have both copies out: second copies must
			// not take the slots that primaries need.
			c.MaxInFlightAttempts = 2 * c.MaxInFlightRequests
		}
	}
	if c.MaxInFlightAttempts < 1 {
		return c, fmt.Errorf("%w: max in-flight attempts %d must be at least 1", ErrInvalid, c.MaxInFlightAttempts)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Timeout < 0 {
		return c, fmt.Errorf("%w: negative timeout %v", ErrInvalid, c.Timeout)
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxResponseBytes < 0 {
		return c, fmt.Errorf("%w: negative response limit %d", ErrInvalid, c.MaxResponseBytes)
	}
	if c.MaxRequestBodyBytes == 0 {
		c.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	if c.MaxRequestBodyBytes < 0 {
		return c, fmt.Errorf("%w: negative request body limit %d", ErrInvalid, c.MaxRequestBodyBytes)
	}
	if c.MaxResponseHeaderBytes == 0 {
		c.MaxResponseHeaderBytes = DefaultMaxResponseHeaderBytes
	}
	if c.MaxResponseHeaderBytes < MinResponseHeaderBytes || c.MaxResponseHeaderBytes > MaxResponseHeaderBytesLimit {
		return c, fmt.Errorf("%w: response header limit %d must be within [%d, %d]", ErrInvalid, c.MaxResponseHeaderBytes, MinResponseHeaderBytes, MaxResponseHeaderBytesLimit)
	}
	if c.MaxInFlightShadows == 0 {
		c.MaxInFlightShadows = DefaultMaxInFlightShadows
	}
	if c.MaxInFlightShadows < 1 {
		return c, fmt.Errorf("%w: max in-flight shadows %d must be at least 1", ErrInvalid, c.MaxInFlightShadows)
	}
	if c.ShadowTimeout == 0 {
		c.ShadowTimeout = c.Timeout
	}
	if c.ShadowTimeout < 0 {
		return c, fmt.Errorf("%w: negative shadow timeout %v", ErrInvalid, c.ShadowTimeout)
	}
	c.Replica.Probation.Enabled = !c.DisableProbation
	if c.Tied {
		switch {
		case len(c.Backends) < 2:
			return c, fmt.Errorf("%w: tied requests need at least two backends, have %d", ErrInvalid, len(c.Backends))
		case c.Policy.Delay != 0:
			return c, fmt.Errorf("%w: policy delay %v with tied requests: the second copy goes after TiedDelay", ErrInvalid, c.Policy.Delay)
		case c.Policy.MaxAttempts != 0 && c.Policy.MaxAttempts != 2:
			return c, fmt.Errorf("%w: max attempts %d with tied requests: a tied request is two copies", ErrInvalid, c.Policy.MaxAttempts)
		}
		if c.TiedDelay == 0 {
			c.TiedDelay = tied.DefaultDelay
		}
	}
	switch c.BackendProtocol {
	case "":
		c.BackendProtocol = ProtocolHTTP1
	case ProtocolHTTP1, ProtocolH2C:
	default:
		return c, fmt.Errorf("%w: backend protocol %q: want %s or %s", ErrInvalid, c.BackendProtocol, ProtocolHTTP1, ProtocolH2C)
	}
	if c.Affinity != nil {
		a := *c.Affinity // the caller's stays as it was
		if _, err := parseAffinityKey(a.Key); err != nil {
			return c, err
		}
		if a.RebalanceEvery == 0 {
			a.RebalanceEvery = DefaultRebalanceEvery
		}
		if a.RebalanceEvery < 0 {
			return c, fmt.Errorf("%w: affinity: negative rebalance interval %v", ErrInvalid, a.RebalanceEvery)
		}
		c.Affinity = &a
	}
	if err := c.checkRouteFields(seen); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.AccessLogSample == 0 {
		c.AccessLogSample = 1
	}
	if !(c.AccessLogSample > 0 && c.AccessLogSample <= 1) {
		return c, fmt.Errorf("%w: access log sample %v must be within (0, 1]", ErrInvalid, c.AccessLogSample)
	}
	return c, nil
}

// newBase builds the backend transport for c, dialling TLS with the
// configuration that tlsDial holds (see backendTLS): over HTTP/1.1 in
// clear, internal/h1's client, which reads each attempt's response in the
// attempt's own goroutine (why: docs/performance.md), and tells
// onUnsolicited of each connection it closes for bytes nobody asked for;
// net/http's Transport for https:// and h2c backends, whose streams it
// multiplexes.
func newBase(c Config, tlsDial *backendTLS, onUnsolicited func(h1.Unsolicited)) http.RoundTripper {
	std := newStdBase(c, tlsDial)
	t := &classifying{std, tlsDial} // https:// backends' failures told apart
	if c.BackendProtocol == ProtocolH2C {
		return t
	}
	h, err := h1.New(h1.Config{
		Fallback:               t, // https:// backends
		DialContext:            tlsDial.dial,
		IdleTimeout:            std.IdleConnTimeout,
		MaxIdlePerHost:         std.MaxIdleConnsPerHost,
		MaxResponseHeaderBytes: std.MaxResponseHeaderBytes,
		OnUnsolicited:          onUnsolicited,
	})
	if err != nil {
		panic(err) // the limits were validated in withDefaults
	}
	return h
}

// newStdBase builds net/http's Transport for c (see newBase).
func newStdBase(c Config, tlsDial *backendTLS) *http.Transport {
	t := hedge.NewBaseTransport()
	t.Proxy = nil               // replicas are addressed directly
	t.DisableCompression = true // forward Accept-Encoding and bodies untouched
	// Bounded per replica only, so that replicas a reload adds get their
	// share (the total is at most this times the replicas). No
	// ResponseHeaderTimeout: each attempt's context carries the request's
	// time limit (each shadow's, ShadowTimeout), and a fixed one would cut
	// attempts short after a reload raised the timeout.
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = c.MaxInFlightAttempts
	// net/http's default would buffer up to 10 MiB of headers per attempt
	// and forward them all: a few misbehaving answers at once cost
	// hundreds of megabytes.
	t.MaxResponseHeaderBytes = c.MaxResponseHeaderBytes
	t.DialContext = tlsDial.dial
	t.DialTLSContext = tlsDial.dialTLS
	// Over TLS, HTTP/2 when ALPN agrees on it (the transport would not try
	// it with a TLS dialer of its own without being told), else HTTP/1.1;
	// in clear, HTTP/1.1 or, with ProtocolH2C, HTTP/2 by prior knowledge.
	var p http.Protocols
	p.SetHTTP2(true)
	if c.BackendProtocol == ProtocolH2C {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	t.Protocols = &p
	return t
}

// dialBackend dials a backend's TCP connection.
var dialBackend = (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext
