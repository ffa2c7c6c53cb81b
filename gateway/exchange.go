package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/h1"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
)

// exchange is one proxied read as the hedging engine sees it: the request
// to forward, and the hooks that pick replicas, hold their breaker tickets
// and attempt slots, stamp tied copies, and feed each attempt's outcome
// back. It is allocated per read and left to the garbage collector, since
// losing attempts outlive the handler: pooling it (with a count of its
// users) saved 0.9µs per read in memory, but nothing measurable over real
// HTTP (BenchmarkLoopback: 110.4 against 111.6µs, medians of 6, within
// the run-to-run noise).
type exchange struct {
	g                   *Gateway
	v                   *view  // the configuration the read arrived under, to its end
	rt                  *route // the route that took it
	req                 http.Request
	url                 url.URL
	fwd                 [3]string    // the values forwardedHeaders sets in req's header (attempts still out may read them: an exchange is never reused)
	hedge.RouteSteering              // its Route picks each attempt's replica (a key's owners first, a tied twin), holds its ticket
	started             bool         // the primary was picked (set on the handler's goroutine)
	hedges              uint8        // hedges admitted, so sent (under the engine's lock; read once RoundTripWith returns)
	tally               attemptTally // each attempt's outcome, for tailgate_replica_attempts_total

	// Tied mode only (see tied.go).
	tieID string
	first atomic.Pointer[http.Response] // the first copy's answer, to tell which copy won

	trace *readTrace // nil unless the read is traced (see trace.go)

	aff *affinityRead // nil unless affinity mode found the read's key (see affinity.go)
}

// newExchange returns the exchange of read r, holding the request to
// forward: a copy of r (with r's context; the engine adds the timeout)
// with its own URL, the headers to forward, deadlineValue as the
// primary's Tailgate-Timeout (nil: the deadline Transport writes it) and
// no body.
func (g *Gateway) newExchange(v *view, rt *route, r *http.Request, deadlineValue []string) *exchange {
	x := &exchange{g: g, v: v, rt: rt}
	out := &x.req
	*out = *r
	x.url = targetURL(r)
	out.URL = &x.url
	out.Header = forwardedHeaders(r, v.cfg.TrustedHop, &x.fwd)
	if deadlineValue != nil {
		out.Header[rt.deadlineHeader] = deadlineValue // at most the time left as the primary is sent
	} // else the deadline Transport writes it (forwardedHeaders dropped the client's)
	out.Host = ""
	out.RequestURI = ""
	out.Body = http.NoBody
	out.ContentLength = 0
	if r.GetBody != nil {
		// A body serve read whole (body.go): each attempt gets its own
		// reader of the same bytes (hedge.Transport calls GetBody).
		out.Body, _ = r.GetBody()
		out.ContentLength = r.ContentLength
	}
	if rt.grpc != nil {
		out.Header["Te"] = teTrailers // see grpcproxy.go
	}
	out.Close = false
	return x
}

// forwardable reports whether r's target is in origin form and
// targetURL keeps its bytes. It does but for a path that starts with "//"
// and holds a byte that net/http's client escapes (a '"', say): that path
// must go in its parsed form (see targetURL), which re-escapes it, and a
// target changed on the way is refused rather than sent.
func forwardable(r *http.Request) bool {
	if !strings.HasPrefix(r.RequestURI, "/") {
		return false
	}
	if !strings.HasPrefix(r.RequestURI, "//") {
		return true
	}
	path, _, _ := strings.Cut(r.RequestURI, "?")
	u := url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath}
	return u.EscapedPath() == path
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

// Pick implements hedge.Steering through the read's route: the primary
// by latency, a hedge to a replica no earlier attempt used (in affinity
// mode, among the read's key's replicas first: see affinity.go), an
// attempt after a failure the same but falling back at last to a replica
// on probation (a slow answer beats an error). In tied mode the second
// copy's replica is picked with the primary (see tied.go). A hedge needs
// a free attempt slot; the primary's was taken by serve.
func (x *exchange) Pick(a hedge.Attempt, used []int) (int, error) {
	if a.Index > 0 && !x.g.attempts.tryAcquire() {
		return -1, hedge.ErrNoCapacity
	}
	i, err := x.RouteSteering.Pick(a, used)
	if x.aff != nil {
		x.aff.fallbacks = x.Route.Fallbacks()
	}
	if err != nil {
		if a.Index > 0 {
			x.g.attempts.release()
		}
		return -1, err
	}
	switch {
	case a.Index == 0:
		x.started = true
		if x.Route.Tied(0) {
			x.tieID = tiedwire.NewTie()
			x.g.metrics.tiedCopy(0)
		}
	default:
		if x.Route.Tied(a.Index) {
			x.g.metrics.tiedCopy(a.Index)
		}
		x.hedges++
	}
	return i, nil
}

