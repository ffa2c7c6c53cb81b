package hedge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/internal/upgrade"
	"github.com/tailgate-dev/tailgate/replica"

	"github.com/tailgate-dev/tailgate/internal/opctx"
)

// HedgeHeader is set on every hedge attempt the Transport sends, with the
// attempt's index (1 for the first hedge) as its value, so servers can
// deprioritise or count duplicate work. A primary carries it only if the
// caller's request already did: a hedge from an earlier hop stays marked.
const HedgeHeader = "Tailgate-Hedge"

// DefaultMaxBodyBytes is the Transport's default response body limit.
const DefaultMaxBodyBytes = 1 << 20

// TransportConfig configures a Transport. The zero value hedges GET and HEAD
// requests to the URL they name, under the zero Policy, each class of
// request with its own delay.
type TransportConfig struct {
	// Base sends each attempt. Nil means a clone of http.DefaultTransport
	// whose idle pool keeps 64 connections per host, so that hedges and
	// cancelled losers do not churn connections. Base must return promptly
	// once a request's context is cancelled, as net/http's does: the
	// primary runs on the caller's goroutine, and a winning hedge is
	// returned only once the cancelled primary has returned.
	Base http.RoundTripper

	// Policy is each class's Hedger's policy (see Classes); its Budget is
	// shared by every class. Ignored when Classes is set.
	Policy Policy

	// Classes, when non-nil, holds the per-class Hedgers the Transport
	// uses, in place of NewClasses(Policy): Transports that share one
	// share what the classes have learnt and their Budget.
	Classes *Classes

	// Class names a request's class: requests of one class share a latency
	// window, a delay and an overload gate. Return one string for every
	// request to have one class. Nil means DefaultClass, the method and
	// path template, looked up without allocating (Classes.ForRequest).
	Class func(*http.Request) string

	// Targets are base URLs of interchangeable replicas ("http://10.0.0.1:8080",
	// optionally with a path prefix). Each attempt replaces the request's
	// scheme and host (and prefixes the path) with its target's. Attempts
	// are steered over a replica.Set of the targets (see Replicas): the
	// primary to a replica by latency and load (power of two choices), a
	// hedge to the fastest replica the request has not used, a replica
	// whose breaker is open skipped, and a replica whose median latency
	// stays well above its peers' put on probation (replica.Probation):
	// it gets no primary, and now and then a copy of a read just answered
	// (marked ShadowHeader, in the background, at most 4 at once, each
	// within 1s) measures it until it recovers. Empty means every attempt
	// goes to the request's own URL, for a load balancer that spreads them.
	Targets []string

	// Replicas, instead of Targets, is the replica set to steer over; its
	// replicas' names are the targets. Share one Set between Transports to
	// share what it learns; configure its breakers and probation with
	// replica.New (the Transport sends the shadows that probation needs).
	// A Transport built from Targets makes a Set with replica.Config's
	// defaults and probation on.
	Replicas *replica.Set

	// MaxBodyBytes bounds each response body, which the Transport reads in
	// full before choosing a winner (so a response cut short cannot win).
	// An attempt whose body is larger fails with ErrResponseTooLarge.
	// Default DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// Accept decides whether a complete response wins: nil means it does,
	// an error says why not. Nil means DefaultAccept. If no attempt is
	// accepted, RoundTrip returns the last refused response as is (a
	// server's answer is never displaced by a later transport error,
	// unless its verdict wraps ErrNotAnAnswer). Accept runs in the
	// goroutine of the attempt it judges, possibly concurrently.
	Accept func(*http.Response) error

	// SafeMethods lists methods besides GET and HEAD that the caller
	// declares safe to send twice. Requests of other methods pass through
	// unhedged. A request with a body is hedged only if it has GetBody,
	// which supplies each attempt its own copy.
	SafeMethods []string

	// OnReceipt, when non-nil, receives each hedged request's final receipt,
	// possibly after RoundTrip has returned. See also WithReceipt.
	OnReceipt func(*http.Request, Receipt)
}

// Transport is an http.RoundTripper that hedges requests. It reads each
// response body in full (bounded by MaxBodyBytes) inside its attempt, so the
// winner is a complete response; the winner's buffer is freed when the
// caller closes the body, and losers are cancelled and released in the
// background. A server that switches protocols (101) for a request that
// asked for no upgrade fails the attempt at once (ErrUnexpectedUpgrade),
// its connection closed. Safe for concurrent use.
type Transport struct {
	base    http.RoundTripper
	classes *Classes
	class   func(*http.Request) string
	set     *replica.Set // nil without targets
	targets []*url.URL
	names   []string
	limit   int64
	accept  func(*http.Response) error
	safe    map[string]bool
	onRcpt  func(*http.Request, Receipt)
	shadows shadows
}

