package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/discovery"
	"github.com/tailgate-dev/tailgate/internal/h1"
	"github.com/tailgate-dev/tailgate/internal/jsonerr"
	"github.com/tailgate-dev/tailgate/internal/opctx"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
)

// Gateway is an http.Handler that proxies reads to replicas with hedging.
// Create it with New; it is safe for concurrent use. Reload changes its
// configuration while it serves.
type Gateway struct {
	// view is the configuration in force, with the pools and routes built
	// for it (see view). A request loads it once.
	view     atomic.Pointer[view]
	reloadMu sync.Mutex // serialises Reload
	keep     lasting    // what outlives views; under reloadMu (see lasting)

	base      http.RoundTripper
	h2cBase   http.RoundTripper // gRPC routes': http:// backends over h2c whatever BackendProtocol says (base when it says h2c, or is the caller's)
	tls       *backendTLS       // the TLS that base dials with; nil with a Base of the caller's
	requests  limiter
	attempts  limiter
	metrics   *metrics
	log       *slog.Logger
	limited   [nLimitedLogs]limitedLog // per-request warnings, at most one a second each (see logs.go)
	states    stateLog                 // changes of state, logged once each (see statelog.go)
	accessLog accessLog                // off unless Config.AccessLog, for the gateway's life (see accesslog.go)
	tracing   *tracing                 // nil unless Config.TracerProvider, for the gateway's life (see trace.go)

	// draining is set by StartDrain: /readyz answers 503 from then on.
	draining atomic.Bool
	// leaving are the replicas a Reload removed, until their attempts
	// end (see leaving).
	leaving leaving

	// discovery reports the discovered names' state (SetDiscovery).
	discovery atomic.Pointer[func() []discovery.State]

	// serverWrite is the smallest WriteTimeout of the servers Server has
	// built (0: none), for requests that a reload has given more time.
	serverWrite atomic.Int64

	epoch time.Time

	// Shadow requests to replicas on probation (see shadow.go).
	shadows shadows

	// affinity runs the rebalancing rounds of the pools read by key (see
	// affinity.go).
	affinity affinityRounds

	// slowClasses remembers the classes whose median latency is above
	// their route's fixed hedge delay, to warn of each once (see serve).
	slowClasses sync.Map // route + " " + class -> struct{}
}

// stampSlack is the deadline Transport's Slack: the primary's
// Tailgate-Timeout is written as serve builds the request (see stamp),
// and is sent as it is when the attempt leaves within stampSlack.
const stampSlack = time.Millisecond

// stamp returns the Tailgate-Timeout value for a primary with d left as
// serve builds it: d less stampSlack, so that the value is never more than
// the time left when the attempt is sent, and the deadline Transport sends
// it as it is (no copy) when that happens within stampSlack. Nil when d is
// no more than the slack: the Transport then writes the value itself.
func stamp(d time.Duration) []string {
	if d <= stampSlack {
		return nil
	}
	return []string{deadline.Format(d - stampSlack)}
}

// New validates cfg and returns a Gateway.
func New(cfg Config) (*Gateway, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	windows, err := checkRoutes(cfg)
	if err != nil {
		return nil, err
	}
	g := &Gateway{log: cfg.Logger, epoch: time.Now()}
	g.accessLog.init(cfg)
	g.tracing = newTracing(cfg.TracerProvider)
	g.states.init()
	g.requests.max.Store(int64(cfg.MaxInFlightRequests))
	g.attempts.max.Store(int64(cfg.MaxInFlightAttempts))
	g.metrics = newMetrics(g)
	g.base = cfg.Base
	if g.base == nil {
		g.tls = newBackendTLS(dialBackend, cfg.BackendTLS)
		g.base = newBase(cfg, g.tls, g.unsolicited)
	}
	g.h2cBase = g.base
	if cfg.Base == nil && cfg.BackendProtocol != ProtocolH2C {
		// Built whether or not a route needs it yet (a reload may add a
		// gRPC route): it holds no connection until one does.
		h2c := cfg
		h2c.BackendProtocol = ProtocolH2C
		g.h2cBase = newBase(h2c, g.tls, g.unsolicited)
	}
	v, keep, err := g.newView(cfg, lasting{}, windows)
	if err != nil {
		return nil, err
	}
	g.keep = keep
	warnMixed(g.log, v.backends(), nil)
	g.metrics.viewChanged(nil, v)
	g.view.Store(v)
	g.proveBackends(v)
	g.shadows.init(cfg)
	g.affinity.init(g, cfg)
	g.affinity.follow(v)
	return g, nil
}

