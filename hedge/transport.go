package hedge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// HedgeHeader is set on every hedge attempt the Transport sends, with the
// attempt's index (1 for the first hedge) as its value, so servers can
// deprioritise or count duplicate work. A primary carries it only if the
// caller's request already did: a hedge from an earlier hop stays marked.
const HedgeHeader = "Tailgate-Hedge"

// DefaultMaxBodyBytes is the Transport's default response body limit.
const DefaultMaxBodyBytes = 1 << 20

// TransportConfig configures a Transport. The zero value hedges GET and HEAD
// requests to the URL they name, under the zero Policy.
type TransportConfig struct {
	// Base sends each attempt. Nil means a clone of http.DefaultTransport
	// whose idle pool keeps 64 connections per host, so that hedges and
	// cancelled losers do not churn connections.
	Base http.RoundTripper

	// Hedger holds the policy and the state shared across requests. Nil
	// means New(Policy{}).
	Hedger *Hedger

	// Targets are base URLs of interchangeable replicas ("http://10.0.0.1:8080",
	// optionally with a path prefix). Each attempt replaces the request's
	// scheme and host (and prefixes the path) with its target's, and a hedge
	// goes to a different target than the attempts before it while one is
	// left. Empty means every attempt goes to the request's own URL, for a
	// load balancer that spreads them.
	Targets []string

	// RotatePrimary spreads primaries round-robin over Targets. By default
	// Targets[0] is the primary and the others are alternates.
	RotatePrimary bool

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

	// InlinePrimary sends the primary from the caller's goroutine, which
	// saves a goroutine hand-off per request (Op.InlinePrimary is the same
	// choice for Do); a winning hedge is then returned only once the
	// cancelled primary has returned. A Transport whose Base is nil or an
	// *http.Transport always does, since net/http returns at once on
	// cancellation; set it for another Base that does too.
	InlinePrimary bool
}

// Transport is an http.RoundTripper that hedges requests. It reads each
// response body in full (bounded by MaxBodyBytes) inside its attempt, so the
// winner is a complete response; the winner's buffer is freed when the
// caller closes the body, and losers are cancelled and released in the
// background. A server that switches protocols (101) for a request that
// asked for no upgrade fails the attempt at once (ErrUnexpectedUpgrade),
// its connection closed. Safe for concurrent use.
type Transport struct {
	base     http.RoundTripper
	h        *Hedger
	targets  []*url.URL
	names    []string
	rotate   bool
	limit    int64
	accept   func(*http.Response) error
	safe     map[string]bool
	onRcpt   func(*http.Request, Receipt)
	hooks    hooks // shared by every request
	nextPrim atomic.Uint64
}