// NewTransport validates cfg and returns a Transport.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	t := &Transport{
		base:    cfg.Base,
		classes: cfg.Classes,
		class:   cfg.Class,
		set:     cfg.Replicas,
		limit:   cfg.MaxBodyBytes,
		accept:  cfg.Accept,
		onRcpt:  cfg.OnReceipt,
	}
	if t.base == nil {
		t.base = NewBaseTransport()
	}
	if t.classes == nil {
		var err error
		if t.classes, err = NewClasses(cfg.Policy); err != nil {
			return nil, err
		}
	}
	if t.limit == 0 {
		t.limit = DefaultMaxBodyBytes
	}
	if t.limit < 0 {
		return nil, fmt.Errorf("%w: negative body limit %d", ErrInvalid, t.limit)
	}
	names := cfg.Targets
	switch {
	case t.set != nil && len(names) > 0:
		return nil, fmt.Errorf("%w: Targets and Replicas are exclusive", ErrInvalid)
	case t.set != nil:
		names = make([]string, t.set.Len())
		for i := range names {
			names[i] = t.set.Name(i)
		}
	}
	seen := make(map[string]bool, len(names))
	for _, s := range names {
		u, err := parseTarget(s)
		if err != nil {
			return nil, err
		}
		if seen[u.String()] {
			return nil, fmt.Errorf("%w: duplicate target %q", ErrInvalid, s)
		}
		seen[u.String()] = true
		t.targets = append(t.targets, u)
		t.names = append(t.names, u.String())
	}
	if t.set == nil && len(t.names) > 0 {
		set, err := replica.New(t.names, replica.Config{Probation: replica.Probation{Enabled: true}})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		t.set = set
	}
	for _, m := range cfg.SafeMethods {
		if m == "" || strings.ToUpper(m) != m || strings.ContainsAny(m, " \t\r\n") {
			return nil, fmt.Errorf("%w: safe method %q must be an upper-case HTTP method", ErrInvalid, m)
		}
		if m == http.MethodConnect {
			return nil, fmt.Errorf("%w: CONNECT cannot be hedged", ErrInvalid)
		}
		if t.safe == nil {
			t.safe = make(map[string]bool)
		}
		t.safe[m] = true
	}
	return t, nil
}

// NewBaseTransport returns the Transport's default base: a clone of
// http.DefaultTransport with an idle pool sized for hedging.
func NewBaseTransport() *http.Transport {
	bt := http.DefaultTransport.(*http.Transport).Clone()
	bt.MaxIdleConns = 512
	bt.MaxIdleConnsPerHost = 64
	return bt
}

// Classes returns the per-class Hedgers the Transport uses.
func (t *Transport) Classes() *Classes { return t.classes }

// Replicas returns the replica set attempts are steered over, nil without
// targets.
func (t *Transport) Replicas() *replica.Set { return t.set }

// hedger returns the Hedger of req's class.
func (t *Transport) hedger(req *http.Request) *Hedger {
	if t.class == nil {
		return t.classes.ForRequest(req)
	}
	return t.classes.Hedger(t.class(req))
}

type receiptKey struct{}

// WithReceipt returns a context that makes the Transport (or Do, through the
// caller's own OnReceipt) hand the final receipt of the request made with it
// to f. f may run after RoundTrip returns, in another goroutine.
func WithReceipt(ctx context.Context, f func(Receipt)) context.Context {
	return context.WithValue(ctx, receiptKey{}, f)
}

// RoundTrip implements http.RoundTripper. A response that no attempt
// could better, though Accept refused it (a 503, say), is returned as the
// server's answer, with a nil error, as http.Client expects.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripWith(req, nil, nil)
	if resp != nil {
		return resp, nil // the last refused response, when err is not nil
	}
	return nil, err
}

