package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/jsonerr"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
)

// Gateway is an http.Handler that proxies reads to replicas with hedging.
// Create it with New; it is safe for concurrent use.
type Gateway struct {
	cfg       Config
	set       *replica.Set
	hedger    *hedge.Hedger
	transport *hedge.Transport
	base      http.RoundTripper
	requests  limiter
	attempts  limiter
	metrics   *metrics
	log       *slog.Logger
	limited   [nLimitedLogs]limitedLog // per-request warnings, at most one a second each (see logs.go)
	states    stateLog                 // changes of state, logged once each (see statelog.go)
	accessLog accessLog                // off unless Config.AccessLog (see accesslog.go)

	// timeout bounds each request (the engine's); timeoutValue is the
	// primary's Tailgate-Timeout for requests without a shorter deadline
	// (see stamp), formatted once.
	timeout      time.Duration
	timeoutValue []string

	// The deadline check's view of the replicas' expected latency: a copy
	// of Hedger.Stats().Expected, read at most every expectedEvery, since
	// Stats also sums the gate's window and reads the budget. Times are
	// nanoseconds since epoch, on the monotonic clock. checkExpected is
	// false when the Policy ignores deadlines.
	epoch         time.Time
	expectedNext  atomic.Int64
	expected      atomic.Int64
	checkExpected bool

	// Shadow requests to replicas on probation (see shadow.go).
	shadows shadows

	// Tied requests (see tied.go): on with Config.Tied. origins are the
	// backends' base URLs, by index, as tied.PeerHeader names them;
	// budget is the engine's, which a read consults before it is tied.
	tied      bool
	tiedDelay time.Duration // the engine's delay: TiedDelay, at least 1ns
	origins   []string
	budget    *hedge.Budget
}

// stampSlack is the deadline Transport's Slack: the primary's
// Tailgate-Timeout is written as serve builds the request (see stamp),
// and is sent as it is when the attempt leaves within stampSlack.
const stampSlack = time.Millisecond