// proveBackends has internal/h1 check, off the request path, that each
// plain-HTTP replica of v's HTTP/1.1 routes sends nothing as a connection
// opens (see h1.Transport.Prove): else the first reads a new gateway, or a
// replica a reload added, sends there would each wait for that check.
func (g *Gateway) proveBackends(v *view) {
	h, ok := g.base.(*h1.Transport)
	if !ok {
		return
	}
	for _, rt := range append([]*route{v.def}, v.routes...) {
		if rt.grpc != nil {
			continue // over h2c, whose servers speak first
		}
		for _, u := range rt.pool.targets {
			if u.Scheme == "http" {
				h.Prove(u.Host)
			}
		}
	}
}

// Close cancels the shadow requests in flight and waits for them to end,
// sends no more, and releases idle backend connections. Call it once the
// server has stopped handing requests to the Gateway (after
// http.Server.Shutdown): client requests are not its business, and the
// Gateway keeps answering them.
func (g *Gateway) Close() {
	g.shadows.close()
	g.affinity.close() // affinity mode's rebalancing rounds
	for _, b := range []http.RoundTripper{g.base, g.h2cBase} {
		if c, ok := b.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
}

// poolLoad returns, for the overload gate of the routes over pool name,
// how full the gateway's limits are (the fuller of the request and
// attempt limits) and the share of the pool's replicas that would refuse
// an attempt now (breaker open, or its half-open probe out): overload the
// engine cannot see. One pool's replicas down do not gate another's
// hedges.
func (g *Gateway) poolLoad(name string) func() hedge.Load {
	return func() hedge.Load {
		inUse := max(float64(g.requests.inUse())/float64(g.requests.max.Load()), float64(g.attempts.inUse())/float64(g.attempts.max.Load()))
		l := hedge.Load{InUse: min(inUse, 1)}
		if p := g.view.Load().pools[name]; p != nil {
			n := p.set.Len()
			l.Unavailable = float64(n-p.set.Available(time.Now())) / float64(n)
		}
		return l
	}
}

// Classes returns the hedging engine's Hedgers of the reads no Route
// takes, one per class of read.
func (g *Gateway) Classes() *hedge.Classes { return g.view.Load().def.keep.classes }

// Replicas returns the replica set of the top-level Backends in force:
// after a Reload, the set's next generation (see replica.Set.Next). Do not
// call its Next: membership changes through Reload.
func (g *Gateway) Replicas() *replica.Set { return g.view.Load().defaultPool().set }

// ServeHTTP proxies one read.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var rt *readTrace
	if g.tracing != nil {
		rt = g.tracing.startRead(r, start)
	}
	s := g.serve(w, r, start, rt)
	took := time.Since(start)
	s.rt.m.observeRequest(s.code, took)
	if g.accessLog.log != nil {
		g.logAccess(r, took, s)
	}
	if rt != nil {
		rt.end(s, start.Add(took))
	}
	if s.code == 0 {
		// Nothing was written (the client left): never let net/http
		// answer 200 on our behalf to a client that may still read.
		panic(http.ErrAbortHandler)
	}
}

// Rejection reasons, as counted in tailgate_rejections_total.
const (
	rejectRequests = "max_requests"
	rejectAttempts = "max_attempts"
	rejectMethod   = "method"
	rejectBody     = "body"
	rejectTarget   = "target"
	rejectDeadline = "deadline"
	// rejectBadDeadline is a Tailgate-Timeout that does not parse: the
	// client's mistake (400), to tell apart from a deadline too short to
	// meet (504), which is load's.
	rejectBadDeadline = "bad_deadline"
)

// served is what serve did with a request, for the metrics and the
// access log: the status written (0: none, the client left first), the
// body's length, why the request was refused or failed (see
// accessReasons; "" when it was answered), its route, its class (nil when
// refused before it was known) and its exchange (nil when refused before
// any attempt).
type served struct {
	code   int
	bytes  int64
	reason string
	rt     *route
	h      *hedge.Hedger
	x      *exchange
}