// NewTransport validates cfg and returns a Transport.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	t := &Transport{
		base:   cfg.Base,
		h:      cfg.Hedger,
		rotate: cfg.RotatePrimary,
		limit:  cfg.MaxBodyBytes,
		accept: cfg.Accept,
		onRcpt: cfg.OnReceipt,
	}
	if t.base == nil {
		t.base = NewBaseTransport()
	}
	_, promptBase := t.base.(*http.Transport)
	if t.h == nil {
		h, err := New(Policy{})
		if err != nil {
			return nil, err
		}
		t.h = h
	}
	if t.limit == 0 {
		t.limit = DefaultMaxBodyBytes
	}
	if t.limit < 0 {
		return nil, fmt.Errorf("%w: negative body limit %d", ErrInvalidPolicy, t.limit)
	}
	seen := make(map[string]bool, len(cfg.Targets))
	for _, s := range cfg.Targets {
		u, err := ParseTarget(s)
		if err != nil {
			return nil, err
		}
		if seen[u.String()] {
			return nil, fmt.Errorf("%w: duplicate target %q", ErrInvalidPolicy, s)
		}
		seen[u.String()] = true
		t.targets = append(t.targets, u)
		t.names = append(t.names, u.String())
	}
	t.hooks = hooks{targets: t.names, inline: cfg.InlinePrimary || promptBase}
	for _, m := range cfg.SafeMethods {
		if m == "" || strings.ToUpper(m) != m || strings.ContainsAny(m, " \t\r\n") {
			return nil, fmt.Errorf("%w: safe method %q must be an upper-case HTTP method", ErrInvalidPolicy, m)
		}
		if m == http.MethodConnect {
			return nil, fmt.Errorf("%w: CONNECT cannot be hedged", ErrInvalidPolicy)
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

// Hedger returns the Hedger the Transport uses.
func (t *Transport) Hedger() *Hedger { return t.h }

type receiptKey struct{}

// WithReceipt returns a context that makes the Transport (or Do, through the
// caller's own OnReceipt) hand the final receipt of the request made with it
// to f. f may run after RoundTrip returns, in another goroutine.
func WithReceipt(ctx context.Context, f func(Receipt)) context.Context {
	return context.WithValue(ctx, receiptKey{}, f)
}

// RequestHooks steer one request through RoundTripWith: which target each
// attempt uses, whether a hedge may start, what each attempt sends, and
// what came of it. A reverse proxy uses them to pick replicas, hold attempt
// slots, stamp headers and feed circuit breakers. Hooks may also
// implement SuppressHook.
type RequestHooks interface {
	// Pick chooses attempt a's target (an index into the Transport's
	// Targets); used holds the targets of the earlier attempts. For a hedge
	// it is called after the deadline, gate and budget checks, so it may
	// take resources for the attempt. False for the primary fails the
	// request with ErrNoTarget; for a hedge it suppresses the hedge. Called
	// with the request's lock held: it must not block.
	Pick(a Attempt, used []int) (target int, ok bool)
	// Admit is asked just before a hedge starts, after Pick; false
	// suppresses it (SuppressCapacity), and Admit must then release what
	// Pick took. Not asked for the primary. Must not block.
	Admit(a Attempt) bool
	// Rewrite may change attempt a's outgoing request as the attempt is
	// launched (after Pick and Admit, in launch order, with the request's
	// lock held: it must not block): its URL already names a's target and
	// a hedge carries HedgeHeader. It is also called, with the zero
	// Attempt, for a request that passes through unhedged (see
	// SafeMethods). A hedge's request has its own header map; an inline
	// primary's and a passed-through one's share the caller's (clone it
	// before changing it unless the caller's request is yours).
	Rewrite(a Attempt, out *http.Request)
	// Done reports each attempt that started, exactly once, when its round
	// trip and body read have ended: resp (body buffered, not to be kept;
	// nil if the attempt failed), the verdict (nil if resp was accepted,
	// else why not: Accept's error, or the attempt's own error, for a
	// cancelled loser its context's), and how long it took. It runs in the
	// attempt's goroutine, possibly after RoundTripWith has returned.
	Done(a Attempt, resp *http.Response, verdict error, elapsed time.Duration)
}

// SuppressHook is an optional interface of RequestHooks: hooks that
// implement it are told of each hedge their request wanted but did not
// send, and why, as the engine decides it. The Observer's EventSuppress
// reports the same for every request of a Hedger at once, with nothing to
// tell which request it was; this is per request, for what follows one
// read (a trace of it, say). a's Index is the attempt the hedge would have
// been and its Trigger why it was wanted; its Target is not meaningful.
// Suppressed is called with the request's lock held: it must not block.
type SuppressHook interface {
	Suppressed(a Attempt, reason SuppressReason)
}

// tellSuppressed tells s, an operation's steering, of hedge a suppressed
// for r, if it is a SuppressHook. Looked up at each suppression, not kept
// in a field: suppressions are rarer than operations, which a field would
// grow.
func tellSuppressed(s steering, a Attempt, r SuppressReason) {
	if h, ok := s.(SuppressHook); ok {
		h.Suppressed(Attempt{Index: a.Index, Trigger: a.Trigger}, r)
	}
}

// RefusedError is RoundTripWith's error when no attempt's response was
// accepted: Response is the last refused one, now the caller's to close,
// and Err (which it wraps) wraps ErrNotAccepted and the verdict.
type RefusedError struct {
	Response *http.Response
	Err      error
}

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// RoundTrip implements http.RoundTripper. A response that no attempt
// could better, though Accept refused it (a 503, say), is returned as the
// server's answer, with a nil error, as http.Client expects.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripWith(req, nil)
	if re, ok := err.(*RefusedError); ok {
		return re.Response, nil
	}
	return resp, err
}

// RoundTripWith is RoundTrip with per-request hooks; nil hooks mean the
// Transport's defaults. A request that is not hedged (see SafeMethods)
// passes through, seen only by Rewrite. When no response is accepted, the
// error is a *RefusedError holding the last one.
func (t *Transport) RoundTripWith(req *http.Request, hooks RequestHooks) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("hedge: request has no URL")
	}
	if !t.hedgeable(req) {
		return t.passThrough(req, hooks)
	}
	rt := &roundTrip{t: t, req: req, rh: hooks}
	// Read now: the receipt may come after RoundTrip has returned, when
	// the caller may be reusing req.
	rt.rcpt, _ = req.Context().Value(receiptKey{}).(func(Receipt))
	rt.op.ctx0 = &rt.p.ctx
	if hooks != nil {
		rt.op.steer = hooks
	}
	first := 0
	if t.rotate && len(t.targets) > 1 {
		first = int(t.nextPrim.Add(1)-1) % len(t.targets)
	}
	rt.op.init(req.Context(), t.h, rt, &t.hooks, first)
	resp, err := rt.op.run()
	closeBody(req) // attempts used copies from GetBody
	if err != nil {
		if resp != nil && errors.Is(err, ErrNotAccepted) {
			return nil, &RefusedError{Response: resp, Err: err}
		}
		if resp != nil {
			resp.Body.Close()
		}
		return nil, err
	}
	return resp, nil
}