// RoundTripWith is RoundTrip under h (nil: the Hedger of req's class),
// steered by s (nil: the Transport's own steering over its Targets). A
// proxy steers each request with its own state: replica.Route over its
// set, plus its limits. s may also have either of these methods:
//
//	Rewrite(a Attempt, out *http.Request)
//	Suppressed(a Attempt, r SuppressReason)
//
// Rewrite may change attempt a's outgoing request as the attempt is
// launched (after Pick, in launch order, with the request's lock held: it
// must not block): its URL already names a's target and a hedge carries
// HedgeHeader. It is also called, with the zero Attempt, for a request
// that passes through unhedged (see SafeMethods). A hedge's request has
// its own header map; the primary's and a passed-through one's share the
// caller's (clone it before changing it unless the caller's request is
// yours). Suppressed is told of each hedge the request wanted and did not
// send, and why (the Observer's EventSuppress says the same for every
// request at once); a's Target is not meaningful. It is called with the
// request's lock held: it must not block.
//
// A request that is not hedged passes through, its target picked by s.
// When no response is accepted, it returns the last one refused together
// with an error wrapping ErrNotAccepted (both non-nil: the caller closes
// the response); on any other error the response is nil.
func (t *Transport) RoundTripWith(req *http.Request, h *Hedger, s Steering) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("hedge: request has no URL")
	}
	own := s == nil && t.set != nil // the Transport's own steering
	var rt *roundTrip
	var tt *targetTrip
	var fn calls[*http.Response] // rt, or its targetTrip
	if len(t.targets) > 0 || own {
		tt = targetTrips.Get().(*targetTrip)
		p := new(primaryURL)
		rt, tt.url = &tt.roundTrip, &p.url
		rt.p = &p.primary
		fn = tt
		if own {
			tt.steer.Route = t.set.Route(nil, false)
			s = tt
		}
	} else {
		rt = roundTrips.Get().(*roundTrip)
		rt.p = new(primary)
		fn = rt
	}
	rt.t, rt.req = t, req
	if !t.Hedges(req) {
		return rt.passThrough(s)
	}
	if h == nil {
		h = t.hedger(req)
	}
	rt.op.init(req.Context(), h, fn, s, 0, &rt.p.own, &rt.p.ctx)
	resp, err := rt.op.run()
	if own {
		t.shadow(req) // a replica on probation may be due a copy, to measure it
	}
	closeBody(req) // attempts used copies from GetBody
	if rt.op.reusable() {
		// Nothing refers to rt any more: what the request handed out (its
		// primary's context, request and body, and the contexts net/http
		// derived from them) is in rt.p, which is not reused.
		if tt != nil {
			*tt = targetTrip{}
			targetTrips.Put(tt)
		} else {
			*rt = roundTrip{}
			roundTrips.Put(rt)
		}
	}
	if err != nil {
		if resp != nil && errors.Is(err, ErrNotAccepted) {
			return resp, err
		}
		if resp != nil {
			resp.Body.Close()
		}
		return nil, err
	}
	return resp, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// Hedges reports whether the Transport hedges req; a request it does not