// serve handles r, which arrived at start, and says what it did (see
// served); tr is its trace (nil: not traced). It reads top to bottom: the
// route that takes the read, admission (what a read may be, the request
// limit, its class, the client's deadline, the attempt limit), forwarding
// through the engine, which the exchange steers, and the response.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, start time.Time, tr *readTrace) (s served) {
	// The configuration in force as the request arrived: it serves the
	// request to the end (picks, targets, outcomes, the access log's
	// replica), whatever a Reload does meanwhile.
	v := g.view.Load()
	rt := v.routeOf(r)
	defer func() { s.rt = rt }()
	if rt.grpc != nil {
		if !rt.grpc.reads[r.URL.Path] {
			return g.passGRPC(w, r, v, rt, start) // a stream, a write: once, unhedged (grpcproxy.go)
		}
		w = &grpcWriter{w} // a read: answered in gRPC's terms
	}
	// What a read may be comes first, before the request limit: the checks
	// cost nothing, and a request that fails them is refused, and its
	// connection closed, even under overload (see refuseAndClose).
	if !takes(rt.methods, r.Method) {
		if isGRPC(r) {
			return g.grpcUnrouted(w, r)
		}
		// OPTIONS * too: Server keeps net/http from answering it.
		w.Header().Set("Allow", "GET, HEAD")
		return g.refuseAndClose(w, rejectMethod, http.StatusMethodNotAllowed, "only GET and HEAD are proxied")
	}
	// Only origin-form targets ("/path?query"), that can be forwarded
	// byte for byte: an absolute-form or authority-form target must never
	// choose where the request goes, and the asterisk form is OPTIONS's
	// alone.
	if !forwardable(r) {
		return g.refuseAndClose(w, rejectTarget, http.StatusBadRequest, "only origin-form request targets (/path?query) are proxied")
	}
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return g.refuseAndClose(w, rejectBody, http.StatusBadRequest, "requests with a body are not proxied: reads only")
		}
		// A method the route declares a read: its body, whole (body.go).
		var ok bool
		if r, s, ok = g.readBody(w, r, v, rt, start); !ok {
			return s
		}
	}
	if !g.requests.tryAcquire() {
		w.Header().Set("Retry-After", "1")
		return g.reject(w, rejectRequests, http.StatusServiceUnavailable, "overloaded: too many requests in flight")
	}
	defer g.requests.release()
	// The read's class: its latency window, delay and overload gate.
	h := rt.hedger(r)
	defer func() { s.h = h }()
	if rt.fixed > 0 {
		g.warnSlowClass(rt, h)
	}
	client := r.Context()
	budget, budgetValue := rt.timeout, rt.timeoutValue
	if d, ok, err := rt.clientDeadline(r.Header); ok {
		// The client's own deadline: work that cannot finish within it is
		// refused now rather than sent to replicas that would toil for a
		// caller already gone.
		if err != nil {
			return g.reject(w, rejectBadDeadline, http.StatusBadRequest, err.Error())
		}
		if d <= 0 {
			return g.reject(w, rejectDeadline, http.StatusGatewayTimeout, "deadline: "+d.String()+" left, need more than 0s")
		}
		// While nothing is known of the class (0), nothing is refused on
		// its account; nor when the policy ignores deadlines.
		if rt.checkExpected {
			if need := h.Expected(); need > 0 && d < need {
				return g.reject(w, rejectDeadline, http.StatusGatewayTimeout, "deadline: "+d.String()+" left, replicas need about "+need.String())
			}
		}
		if d <= budget {
			if d < budget {
				budgetValue = stamp(d)
			}
			budget = d
			// The client's clock started when its request arrived: the
			// time spent here before the engine runs counts against it.
			ctx, cancel := withDeadline(client, start.Add(d))
			defer cancel()
			r = r.WithContext(ctx)
		}
	}
	if !g.attempts.tryAcquire() { // the primary's slot
		w.Header().Set("Retry-After", "1")
		return g.reject(w, rejectAttempts, http.StatusServiceUnavailable, "overloaded: too many backend attempts in flight")
	}

	if sw := g.serverWrite.Load(); sw > 0 && rt.timeout+serverSlack > time.Duration(sw) {
		// A reload gave requests more time than the Server's
		// WriteTimeout, fixed when it was built, allows them.
		extendWrite(w, start.Add(rt.timeout+serverSlack))
	}
	x := g.newExchange(v, rt, r, budgetValue)
	x.trace = tr
	var among []int     // a key's replicas (affinity mode)
	var home, cold bool // among[0] is the key's home; it is not likely to hold the key
	if rt.keyed() {
		among, home, cold = x.routeByKey(r, start)
	}
	x.Route = rt.pool.keyedRoute(among, home, cold, rt.tied && rt.tieable(h, start, r.Context()))
	resp, err := rt.transport.RoundTripWith(&x.req, h, x)
	x.Route.Finish() // a tied read's twin, held for a second copy never sent
	x.decide(resp, err, client.Err() != nil)
	if rt.keyed() {
		x.recordKey(start)
	}
	if !x.started {
		// The primary never started (no replica, or the client had gone
		// before the engine ran): its slot was never an attempt's.
		g.attempts.release()
	}
	if rt.tied {
		g.settleTie(x, resp, err)
	}
	if rt.grpc != nil {
		resp, err = grpcAnswer(resp, err)
	}

	if err != nil {
		s = g.writeFailure(w, r, rt, client, budget, resp, err)
	} else {
		defer resp.Body.Close()
		s = g.writeResponse(w, r, resp)
		// The client has its answer (net/http sends what is buffered when
		// the handler returns, a few microseconds on): a replica on
		// probation may be due a copy of the request, to measure it.
		g.shadow(v, rt.pool, r, tr)
	}
	s.x = x
	return s
}

