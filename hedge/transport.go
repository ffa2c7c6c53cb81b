package hedge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
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
	// an error says why not. Nil means a final status (200 or more) below
	// 500. If no attempt is accepted, the last refused response is
	// returned as is (a server's answer is never displaced by a later
	// transport error, unless its verdict wraps ErrNotAnAnswer). Accept
	// runs in the goroutine of the attempt it judges, possibly
	// concurrently.
	Accept func(*http.Response) error

	// SafeMethods lists methods besides GET and HEAD that the caller
	// declares safe to send twice. Requests of other methods pass through
	// unhedged. A request with a body is hedged only if it has GetBody,
	// which supplies each attempt its own copy.
	SafeMethods []string

	// OnReceipt, when non-nil, receives each hedged request's final receipt,
	// possibly after RoundTrip has returned. See also WithReceipt.
	OnReceipt func(*http.Request, Receipt)

	// DetachPrimary sends the primary from its own goroutine. By default it
	// is sent from the caller's goroutine, which saves a goroutine hand-off
	// per request; a winning hedge is then returned once the cancelled
	// primary returns, which net/http does at once. Set DetachPrimary when
	// Base may ignore cancellation.
	DetachPrimary bool
}

// Transport is an http.RoundTripper that hedges requests. It reads each
// response body in full (bounded by MaxBodyBytes) inside its attempt, so the
// winner is a complete response; the winner's buffer is freed when the
// caller closes the body, and losers are cancelled and released in the
// background. Safe for concurrent use.
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
	hooks    hooks     // shared by every request
	trips    sync.Pool // *roundTrip that nothing references any more
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
	t.hooks = hooks{targets: t.names, inline: !cfg.DetachPrimary}
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

// ParseTarget parses and checks a target base URL: http or https, a host,
// no query, fragment or user information.
func ParseTarget(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: target %q: %w", ErrInvalidPolicy, s, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: target %q: scheme must be http or https", ErrInvalidPolicy, s)
	case u.Host == "":
		return nil, fmt.Errorf("%w: target %q: no host", ErrInvalidPolicy, s)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("%w: target %q: must not have a query or fragment", ErrInvalidPolicy, s)
	case u.User != nil:
		return nil, fmt.Errorf("%w: target %q: must not carry user information", ErrInvalidPolicy, s)
	}
	if u.Path == "/" {
		u.Path, u.RawPath = "", ""
	}
	// One spelling per target, so duplicates are caught however written:
	// scheme and host in lower case, the scheme's default port dropped.
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	u.Host = host
	if strings.Contains(host, ":") {
		u.Host = "[" + host + "]" // an IPv6 literal
	}
	if port != "" {
		u.Host += ":" + port
	}
	return u, nil
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
// attempt uses, whether a hedge may start, and what came of each attempt.
// A reverse proxy uses them to pick replicas, hold attempt slots and feed
// circuit breakers.
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
	// Done reports each attempt that started, exactly once, when its round
	// trip and body read have ended: resp (body buffered, not to be kept)
	// or err (a cancelled loser's is the context's error), and how long it
	// took. It runs in the attempt's goroutine, possibly after
	// RoundTripWith has returned.
	Done(a Attempt, resp *http.Response, err error, elapsed time.Duration)
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.RoundTripWith(req, nil)
}