// Rewrite stamps each attempt as it leaves: in tied mode, each copy
// carries its tie (see stampTie). A traced read's attempt starts its span
// here, and carries its trace context.
func (x *exchange) Rewrite(a hedge.Attempt, out *http.Request) {
	tiedCopy := x.Route.Tied(a.Index)
	if x.rt.tied {
		x.stampTie(a, out)
	}
	if x.rt.grpc != nil && a.Index > 0 {
		out.Header[previousAttempts] = previousValues[a.Index] // as gRPC's own hedging (A6)
	}
	if x.trace != nil {
		role := rolePrimary
		switch {
		case a.Index > 0 && tiedCopy:
			role = roleTied
		case a.Index > 0:
			role = roleHedge
		}
		x.trace.startAttempt(a, role, replicaLabel(x.rt.pool.backends[a.Target]), tiedCopy, out)
	}
}

// Suppressed records, on a traced read's span, each hedge it wanted and
// did not send, and why. (The metrics count them through the engine's
// Observer.)
func (x *exchange) Suppressed(a hedge.Attempt, reason hedge.SuppressReason) {
	if x.trace != nil {
		x.trace.suppressed(a, reason)
	}
}

// Done implements hedge.Steering: the attempt's outcome goes to its
// replica's breaker and latency, and its slot is freed.
func (x *exchange) Done(a hedge.Attempt, r hedge.Result) {
	resp, verdict := r.Response, r.Verdict
	if x.rt.tied {
		x.tiedDone(a, resp)
	}
	x.RouteSteering.Done(a, r)
	x.g.attempts.release()
	if x.trace != nil {
		x.trace.attemptDone(a, resp, verdict)
	}
	x.attemptDone(a, resp, verdict)
	if verdict != nil {
		reason := failureReason(resp, verdict)
		x.g.metrics.attemptFailed(reason)
		if reason == failTLS {
			x.g.logTLS(x.rt.pool.backends[a.Target], verdict)
		}
	}
}

// Attempt failure reasons, as counted in tailgate_attempt_failures_total.
const (
	failStatus    = "status"    // refused for its status: a 5xx (or a stray 1xx from a Base of the caller's)
	failTransport = "transport" // no response: refused, reset, cut short, malformed
	failTLS       = "tls"       // TLS failed: the backend's certificate refused, or ours (see tlsFailure)
	failUpgrade   = "upgrade"   // a 101 to a read that asked for no upgrade
	failHeaders   = "headers"   // header block over MaxResponseHeaderBytes
	failBody      = "body"      // body over MaxResponseBytes
	failTimeout   = "timeout"   // the request's time ran out while it was out
	// A new connection got bytes before its first request (a replica that
	// greets, or answers before it is asked): internal/h1 sends nothing
	// on it.
	failUnsolicited = "unsolicited"
)

var failureReasons = []string{failStatus, failTransport, failTLS, failUpgrade, failHeaders, failBody, failTimeout, failUnsolicited}

// failureReason names why an attempt with a non-nil verdict got no
// acceptable answer, or "" when it is not a failure of its replica's
// answer: a loser cancelled for a winner or a client gone, a tied copy
// dropped for its twin (counted apart).
func failureReason(resp *http.Response, verdict error) string {
	switch {
	case errors.Is(verdict, context.Canceled), errors.Is(verdict, hedge.ErrNotAnAnswer):
		return ""
	case errors.Is(verdict, context.DeadlineExceeded):
		return failTimeout
	case resp != nil:
		return failStatus
	case errors.Is(verdict, hedge.ErrUnexpectedUpgrade):
		return failUpgrade
	case errors.Is(verdict, hedge.ErrResponseTooLarge):
		return failBody
	case headersTooLarge(verdict):
		return failHeaders
	case errors.Is(verdict, h1.ErrUnsolicited):
		return failUnsolicited
	case tlsFailure(verdict):
		// Apart from transport failures: a certificate refused is a
		// matter of configuration or of a rotation gone wrong, not of the
		// network, and stays until someone acts.
		return failTLS
	}
	return failTransport
}

// headersTooLarge reports whether err refuses a response header block
// over MaxResponseHeaderBytes: internal/h1's (http:// backends over
// HTTP/1.1) by its sentinel; net/http's (https:// over HTTP/1.1, h2c,
// HTTP/2), which has no sentinel, by its messages, which
// TestNetHTTPHeaderLimitMessages pins: it fails when a Go release
// changes them.
func headersTooLarge(err error) bool {
	if errors.Is(err, h1.ErrHeaderLimit) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "server response headers exceeded") || // HTTP/1
		strings.Contains(msg, "response header list larger than") // HTTP/2
}