// expectedEvery bounds how stale the gateway's copy of the expected
// attempt latency is, on top of the engine's own refresh.
const expectedEvery = 10 * time.Millisecond

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
	g := &Gateway{cfg: cfg, log: cfg.Logger, epoch: time.Now(), tied: cfg.Tied}
	g.accessLog.init(cfg)
	g.requests.max = int64(cfg.MaxInFlightRequests)
	g.attempts.max = int64(cfg.MaxInFlightAttempts)
	g.metrics = newMetrics(g)
	policy := cfg.Policy
	policy.Observer = chainObservers(g.metrics, policy.Observer)
	if policy.Timeout == 0 {
		policy.Timeout = cfg.Timeout // the engine's own deadline: no extra context per request
	}
	if cfg.Tied {
		if err := g.initTied(&policy); err != nil {
			return nil, err
		}
	}
	if policy.Gate.Load == nil {
		policy.Gate.Load = g.load // the limits and breakers: overload the engine cannot see
	}
	g.timeout, g.timeoutValue = policy.Timeout, stamp(policy.Timeout)
	if g.hedger, err = hedge.New(policy); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	g.metrics.registerBudget(g.hedger.Policy().Budget)
	g.checkExpected = !g.hedger.Policy().IgnoreDeadline
	g.base = cfg.Base
	if g.base == nil {
		g.base = newBase(cfg)
	}
	// Each attempt tells its replica how long it has left, as of when it
	// is sent: a hedge launched later claims less than the primary. serve
	// writes the primary's value, stampSlack short of the time left, as
	// it builds the request, so only a request sent more than stampSlack
	// later is copied to be rewritten.
	var accept func(*http.Response) error // nil: hedge.DefaultAccept, a final status below 500
	if g.tied {
		accept = tied.Accept(nil) // and never an answer dropped for its twin
	}
	g.transport, err = hedge.NewTransport(hedge.TransportConfig{
		Base:          &deadline.Transport{Base: g.base, Slack: stampSlack},
		Hedger:        g.hedger,
		Targets:       cfg.Backends,
		MaxBodyBytes:  cfg.MaxResponseBytes,
		Accept:        accept,
		InlinePrimary: true, // Base returns at once on cancellation (see Config.Base)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if g.set, err = replica.New(cfg.Backends, g.replicaConfig(cfg.Replica)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := g.shadows.init(cfg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return g, nil
}

// Close cancels the shadow requests in flight and waits for them to end,
// sends no more, and releases idle backend connections. Call it once the
// server has stopped handing requests to the Gateway (after
// http.Server.Shutdown): client requests are not its business, and the
// Gateway keeps answering them.
func (g *Gateway) Close() {
	g.shadows.close()
	if c, ok := g.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// load reports, for the overload gate, how full the gateway's limits are
// (the fuller of the request and attempt limits) and the share of replicas
// that would refuse an attempt now (breaker open, or its half-open probe
// out).
func (g *Gateway) load() hedge.Load {
	inUse := max(float64(g.requests.inUse())/float64(g.requests.max), float64(g.attempts.inUse())/float64(g.attempts.max))
	n := g.set.Len()
	return hedge.Load{
		InUse:       min(inUse, 1),
		Unavailable: float64(n-g.set.Available(time.Now())) / float64(n),
	}
}

// Hedger returns the hedging engine the gateway uses.
func (g *Gateway) Hedger() *hedge.Hedger { return g.hedger }

// Replicas returns the replica set.
func (g *Gateway) Replicas() *replica.Set { return g.set }

// ServeHTTP proxies one read.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s := g.serve(w, r, start)
	took := time.Since(start)
	g.metrics.observeRequest(s.code, took)
	if g.accessLog.log != nil {
		g.logAccess(r, took, s)
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
)

// expectedLatency returns the replicas' expected attempt latency (0 while
// unknown) as of now, from a copy refreshed at most every expectedEvery.
func (g *Gateway) expectedLatency(now time.Time) time.Duration {
	n := int64(now.Sub(g.epoch))
	if next := g.expectedNext.Load(); n >= next && g.expectedNext.CompareAndSwap(next, n+int64(expectedEvery)) {
		g.expected.Store(int64(g.hedger.Stats().Expected))
	}
	return time.Duration(g.expected.Load())
}

// served is what serve did with a request, for the metrics and the
// access log: the status written (0: none, the client left first), the
// body's length, why the request was refused or failed (see
// accessReasons; "" when it was answered), and its exchange (nil when
// refused before any attempt).
type served struct {
	code   int
	bytes  int64
	reason string
	x      *exchange
}

// serve handles r, which arrived at start, and says what it did (see
// served). It reads top to bottom:
// admission (what a read may be, the request limit, the client's
// deadline, the attempt limit), forwarding through the engine, which x
// steers, and the response.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, start time.Time) served {
	// What a read may be comes first, before the request limit: the checks
	// cost nothing, and a request that fails them is refused, and its
	// connection closed, even under overload (see refuseAndClose).
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	default:
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
		return g.refuseAndClose(w, rejectBody, http.StatusBadRequest, "requests with a body are not proxied: reads only")
	}
	if !g.requests.tryAcquire() {
		w.Header().Set("Retry-After", "1")
		return g.reject(w, rejectRequests, http.StatusServiceUnavailable, "overloaded: too many requests in flight")
	}
	defer g.requests.release()
	client := r.Context()
	budget, budgetValue := g.timeout, g.timeoutValue
	if d, ok, err := deadline.FromHeader(r.Header); ok {
		// The client's own deadline: work that cannot finish within it is
		// refused now rather than sent to replicas that would toil for a
		// caller already gone.
		if err != nil {
			return g.reject(w, rejectDeadline, http.StatusBadRequest, err.Error())
		}
		if d <= 0 {
			return g.reject(w, rejectDeadline, http.StatusGatewayTimeout, "deadline: "+d.String()+" left, need more than 0s")
		}
		// While nothing is known of the replicas (0), nothing is refused
		// on their account; nor when the policy ignores deadlines.
		if g.checkExpected {
			if need := g.expectedLatency(start); need > 0 && d < need {
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
			ctx, cancel := context.WithDeadline(client, start.Add(d))
			defer cancel()
			r = r.WithContext(ctx)
		}
	}
	if !g.attempts.tryAcquire() { // the primary's slot
		w.Header().Set("Retry-After", "1")
		return g.reject(w, rejectAttempts, http.StatusServiceUnavailable, "overloaded: too many backend attempts in flight")
	}

	x := g.newExchange(r, budgetValue)
	resp, err := g.transport.RoundTripWith(&x.req, x)
	x.decide(resp, err, client.Err() != nil)
	if !x.started {
		// The primary never started (no replica, or the client had gone
		// before the engine ran): its slot was never an attempt's.
		g.attempts.release()
	}
	if g.tied {
		g.settleTie(x, resp, err)
	}

	var s served
	if err != nil {
		s = g.writeFailure(w, r, client, budget, err)
	} else {
		defer resp.Body.Close()
		s = g.writeResponse(w, r, resp)
		// The client has its answer (net/http sends what is buffered when
		// the handler returns, a few microseconds on): a replica on
		// probation may be due a copy of the request, to measure it.
		g.shadow(r)
	}
	s.x = x
	return s
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
func (g *Gateway) writeFailure(w http.ResponseWriter, r *http.Request, client context.Context, budget time.Duration, err error) served {
	if errors.Is(err, hedge.ErrNoTarget) {
		if ok, n := g.allowLog(logNoReplica); ok {
			g.log.Warn("no replica available: every circuit breaker is open", "path", r.URL.Path, "suppressed", n)
		}
		return writeError(w, http.StatusBadGateway, "no replica available: every circuit breaker is open", reasonNoReplica)
	}
	var refused *hedge.RefusedError
	if errors.As(err, &refused) {
		// The last refused answer (a 5xx, a stray 1xx): every attempt
		// failed.
		resp := refused.Response
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
			g.log.Warn("response too large", "path", r.URL.Path, "limit", g.cfg.MaxResponseBytes, "suppressed", n)
		}
		return writeError(w, http.StatusBadGateway, "backend response larger than "+strconv.FormatInt(g.cfg.MaxResponseBytes, 10)+" bytes", reasonTooLarge)
	default:
		if ok, n := g.allowLog(logFailed); ok {
			g.log.Warn("all attempts failed", "path", r.URL.Path, "err", err, "suppressed", n)
		}
		return writeError(w, http.StatusBadGateway, "all attempts failed: "+cause(err), reasonFailed)
	}
}

// writeResponse forwards a buffered backend response.
func (g *Gateway) writeResponse(w http.ResponseWriter, r *http.Request, resp *http.Response) served {
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
	n := jsonerr.Write(w, code, msg)
	return served{code: code, bytes: int64(n), reason: reason}
}

// limiter is a non-blocking counting semaphore.
type limiter struct {
	n   atomic.Int64
	max int64
}

func (l *limiter) tryAcquire() bool {
	if l.n.Add(1) > l.max {
		l.n.Add(-1)
		return false
	}
	return true
}

func (l *limiter) release()     { l.n.Add(-1) }
func (l *limiter) inUse() int64 { return l.n.Load() }