// RoundTripWith is RoundTrip with per-request hooks; nil hooks mean the
// Transport's defaults. Requests that are not hedged (see SafeMethods)
// pass through without hooks.
func (t *Transport) RoundTripWith(req *http.Request, hooks RequestHooks) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("hedge: request has no URL")
	}
	if !t.hedgeable(req) {
		return t.passThrough(req)
	}
	rt, _ := t.trips.Get().(*roundTrip)
	if rt == nil {
		rt = new(roundTrip)
	}
	// What the primary hands out (its context, URL and body) lives outside
	// the pooled state, in one allocation of its own.
	p := new(primaryState)
	rt.t, rt.req, rt.p, rt.rh = t, req, p, hooks
	// Read now: the receipt may come after RoundTrip has returned, when
	// the caller may be reusing req.
	rt.rcpt, _ = req.Context().Value(receiptKey{}).(func(Receipt))
	rt.op.ctx0 = &p.ctx
	if hooks != nil {
		rt.op.steer = hooks
	}
	first := 0
	if t.rotate && len(t.targets) > 1 {
		first = int(t.nextPrim.Add(1)-1) % len(t.targets)
	}
	rt.op.init(req.Context(), t.h, rt, &t.hooks, first)
	resp, err := rt.op.run()
	if rt.op.reusable() {
		*rt = roundTrip{}
		t.trips.Put(rt)
	}
	closeBody(req) // attempts used copies from GetBody
	if err != nil {
		if resp != nil && errors.Is(err, ErrNotAccepted) {
			// The last answer, a 503 say, is still the server's answer.
			return resp, nil
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

// passThrough sends a request that may not be duplicated, once.
func (t *Transport) passThrough(req *http.Request) (*http.Response, error) {
	if len(t.targets) == 0 {
		return t.base.RoundTrip(req)
	}
	out := req.WithContext(req.Context())
	u := new(url.URL)
	rewriteURL(u, req.URL, t.targets[0])
	out.URL = u
	out.Host = ""
	return t.base.RoundTrip(out)
}

// rewriteURL sets *dst to src re-aimed at target.
func rewriteURL(dst, src, target *url.URL) {
	*dst = *src
	dst.Scheme = target.Scheme
	dst.Host = target.Host
	if target.Path != "" {
		if target.RawPath == "" && src.RawPath == "" {
			dst.Path = joinSlash(target.Path, src.Path)
		} else {
			escaped := joinSlash(target.EscapedPath(), src.EscapedPath())
			if p, err := url.PathUnescape(escaped); err == nil {
				dst.Path, dst.RawPath = p, escaped
			}
		}
	}
}

func joinSlash(a, b string) string {
	return strings.TrimSuffix(a, "/") + "/" + strings.TrimPrefix(b, "/")
}

// roundTrip is the state of one hedged request. Nothing outside references
// it once a request that never hedged has returned, so it is pooled then;
// everything an attempt hands out lives elsewhere.
type roundTrip struct {
	op   operation[*http.Response]
	t    *Transport
	req  *http.Request
	rh   RequestHooks
	rcpt func(Receipt) // from the request's context (WithReceipt)
	p    *primaryState
	// Requests of attempts that run in their own goroutine, built at
	// launch; allocated with the first hedge.
	prepared *[MaxAttemptsCap]preparedRequest
}

// primaryState is what the primary attempt hands out, in one allocation:
// its context (held by net/http), its URL (in its request) and its body
// (in the response the caller gets). Hedges allocate their own.
type primaryState struct {
	ctx  attemptCtx
	url  url.URL
	body bufferedBody
}

// request builds attempt a's request from the caller's. An attempt that
// runs in its own goroutine gets its request built at launch (prepare),
// while the caller still owns req: a loser may outlive RoundTrip, and by
// then the caller may reuse req.
//
// detached says the attempt runs in its own goroutine: its request then
// gets its own URL and header map, not the caller's.
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
	return out, nil
}

// preparedRequest is a request built at launch, or why it could not be.
type preparedRequest struct {
	req *http.Request
	err error
}

func (rt *roundTrip) prepare(ctx context.Context, a Attempt) {
	if rt.prepared == nil {
		rt.prepared = new([MaxAttemptsCap]preparedRequest)
	}
	req, err := rt.request(ctx, a, true)
	rt.prepared[a.Index] = preparedRequest{req, err}
}

func (rt *roundTrip) done(a Attempt, resp *http.Response, err error, elapsed time.Duration) {
	if rt.rh != nil {
		rt.rh.Done(a, resp, err, elapsed)
	}
}

// call performs attempt a: builds (or takes) its request, sends it, and
// reads the body in full.
func (rt *roundTrip) call(ctx context.Context, a Attempt) (*http.Response, error) {
	var out *http.Request
	var err error
	if a.Index == 0 && rt.t.hooks.inline {
		out, err = rt.request(ctx, a, false) // on the caller's goroutine
	} else {
		p := rt.prepared[a.Index]
		out, err = p.req, p.err
	}
	if err != nil {
		return nil, err
	}
	t := rt.t
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		return nil, err
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
	// A final status below 500 wins. A 1xx here can only be a stray 101:
	// hedged requests never ask for a protocol switch.
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

// bufferedBody is a response body read in full into a pooled buffer.
type bufferedBody struct {
	buf    *[]byte
	b      []byte
	off    int
	closed bool
}

var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledBody keeps one huge response from pinning its buffer forever.
const maxPooledBody = 256 << 10

// fill reads resp.Body in full (at most limit bytes) and closes it.
func (b *bufferedBody) fill(resp *http.Response, limit int64) error {
	r := resp.Body
	defer r.Close()
	if resp.ContentLength > limit {
		return fmt.Errorf("%w: %d bytes announced, limit %d", ErrResponseTooLarge, resp.ContentLength, limit)
	}
	bp := bodyPool.Get().(*[]byte)
	buf := (*bp)[:0]
	if cl := resp.ContentLength; cl >= 0 && cl+1 > int64(cap(buf)) {
		buf = make([]byte, 0, cl+1) // room for the read that sees EOF
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		// Never ask for more than limit+1 bytes in all: one past the limit
		// is enough to know the body is too large.
		end := cap(buf)
		if room := limit - int64(len(buf)); room < int64(end-len(buf)-1) {
			end = len(buf) + int(room) + 1
		}
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			b.put(bp, buf)
			return fmt.Errorf("%w: more than %d bytes", ErrResponseTooLarge, limit)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			b.put(bp, buf)
			return err
		}
	}
	*bp = buf
	b.buf, b.b, b.off, b.closed = bp, buf, 0, false
	return nil
}

func (b *bufferedBody) put(bp *[]byte, buf []byte) {
	if cap(buf) <= maxPooledBody {
		*bp = buf[:0]
		bodyPool.Put(bp)
	}
}

func (b *bufferedBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errBodyClosed
	}
	if b.off >= len(b.b) {
		return 0, io.EOF
	}
	n := copy(p, b.b[b.off:])
	b.off += n
	return n, nil
}

// Bytes returns the unread bytes without consuming them, so an acceptance
// check can look at a body and leave it for the caller. Bodies returned by
// the Transport (except for HEAD) implement interface{ Bytes() []byte }.
// The slice is valid until Close.
func (b *bufferedBody) Bytes() []byte {
	if b.closed {
		return nil
	}
	return b.b[b.off:]
}

// Len reports the unread bytes, so a proxy can announce Content-Length.
func (b *bufferedBody) Len() int {
	if b.closed {
		return 0
	}
	return len(b.b) - b.off
}

// WriteTo lets io.Copy skip an intermediate buffer.
func (b *bufferedBody) WriteTo(w io.Writer) (int64, error) {
	if b.closed {
		return 0, errBodyClosed
	}
	if b.off >= len(b.b) {
		return 0, nil
	}
	n, err := w.Write(b.b[b.off:])
	b.off += n
	return int64(n), err
}

// Close returns the buffer to the pool. It is safe to call more than once.
func (b *bufferedBody) Close() error {
	if b.buf != nil {
		b.put(b.buf, b.b)
	}
	b.buf, b.b, b.off, b.closed = nil, nil, 0, true
	return nil
}

var errBodyClosed = errors.New("hedge: read on closed response body")