// passes through, once. It hedges GET, HEAD and the SafeMethods, without a
// protocol switch, and with a body only if the request has GetBody.
func (t *Transport) Hedges(req *http.Request) bool {
	if upgrade.Requested(req.Header) {
		// A protocol switch hands over the connection itself: it must not
		// be duplicated, and its body cannot be buffered.
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead:
	default:
		if !t.safe[req.Method] {
			return false
		}
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// passThrough sends a request that may not be duplicated, once, to the
// target s picks (the first without a Steering). A stray 101 fails it as
// it fails a hedged attempt (see internal/upgrade).
func (rt *roundTrip) passThrough(s Steering) (*http.Response, error) {
	t, req := rt.t, rt.req
	if len(t.targets) == 0 && s == nil {
		return roundTripOnce(t.base, req)
	}
	a := Attempt{Trigger: TriggerPrimary}
	if s != nil {
		var err error
		rt.op.start = time.Now() // for the Transport's own steering (pickedAt 0)
		if a.Target, err = s.Pick(a, nil); err != nil {
			closeBody(req)
			if errors.Is(err, ErrNoTarget) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", ErrNoTarget, err)
		}
	}
	out := req.WithContext(req.Context())
	if len(t.targets) > 0 {
		u := new(url.URL)
		rewriteURL(u, req.URL, t.targets[a.Target])
		out.URL = u
		out.Host = ""
	}
	rewrite(s, a, out)
	start := time.Now()
	resp, err := roundTripOnce(t.base, out)
	if s != nil {
		verdict := err
		if err == nil {
			verdict = rt.accept(resp, nil)
		}
		s.Done(a, Result{Verdict: verdict, Elapsed: time.Since(start), Response: resp})
	}
	return resp, err
}

func roundTripOnce(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if err := upgrade.RefuseStray(req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// roundTrip is the state of one hedged request. What its primary hands
// out (p) is allocated for each request; the rest is reused, from
// roundTrips (or targetTrips), when the request neither hedged nor left
// anything running (operation.reusable), which is most requests: every
// byte a request allocates costs about half a nanosecond of allocation
// and garbage collection (BenchmarkInMemory: see docs/performance.md).
// Hedges allocate their own.
type roundTrip struct {
	op  operation[*http.Response]
	t   *Transport
	req *http.Request
	p   *primary
	// Requests built at launch, allocated with the first hedge: the
	// hedges', and why the primary's could not be (rarely: its request in
	// p is used otherwise).
	prepared *[MaxAttemptsCap]preparedRequest
}

// primary is what a request's primary attempt hands out, new for every
// request since whoever got it may keep it: its context (and the
// operation's own, which it derives from), its request (whose URL is a
// primaryURL's with targets) and its body (in the response the caller
// gets).
type primary struct {
	own  opctx.Ctx
	ctx  attemptCtx
	out  http.Request // see request
	body bufferedBody
}

// primaryURL is a primary with its rewritten URL, for a Transport with
// targets.
type primaryURL struct {
	primary
	url url.URL
}

// targetTrip is a roundTrip over the Transport's targets, with the
// steering over the Transport's set (steer), when it steers.
type targetTrip struct {
	roundTrip
	url   *url.URL // the primary's, in its primaryURL
	steer RouteSteering
}

// roundTrips and targetTrips hold states of requests that are done (see
// roundTrip).
var (
	roundTrips  = sync.Pool{New: func() any { return new(roundTrip) }}
	targetTrips = sync.Pool{New: func() any { return new(targetTrip) }}
)

// Pick implements Steering over the Transport's targets (RouteSteering).
func (tt *targetTrip) Pick(a Attempt, used []int) (int, error) {
	// The operation read the clock as it asked: on a virtual machine a
	// read of the clock costs as much as the rest of the pick.
	return tt.steer.PickAt(a, used, tt.op.start.Add(tt.op.pickedAt))
}

// Done implements Steering over the Transport's targets.
func (tt *targetTrip) Done(a Attempt, r Result) { tt.steer.Done(a, r) }

// ReplicaOutcome says what r means for its replica's breaker and latency
// (replica.Route.Done): an accepted answer is a Success, and so is a body
// over the limit (the replica answered); an attempt cancelled (a lost
// race, a caller gone, a deadline) is Canceled, neutral for the breaker
// and its elapsed time a lower bound for the latency; an answer that is
// no answer (ErrNotAnAnswer: a tied copy dropped for its twin) is Canceled
// with no time at all, since how soon its twin started says nothing of
// its replica; anything else (a transport error, a 5xx, a stray 101, a
// header block over the limit) is a Failure.
func (r Result) ReplicaOutcome() (replica.Outcome, time.Duration) {
	switch v := r.Verdict; {
	case v == nil, errors.Is(v, ErrResponseTooLarge):
		return replica.Success, r.Elapsed
	case errors.Is(v, ErrNotAnAnswer):
		return replica.Canceled, 0
	case errors.Is(v, context.Canceled), errors.Is(v, context.DeadlineExceeded):
		return replica.Canceled, r.Elapsed
	}
	return replica.Failure, r.Elapsed
}

// request builds attempt a's request from the caller's, at launch (see
// prepare), and lets the caller's Steering rewrite it.
//
// detached says the attempt runs in its own goroutine: its request then
// gets its own URL and header map, not the caller's, since a loser may
// outlive RoundTrip, and by then the caller may reuse req.
//
// u is where the primary's URL goes when it is rewritten (its targetTrip's).
func (rt *roundTrip) request(ctx context.Context, a Attempt, detached bool, u *url.URL) (*http.Request, error) {
	req, t := rt.req, rt.t
	var out *http.Request
	if a.IsHedge() {
		out = req.WithContext(ctx)
	} else {
		// WithContext is inlined, so its copy does not escape and this
		// stores it in rt.p: the primary's request costs no allocation of
		// its own.
		rt.p.out = *req.WithContext(ctx)
		out = &rt.p.out
	}
	if len(t.targets) > 0 || detached {
		if a.IsHedge() || u == nil {
			u = new(url.URL)
		}
		if len(t.targets) > 0 {
			rewriteURL(u, req.URL, t.targets[a.Target])
			out.Host = ""
		} else {
			*u = *req.URL
		}
		out.URL = u
	}
	if detached {
		out.Header = req.Header.Clone()
		if out.Header == nil {
			out.Header = make(http.Header, 1)
		}
	}
	if a.IsHedge() {
		out.Header.Set(HedgeHeader, strconv.Itoa(a.Index))
	}
	if req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("hedge: GetBody: %w", err)
		}
		out.Body = body
	}
	rewrite(rt.op.steer, a, out)
	return out, nil
}

// rewrite lets s, the request's Steering, rewrite attempt a's request, if
// it has a Rewrite method (the caller's may; the Transport's own has none).
func rewrite(s Steering, a Attempt, out *http.Request) {
	if w, ok := s.(interface {
		Rewrite(a Attempt, out *http.Request)
	}); ok {
		w.Rewrite(a, out)
	}
}

// preparedRequest is a request built at launch, or why it could not be.
type preparedRequest struct {
	req *http.Request
	err error
}

// prepare builds attempt a's request as it is launched, under the
// operation's lock: so the hooks' Rewrite of each attempt runs in launch
// order, never concurrently with another attempt's.
func (rt *roundTrip) prepare(ctx context.Context, a Attempt) { rt.prepareWith(ctx, a, nil) }

// prepare is roundTrip's, the primary's URL in tt.
func (tt *targetTrip) prepare(ctx context.Context, a Attempt) {
	tt.prepareWith(ctx, a, tt.url)
}

// prepareWith is prepare, the primary's URL, if rewritten, at u.
func (rt *roundTrip) prepareWith(ctx context.Context, a Attempt, u *url.URL) {
	if a.Index == 0 {
		if _, err := rt.request(ctx, a, false, u); err != nil { // in rt.p.out
			// No request, and why, where call finds it without the lock.
			rt.p.out = http.Request{}
			rt.preparedAt(0).err = err
		}
		return
	}
	req, err := rt.request(ctx, a, true, nil)
	*rt.preparedAt(a.Index) = preparedRequest{req, err}
}

// preparedAt returns where attempt i's prepared request is kept.
func (rt *roundTrip) preparedAt(i int) *preparedRequest {
	if rt.prepared == nil {
		rt.prepared = new([MaxAttemptsCap]preparedRequest)
	}
	return &rt.prepared[i]
}

func (rt *roundTrip) done(a Attempt, resp *http.Response, verdict error, elapsed time.Duration) {
	if s := rt.op.steer; s != nil {
		s.Done(a, Result{Verdict: verdict, Elapsed: elapsed, Response: resp})
	}
}

// call performs attempt a: sends the request prepare built, and reads the
// body in full.
func (rt *roundTrip) call(ctx context.Context, a Attempt) (*http.Response, error) {
	out := &rt.p.out
	var err error
	if a.IsHedge() {
		p := &rt.prepared[a.Index]
		out, err = p.req, p.err
	} else if out.URL == nil {
		err = rt.prepared[0].err // see prepare
	}
	if err != nil {
		return nil, err
	}
	t := rt.t
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	if err := upgrade.RefuseStray(out, resp); err != nil {
		return nil, err // before any read: a switched body never ends
	}
	resp.Request = rt.req
	if out.Method == http.MethodHead {
		return resp, nil // no body; Content-Length describes the GET
	}
	b := &rt.p.body
	if a.IsHedge() {
		b = new(bufferedBody)
	}
	if err := b.fill(resp, t.limit); err != nil {
		return nil, err
	}
	resp.Body = b
	return resp, nil
}

func (rt *roundTrip) accept(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	if rt.t.accept != nil {
		return rt.t.accept(resp)
	}
	return DefaultAccept(resp)
}

// DefaultAccept is the Transport's acceptance check when Accept is nil: a
// final status (200 or more) below 500 wins. A 1xx never wins: the
// Transport fails a stray 101 before Accept sees it (ErrUnexpectedUpgrade),
// but another caller's base may return one.
func DefaultAccept(resp *http.Response) error {
	if resp.StatusCode >= 500 || resp.StatusCode < 200 {
		return statusError(resp.StatusCode)
	}
	return nil
}

func (rt *roundTrip) release(resp *http.Response) {
	if resp != nil {
		resp.Body.Close()
	}
}

func (rt *roundTrip) wantsReceipt() bool { return rt.t.onRcpt != nil || rt.rcpt() != nil }

// rcpt returns the function WithReceipt put in the request's context, if
// any: read from the context the operation keeps (not from the request,
// which the caller may reuse once RoundTrip has returned), and not kept.
func (rt *roundTrip) rcpt() func(Receipt) {
	f, _ := rt.op.parent().Value(receiptKey{}).(func(Receipt))
	return f
}

func (rt *roundTrip) receipt(r Receipt) {
	if rt.t.onRcpt != nil {
		rt.t.onRcpt(rt.req, r)
	}
	if f := rt.rcpt(); f != nil {
		f(r)
	}
}

func (rt *roundTrip) targets() []string { return rt.t.names }

// statusError is the verdict on a response refused for its status.
type statusError int

func (s statusError) Error() string {
	return "hedge: status " + strconv.Itoa(int(s))
}
