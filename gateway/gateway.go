package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
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
	exchanges sync.Pool // *exchange

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
	var base http.RoundTripper = &deadline.Transport{Base: g.base, Slack: stampSlack}
	acceptFunc := accept
	if g.tied {
		base, acceptFunc = &tieBase{next: base}, acceptTied
	}
	g.transport, err = hedge.NewTransport(hedge.TransportConfig{
		Base:         base,
		Hedger:       g.hedger,
		Targets:      cfg.Backends,
		MaxBodyBytes: cfg.MaxResponseBytes,
		Accept:       acceptFunc,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if g.set, err = replica.New(cfg.Backends, cfg.Replica); err != nil {
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
	code := g.serve(w, r, start)
	g.metrics.observeRequest(code, time.Since(start))
	if code == 0 {
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

// serve handles r, which arrived at start, and returns the status written,
// or 0 when the client left before an answer.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, start time.Time) int {
	if !g.requests.tryAcquire() {
		g.metrics.reject(rejectRequests)
		w.Header().Set("Retry-After", "1")
		return writeError(w, http.StatusServiceUnavailable, "overloaded: too many requests in flight")
	}
	defer g.requests.release()

	switch r.Method {
	case http.MethodGet, http.MethodHead:
	default:
		g.metrics.reject(rejectMethod)
		w.Header().Set("Allow", "GET, HEAD")
		return writeError(w, http.StatusMethodNotAllowed, "only GET and HEAD are proxied")
	}
	// Only origin-form targets ("/path?query"): an absolute-form or
	// authority-form target must never choose where the request goes.
	if !strings.HasPrefix(r.RequestURI, "/") {
		g.metrics.reject(rejectTarget)
		return writeError(w, http.StatusBadRequest, "only origin-form request targets (/path?query) are proxied")
	}
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		g.metrics.reject(rejectBody)
		return writeError(w, http.StatusBadRequest, "requests with a body are not proxied: reads only")
	}
	client := r.Context()
	budget, budgetValue := g.timeout, g.timeoutValue
	if d, ok, err := deadline.FromHeader(r.Header); ok {
		// The client's own deadline: work that cannot finish within it is
		// refused now rather than sent to replicas that would toil for a
		// caller already gone.
		if err != nil {
			g.metrics.reject(rejectDeadline)
			return writeError(w, http.StatusBadRequest, err.Error())
		}
		if d <= 0 {
			g.metrics.reject(rejectDeadline)
			return writeError(w, http.StatusGatewayTimeout, "deadline: "+d.String()+" left, need more than 0s")
		}
		// While nothing is known of the replicas (0), nothing is refused
		// on their account; nor when the policy ignores deadlines.
		if g.checkExpected {
			if need := g.expectedLatency(start); need > 0 && d < need {
				g.metrics.reject(rejectDeadline)
				return writeError(w, http.StatusGatewayTimeout, "deadline: "+d.String()+" left, replicas need about "+need.String())
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
	if !g.attempts.tryAcquire() {
		g.metrics.reject(rejectAttempts)
		w.Header().Set("Retry-After", "1")
		return writeError(w, http.StatusServiceUnavailable, "overloaded: too many backend attempts in flight")
	}

	x := g.exchange()
	// The request to forward lives in the pooled exchange: a copy of r
	// (with r's context; the engine adds the timeout) whose URL, header and
	// body are replaced. A tied read's context also carries its tie.
	out := &x.req
	if g.tied {
		x.tc = &tieCtx{Context: r.Context()}
		*out = *r.WithContext(x.tc)
	} else {
		*out = *r
	}
	out.URL = x.target(r)
	out.Header = forwardedHeaders(r)
	if budgetValue != nil {
		out.Header[deadline.Header] = budgetValue // at most the time left as the primary is sent
	} else {
		delete(out.Header, deadline.Header) // the client's, if any: the Transport writes ours
	}
	out.Host = ""
	out.RequestURI = ""
	out.Body = http.NoBody
	out.ContentLength = 0
	out.Close = false

	resp, err := g.transport.RoundTripWith(out, x)
	if x.tc != nil {
		g.settleTie(x, resp, err)
	}
	if err == nil && !g.accepted(resp) {
		// Nothing acceptable came back: the engine hands over the last
		// refused answer (a 5xx, a stray 1xx). Every attempt failed.
		err = fmt.Errorf("replica answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		if g.tied && tied.Dropped(resp) {
			// Every copy was dropped (a failure of the copy that ran would
			// have been returned instead: a dropped answer is not one).
			err = errors.New("the last answer was a copy dropped for its twin")
		}
		resp.Body.Close()
		resp = nil
	}
	if !x.started {
		// The primary never started (no replica, or the client had gone
		// before the engine ran): its slot and reference are ours.
		g.attempts.release()
		x.unref()
	}
	if err == nil {
		defer resp.Body.Close()
		x.unref()
		code := g.writeResponse(w, r, resp)
		// The client has its answer (net/http sends what is buffered when
		// the handler returns, a few microseconds on): a replica on
		// probation may be due a copy of the request, to measure it.
		g.shadow(r)
		return code
	}
	if errors.Is(err, hedge.ErrNoTarget) {
		x.unref()
		return writeError(w, http.StatusBadGateway, "no replica available: every circuit breaker is open")
	}
	x.unref()
	switch {
	case client.Err() != nil:
		g.log.Debug("client left", "path", r.URL.Path, "err", err)
		return 0
	case errors.Is(err, context.DeadlineExceeded):
		g.log.Warn("request timed out", "path", r.URL.Path, "timeout", budget)
		return writeError(w, http.StatusGatewayTimeout, "timeout: no acceptable answer within "+budget.String())
	case errors.Is(err, hedge.ErrResponseTooLarge):
		g.log.Warn("response too large", "path", r.URL.Path, "limit", g.cfg.MaxResponseBytes)
		return writeError(w, http.StatusBadGateway, "backend response larger than "+strconv.FormatInt(g.cfg.MaxResponseBytes, 10)+" bytes")
	default:
		g.log.Warn("all attempts failed", "path", r.URL.Path, "err", err)
		return writeError(w, http.StatusBadGateway, "all attempts failed: "+cause(err))
	}
}

// writeResponse forwards a buffered backend response.
func (g *Gateway) writeResponse(w http.ResponseWriter, r *http.Request, resp *http.Response) int {
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
	if r.Method != http.MethodHead {
		if _, err := io.Copy(w, resp.Body); err != nil {
			g.log.Debug("writing response", "path", r.URL.Path, "err", err)
		}
	}
	return resp.StatusCode
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

// writeError writes a short JSON error and returns code.
func writeError(w http.ResponseWriter, code int, msg string) int {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	w.Write(append(b, '\n'))
	return code
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

// exchange is one proxied request as the hedging engine sees it: it picks
// replicas, holds their breaker tickets and attempt slots, and feeds each
// attempt's outcome back. It lives until the handler and every attempt
// are done with it, then returns to the pool.
type exchange struct {
	g       *Gateway
	req     http.Request
	url     url.URL
	tickets [hedge.MaxAttemptsCap]replica.Ticket
	picked  [hedge.MaxAttemptsCap]time.Time // when each attempt's replica was picked
	refs    atomic.Int32                    // the handler and each attempt still running
	started bool                            // the primary was picked (set on the handler's goroutine)

	// Tied mode only (see tied.go).
	tc       *tieCtx                       // the read's tie, in its context
	twinHeld bool                          // tickets[1] is the twin's, held for the second copy, not yet given to an attempt
	first    atomic.Pointer[http.Response] // the first copy's answer, to tell which copy won
	exclude  [1]int                        // PickAlternate's argument for the twin
}

func (g *Gateway) exchange() *exchange {
	x, _ := g.exchanges.Get().(*exchange)
	if x == nil {
		x = &exchange{g: g}
	}
	x.refs.Store(2) // the handler and the primary
	return x
}

func (x *exchange) unref() {
	if x.refs.Add(-1) == 0 {
		x.req = http.Request{}
		x.url = url.URL{}
		x.tickets = [hedge.MaxAttemptsCap]replica.Ticket{}
		x.picked = [hedge.MaxAttemptsCap]time.Time{}
		x.started = false
		if x.tc != nil {
			x.tc, x.twinHeld = nil, false
			x.first.Store(nil)
		}
		x.g.exchanges.Put(x)
	}
}

// target returns the URL to forward r to (see targetURL), kept in x.
func (x *exchange) target(r *http.Request) *url.URL {
	x.url = targetURL(r)
	return &x.url
}

// targetURL returns the URL to forward r to: its path and query byte for
// byte, as the client sent them (the scheme and host are the replica's,
// set per attempt).
func targetURL(r *http.Request) url.URL {
	path, query, hasQuery := strings.Cut(r.RequestURI, "?")
	forceQuery := hasQuery && query == "" // keep a bare "?"
	if strings.HasPrefix(path, "//") {
		// An opaque "//x" would read as a host; keep the parsed form.
		return url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: query, ForceQuery: forceQuery}
	}
	return url.URL{Opaque: path, RawQuery: query, ForceQuery: forceQuery}
}

// Pick implements hedge.RequestHooks: the primary by latency, a hedge to a
// replica no earlier attempt used. A hedge never goes to a replica on
// probation; an attempt after a failure does when nothing else is left (a
// slow answer beats an error). In tied mode the second copy's replica is
// picked with the primary (see tie).
func (x *exchange) Pick(a hedge.Attempt, used []int) (int, bool) {
	now := time.Now()
	var i int
	var t replica.Ticket
	var ok bool
	switch {
	case a.Index == 0:
		i, t, ok = x.g.set.PickPrimary(now)
		if ok && x.tc != nil {
			x.tie(now, i)
		}
	case x.tc != nil:
		return x.pickTwin(now, a, used)
	case a.Trigger == hedge.TriggerFailure:
		i, t, ok = x.g.set.PickRetry(now, used)
	default:
		i, t, ok = x.g.set.PickAlternate(now, used)
	}
	if ok {
		x.tickets[a.Index], x.picked[a.Index] = t, now
		if a.Index == 0 {
			x.started = true
		}
	}
	return i, ok
}

// Admit implements hedge.RequestHooks: a hedge needs a free attempt slot.
func (x *exchange) Admit(a hedge.Attempt) bool {
	if !x.g.attempts.tryAcquire() {
		// Given back as picked: it took no time, so it is no latency
		// sample, not even a lower bound.
		x.g.set.Done(x.tickets[a.Index], replica.Canceled, x.picked[a.Index])
		if x.tc != nil {
			x.tc.tied[a.Index] = false // not sent after all
		}
		return false
	}
	if x.tc != nil && x.tc.tied[a.Index] {
		x.g.metrics.tiedCopy(a.Index)
	}
	x.refs.Add(1)
	return true
}

// Done implements hedge.RequestHooks: the attempt's outcome goes to its
// replica's breaker and latency, and its slot is freed.
func (x *exchange) Done(a hedge.Attempt, resp *http.Response, err error, elapsed time.Duration) {
	// The attempt started as its replica was picked: no clock read needed.
	// (A tied second copy's replica was picked with the primary: picked
	// is then its ticket's start, and the latency the set records, from
	// that start to the time given, is still elapsed.)
	o, end := outcome(resp, err), x.picked[a.Index].Add(elapsed)
	if x.tc != nil {
		o, end = x.tiedDone(a, resp, o, end)
	}
	x.g.set.Done(x.tickets[a.Index], o, end)
	x.g.attempts.release()
	x.unref()
}

// acceptable is the gateway's winner check: a final status (not 1xx: a
// stray 101 would hand the client a connection it never asked for) below
// 500.
func acceptable(resp *http.Response) bool {
	return resp.StatusCode >= 200 && resp.StatusCode < 500
}

// accepted reports whether resp, returned by the engine, won: in tied
// mode an answer dropped for its twin never does, whatever its status.
func (g *Gateway) accepted(resp *http.Response) bool {
	return acceptable(resp) && !(g.tied && tied.Dropped(resp))
}

// accept is acceptable as a hedge.TransportConfig.Accept.
func accept(resp *http.Response) error {
	if !acceptable(resp) {
		return fmt.Errorf("gateway: status %d", resp.StatusCode)
	}
	return nil
}

// outcome classifies an attempt for the breaker: transport errors and 5xx
// are failures, a cancellation (a lost race, a client gone, a deadline) is
// neutral, anything else (a too-large body included: the replica answered)
// is a success.
func outcome(resp *http.Response, err error) replica.Outcome {
	switch {
	case err == nil && !acceptable(resp):
		return replica.Failure
	case err == nil, errors.Is(err, hedge.ErrResponseTooLarge):
		return replica.Success
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return replica.Canceled
	}
	return replica.Failure
}