// withDeadline is context.WithDeadline, but over h1server's request
// context (an opctx.Ctx) it makes one too, so that the engine's operation
// context can be one as well (see internal/opctx).
func withDeadline(ctx context.Context, deadline time.Time) (context.Context, func()) {
	if !opctx.Usable(ctx) {
		return context.WithDeadline(ctx, deadline)
	}
	c := new(opctx.Ctx)
	c.Init(ctx, deadline)
	c.Arm(time.Now())
	return c, c.Cancel
}

// hedger returns the Hedger of r's class on the route.
func (rt *route) hedger(r *http.Request) *hedge.Hedger {
	if rt.class != "" {
		return rt.keep.classes.Hedger(rt.class)
	}
	if rt.grpc != nil {
		return rt.keep.classes.Hedger(r.URL.Path) // a method a class, as hedgegrpc's; listed methods only
	}
	return rt.keep.classes.ForRequest(r)
}

// warnSlowClass warns, once, when the median latency of h's class is
// above its route's fixed hedge delay: every read of the class is then
// hedged, and its hedges, which wait for an answer as slow, cannot win;
// they spend the budget that other classes' stragglers need. It warns
// again if the class recovers and slows down once more.
func (g *Gateway) warnSlowClass(rt *route, h *hedge.Hedger) {
	median := h.Expected()
	key := rt.name + " " + h.Class()
	if median <= rt.fixed {
		if _, was := g.slowClasses.Load(key); was {
			g.slowClasses.Delete(key)
		}
		return
	}
	if _, was := g.slowClasses.LoadOrStore(key, struct{}{}); !was {
		g.log.Warn("hedge delay below a class's median latency: its hedges cannot win", "route", rt.name, "class", h.Class(),
			"delay", rt.fixed, "median", median.Round(time.Microsecond))
	}
}

// reject counts a request refused before any attempt, for reason, and
// answers it.
func (g *Gateway) reject(w http.ResponseWriter, reason string, code int, msg string) served {
	g.metrics.reject(reason)
	return writeError(w, code, msg, reason)
}

// refuseAndClose is reject for a request that is not a read as the
// gateway takes one (a method other than GET and HEAD, a target not in
// origin form, a body), and it closes the connection after the answer.
// Such a request's framing is in doubt: its body was not read, and a
// proxy in front may have framed it otherwise (Content-Length where
// net/http follows Transfer-Encoding). RFC 9112 §6.1 and §6.3: whatever
// follows on the connection must never be parsed as the next request.
// Without "Connection: close", net/http reads an unread body of up to 256
// KiB to keep the connection, and would then serve a request smuggled
// after a chunked body's end ("0\r\n\r\nGET /smuggled ..."). With it,
// net/http stops reading and closes once the answer is written. The
// refusals of well-framed reads (503 at the limits, a deadline refused)
// keep the connection.
func (g *Gateway) refuseAndClose(w http.ResponseWriter, reason string, code int, msg string) served {
	w.Header().Set("Connection", "close")
	return g.reject(w, reason, code, msg)
}