// isUpgrade reports whether h asks for a protocol switch (WebSocket, h2c).
func isUpgrade(h http.Header) bool {
	if len(h["Upgrade"]) > 0 {
		return true
	}
	for _, v := range h["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

func (t *Transport) hedgeable(req *http.Request) bool {
	if isUpgrade(req.Header) {
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

// passThrough sends a request that may not be duplicated, once. A stray
// 101 fails it as it fails a hedged attempt (see RefuseStrayUpgrade).
func (t *Transport) passThrough(req *http.Request, hooks RequestHooks) (*http.Response, error) {
	if len(t.targets) == 0 && hooks == nil {
		return roundTripOnce(t.base, req)
	}
	out := req.WithContext(req.Context())
	if len(t.targets) > 0 {
		u := new(url.URL)
		rewriteURL(u, req.URL, t.targets[0])
		out.URL = u
		out.Host = ""
	}
	if hooks != nil {
		hooks.Rewrite(Attempt{}, out)
	}
	return roundTripOnce(t.base, out)
}

func roundTripOnce(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if err := RefuseStrayUpgrade(req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// RefuseStrayUpgrade returns nil unless resp switches protocols (101)
// although req asked for no upgrade; then it closes resp's body and
// returns an error wrapping ErrUnexpectedUpgrade. Anything that sends
// requests on its own with a Transport's base (a proxy's health checks,
// say) should call it before it reads a body.
//
// Why here, in the engine, and not in the gateway: for a 101 net/http's
// Transport hands the caller the raw connection as the body and stops
// watching the request's context (the caller owns the connection now).
// Reading that body to its end, as the Transport does to choose a complete
// winner, then lasts until the server closes: past every deadline, with
// the attempt's slot held, the breaker unaware, and (for an inline
// primary, which runs on the caller's goroutine) the caller itself stuck.
// Only Close ends it, so the first code to see the response must decide,
// before any read: that is the Transport, for every user of the library
// and for the gateway alike. A 101 without Upgrade headers (an empty body
// on a connection net/http closes) is refused too: it is not an answer.
func RefuseStrayUpgrade(req *http.Request, resp *http.Response) error {
	if resp.StatusCode != http.StatusSwitchingProtocols || isUpgrade(req.Header) {
		return nil
	}
	if resp.Body != nil {
		resp.Body.Close() // the connection itself, when net/http handed it over
	}
	if u := resp.Header.Get("Upgrade"); u != "" {
		return fmt.Errorf("%w (Upgrade: %.64q)", ErrUnexpectedUpgrade, u)
	}
	return ErrUnexpectedUpgrade
}

// roundTrip is the state of one hedged request, in one allocation with
// what the primary hands out (p). It is not pooled: over real HTTP a pool
// saved nothing measurable (BenchmarkTransportLoopback: 100.3µs and 62
// allocations pooled, 99.2µs and 62 without, medians of 6), and without
// one the primary's state needs no allocation of its own.
type roundTrip struct {
	op   operation[*http.Response]
	t    *Transport
	req  *http.Request
	rh   RequestHooks
	rcpt func(Receipt) // from the request's context (WithReceipt)
	p    primaryState
	// Requests built at launch: the primary's, and the hedges' (allocated
	// with the first hedge).
	primary  preparedRequest
	prepared *[MaxAttemptsCap]preparedRequest
}

// primaryState is what the primary attempt hands out: its context (held
// by net/http), its URL (in its request) and its body (in the response the
// caller gets). Hedges allocate their own.
type primaryState struct {
	ctx  attemptCtx
	url  url.URL
	body bufferedBody
}

// request builds attempt a's request from the caller's, at launch (see
// prepare), and lets the hooks rewrite it.
//
// detached says the attempt runs in its own goroutine: its request then
// gets its own URL and header map, not the caller's, since a loser may
// outlive RoundTrip, and by then the caller may reuse req.
func (rt *roundTrip) request(ctx context.Context, a Attempt, detached bool) (*http.Request, error) {
	req, t := rt.req, rt.t
	out := req.WithContext(ctx)
	if len(t.targets) > 0 || detached {
		u := &rt.p.url
		if a.IsHedge() {
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
	if rt.rh != nil {
		rt.rh.Rewrite(a, out)
	}
	return out, nil
}

// preparedRequest is a request built at launch, or why it could not be.
type preparedRequest struct {
	req *http.Request
	err error
}

// prepare builds attempt a's request as it is launched, under the
// operation's lock: so the hooks' Rewrite of each attempt runs in launch
// order, never concurrently with another attempt's.
func (rt *roundTrip) prepare(ctx context.Context, a Attempt) {
	if a.Index == 0 {
		req, err := rt.request(ctx, a, !rt.t.hooks.inline)
		rt.primary = preparedRequest{req, err}
		return
	}
	if rt.prepared == nil {
		rt.prepared = new([MaxAttemptsCap]preparedRequest)
	}
	req, err := rt.request(ctx, a, true)
	rt.prepared[a.Index] = preparedRequest{req, err}
}

func (rt *roundTrip) done(a Attempt, resp *http.Response, verdict error, elapsed time.Duration) {
	if rt.rh != nil {
		rt.rh.Done(a, resp, verdict, elapsed)
	}
}

// call performs attempt a: sends the request prepare built, and reads the
// body in full.
func (rt *roundTrip) call(ctx context.Context, a Attempt) (*http.Response, error) {
	p := &rt.primary
	if a.IsHedge() {
		p = &rt.prepared[a.Index]
	}
	out, err := p.req, p.err
	if err != nil {
		return nil, err
	}
	t := rt.t
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	if err := RefuseStrayUpgrade(out, resp); err != nil {
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

func (rt *roundTrip) wantsReceipt() bool { return rt.t.onRcpt != nil || rt.rcpt != nil }

func (rt *roundTrip) receipt(r Receipt) {
	if rt.t.onRcpt != nil {
		rt.t.onRcpt(rt.req, r)
	}
	if rt.rcpt != nil {
		rt.rcpt(r)
	}
}

// statusError is the verdict on a response refused for its status.
type statusError int

func (s statusError) Error() string {
	return "hedge: status " + strconv.Itoa(int(s))
}