// writeFailure answers a read that got no acceptable answer: 502 when
// the replicas failed, 504 when time ran out, nothing when the client
// left.
func (g *Gateway) writeFailure(w http.ResponseWriter, r *http.Request, rt *route, client context.Context, budget time.Duration, resp *http.Response, err error) served {
	if errors.Is(err, hedge.ErrNoTarget) {
		if ok, n := g.allowLog(logNoReplica); ok {
			g.log.Warn("no replica available: every circuit breaker is open", "path", r.URL.Path, "suppressed", n)
		}
		return writeError(w, http.StatusBadGateway, "no replica available: every circuit breaker is open", reasonNoReplica)
	}
	if resp != nil {
		// The last refused answer (a 5xx, a stray 1xx): every attempt
		// failed.
		resp.Body.Close()
		err = fmt.Errorf("replica answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		if tied.Dropped(resp) {
			// Every copy was dropped (a failure of the copy that ran would
			// have been returned instead: a dropped answer is not one).
			err = errors.New("the last answer was a copy dropped for its twin")
		}
	}
	switch {
	case client.Err() != nil:
		g.log.Debug("client left", "path", r.URL.Path, "err", err)
		return served{reason: reasonClientGone}
	case errors.Is(err, context.DeadlineExceeded):
		if ok, n := g.allowLog(logTimeout); ok {
			g.log.Warn("request timed out", "path", r.URL.Path, "timeout", budget, "suppressed", n)
		}
		return writeError(w, http.StatusGatewayTimeout, "timeout: no acceptable answer within "+budget.String(), reasonTimeout)
	case errors.Is(err, hedge.ErrResponseTooLarge):
		if ok, n := g.allowLog(logTooLarge); ok {
			g.log.Warn("response too large", "path", r.URL.Path, "limit", g.view.Load().cfg.MaxResponseBytes, "suppressed", n)
		}
		return writeError(w, http.StatusBadGateway, "backend response larger than "+strconv.FormatInt(g.view.Load().cfg.MaxResponseBytes, 10)+" bytes", reasonTooLarge)
	default:
		if ok, n := g.allowLog(logFailed); ok {
			g.log.Warn("all attempts failed", "path", r.URL.Path, "err", err, "suppressed", n)
		}
		msg := cause(err)
		if tlsFailure(err) {
			// Names, certificates and authorities are the backends'
			// business, not a client's: the log has them (logTLS).
			msg = "TLS with the backend failed (the gateway's log says why)"
		}
		return writeError(w, http.StatusBadGateway, "all attempts failed: "+msg, reasonFailed)
	}
}

// writeResponse forwards a buffered backend response.
func (g *Gateway) writeResponse(w http.ResponseWriter, r *http.Request, resp *http.Response) served {
	if gw, ok := w.(*grpcWriter); ok {
		return gw.answer(resp) // with its trailers (grpcproxy.go)
	}
	h := w.Header()
	copyEndToEnd(h, resp.Header)
	if r.Method != http.MethodHead {
		// The body is buffered whole: its length is known. net/http works
		// out the length of a small body written in one go by itself (it
		// fits the server's buffer), so only larger ones are announced here,
		// to keep them from being chunked.
		if n, ok := resp.Body.(interface{ Len() int }); ok && n.Len() > smallBody {
			h["Content-Length"] = []string{strconv.Itoa(n.Len())}
		} else {
			delete(h, "Content-Length")
		}
	}
	w.WriteHeader(resp.StatusCode)
	var n int64
	if r.Method != http.MethodHead {
		var err error
		if n, err = io.Copy(w, resp.Body); err != nil {
			g.log.Debug("writing response", "path", r.URL.Path, "err", err)
		}
	}
	return served{code: resp.StatusCode, bytes: n}
}

// smallBody is the largest body net/http's server buffers whole before
// writing headers, and so announces the length of itself.
const smallBody = 2048

// cause names the innermost reason of err, without the layers of context
// that wrap it on the way out.
func cause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// writeError writes a short JSON error for reason and says so.
func writeError(w http.ResponseWriter, code int, msg, reason string) served {
	if gw, ok := w.(*grpcWriter); ok {
		return gw.status(code, msg, reason) // a gRPC status in its place (grpcproxy.go)
	}
	n := jsonerr.Write(w, code, msg)
	return served{code: code, bytes: int64(n), reason: reason}
}

// limiter is a non-blocking counting semaphore. Its max may change while
// it is in use (Reload): a lower one refuses until enough slots are free.
type limiter struct {
	n   atomic.Int64
	max atomic.Int64
}

func (l *limiter) tryAcquire() bool {
	if l.n.Add(1) > l.max.Load() {
		l.n.Add(-1)
		return false
	}
	return true
}

func (l *limiter) release()     { l.n.Add(-1) }
func (l *limiter) inUse() int64 { return l.n.Load() }
