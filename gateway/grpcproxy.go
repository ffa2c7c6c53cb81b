package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
)

// This file: gRPC through the gateway (Route.GRPC). A gRPC call is an
// HTTP/2 POST to /pkg.Service/Method whose request and response bodies
// are length-prefixed messages and whose status comes as the trailer
// grpc-status (or as a header, in a response without a body): net/http
// carries all of it, and the gateway needs no gRPC library (the main
// module never imports one).
//
// A call of a method the route lists as a read goes through serve as any
// read does (admission, class, deadline, the engine, the answer), with
// four differences, each hooked where it applies: its class is its full
// method, as in hedgegrpc; its deadline is grpc-timeout, honoured and
// forwarded to each attempt as what remains (deadline.Transport with
// Header Grpc-Timeout); grpc-status decides which answer wins
// (grpcAccept, hedgegrpc's rule: OK wins, Unavailable sends the next
// attempt at once, any other status is the call's answer); and the answer
// goes back in gRPC's terms, its trailers forwarded, the gateway's own
// refusals and failures as gRPC statuses (grpcWriter). A hedge carries
// grpc-previous-rpc-attempts, as gRPC's own hedging (A6), beside the
// hedge mark (Tailgate-Hedge, which is hedgegrpc's tailgate-hedge metadata).
// Every other call under the route (a stream, a write, a method not
// listed) is proxied once, unhedged, streaming both ways (passGRPC).

// Header names and values of gRPC over HTTP/2.
const (
	grpcTimeout      = "Grpc-Timeout"
	previousAttempts = "Grpc-Previous-Rpc-Attempts"
	grpcStatusKey    = "Grpc-Status"
	grpcMessageKey   = "Grpc-Message"
)

var (
	grpcMethods = []string{http.MethodPost} // every gRPC call is a POST
	// teTrailers is sent on every call: gRPC servers may refuse one without
	// it (grpc-java does), and it is hop-by-hop, so the client's is not
	// forwarded (see hopHeaders).
	teTrailers = []string{"trailers"}
	// previousValues are grpc-previous-rpc-attempts' values by attempt
	// index.
	previousValues = [hedge.MaxAttemptsCap][]string{{"0"}, {"1"}, {"2"}, {"3"}, {"4"}}
	grpcType       = []string{"application/grpc"}
)

// gRPC status codes the gateway writes or reads.
const (
	codeOK                = 0
	codeUnknown           = 2
	codeDeadlineExceeded  = 4
	codeResourceExhausted = 8
	codeUnimplemented     = 12
	codeInternal          = 13
	codeUnavailable       = 14
)

// grpcRoute is what a gRPC route knows of its methods.
type grpcRoute struct {
	reads map[string]bool // the full names of the methods that are reads
}

// newGRPCRoute returns the route of match whose listed methods are
// names (checked by checkGRPCRoute).
func newGRPCRoute(match string, names []string) *grpcRoute {
	svc, _, _ := grpcMatch(match)
	g := &grpcRoute{reads: make(map[string]bool, len(names))}
	for _, n := range names {
		g.reads[fullMethod(svc, n)] = true
	}
	return g
}

// fullMethod returns name in full ("/pkg.Service/Method"): as it is when
// it starts with "/", else a method of service svc.
func fullMethod(svc, name string) string {
	if strings.HasPrefix(name, "/") {
		return name
	}
	return "/" + svc + "/" + name
}

// grpcMatch returns the service and method (empty for a whole service)
// that a gRPC route's match names, or an error when it names neither.
func grpcMatch(match string) (svc, method string, err error) {
	m, err := compileMatch(match)
	if err != nil {
		return "", "", err
	}
	path := match[strings.IndexByte(match, '/'):]
	bad := fmt.Errorf("match %q: a gRPC route matches a service (\"/pkg.Service/\") or one method (\"/pkg.Service/Method\"), without wildcards", match)
	for _, s := range m.segs {
		if s.wild || s.rest || s.lit == "" {
			return "", "", bad
		}
	}
	switch {
	case len(m.segs) == 1 && m.prefix && !m.exact:
		return m.segs[0].lit, "", nil
	case len(m.segs) == 2 && !m.prefix && !m.exact && path == "/"+m.segs[0].lit+"/"+m.segs[1].lit:
		return m.segs[0].lit, m.segs[1].lit, nil
	}
	return "", "", bad
}

// checkGRPCRoute checks a gRPC route's fields (see Route.GRPC).
func checkGRPCRoute(c *Config, r *Route) error {
	if len(r.Methods) > 0 {
		return errors.New("a gRPC route takes gRPC calls, which are POSTs: leave its methods empty")
	}
	if r.Tied != nil && *r.Tied || r.Tied == nil && c.Tied {
		return errors.New("a gRPC route hedges: tied calls are hedgegrpc's (set tied: false on the route)")
	}
	svc, method, err := grpcMatch(r.Match)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, n := range r.GRPC {
		full := fullMethod(svc, n)
		s, m, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
		switch {
		case !ok || s == "" || m == "" || strings.ContainsAny(m, "/ \t{}"):
			return fmt.Errorf("gRPC method %q: a method's name (\"Get\") or full name (\"/pkg.Service/Get\")", n)
		case s != svc || method != "" && m != method:
			return fmt.Errorf("gRPC method %q is not under the route's match %q", n, r.Match)
		case seen[full]:
			return fmt.Errorf("gRPC method %q listed twice", full)
		}
		seen[full] = true
	}
	return nil
}

// isGRPC reports whether r is a gRPC call: a POST whose Content-Type is
// application/grpc, bare or with a subtype ("+proto") or parameters.
// gRPC-Web (application/grpc-web) is not: it needs translating.
func isGRPC(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	ct := r.Header["Content-Type"]
	if len(ct) != 1 || !strings.HasPrefix(ct[0], "application/grpc") {
		return false
	}
	rest := ct[0][len("application/grpc"):]
	return rest == "" || rest[0] == '+' || rest[0] == ';'
}

// clientDeadline returns the time the client gives the read: its
// Tailgate-Timeout (see deadline.FromHeader), or, on a gRPC route, its
// grpc-timeout, whose format is the same.
func (rt *route) clientDeadline(h http.Header) (d time.Duration, ok bool, err error) {
	if rt.grpc == nil {
		return deadline.FromHeader(h)
	}
	return callTimeout(h)
}

// callTimeout reads a call's grpc-timeout: ok is false without one.
func callTimeout(h http.Header) (d time.Duration, ok bool, err error) {
	switch vs := h[grpcTimeout]; len(vs) {
	case 0:
		return 0, false, nil
	case 1:
		d, err = deadline.Parse(vs[0])
		return d, true, err
	default:
		return 0, true, fmt.Errorf("%w: %d grpc-timeout values, want 1", deadline.ErrMalformed, len(vs))
	}
}

// errNoGRPCStatus refuses an answer that ended without a grpc-status: a
// stream cut short, or no gRPC server at all.
var errNoGRPCStatus = errors.New("gateway: gRPC answer without grpc-status")

// grpcAccept is a gRPC route's acceptance check, hedgegrpc's rule: an
// answer wins unless its status is Unavailable, which sends the next
// attempt at once (budget permitting), as gRPC's hedging policy's
// nonFatalStatusCodes do; any other status (OK, NotFound, ...) is the
// call's answer, and goes to the client as the server sent it. An answer
// that is not gRPC's (an HTTP status other than 200, no grpc-status) is
// a failure.
func grpcAccept(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("gateway: gRPC call answered HTTP %d", resp.StatusCode)
	}
	code, ok := grpcStatus(resp)
	switch {
	case !ok:
		return errNoGRPCStatus
	case code == codeUnavailable:
		return errUnavailable
	}
	return nil
}

var errUnavailable = errors.New("gateway: gRPC status UNAVAILABLE")

// grpcStatus returns the answer's grpc-status: a trailer, or a header
// in a response without a body (trailers-only).
func grpcStatus(resp *http.Response) (int, bool) {
	v := resp.Trailer[grpcStatusKey]
	if len(v) == 0 {
		v = resp.Header[grpcStatusKey]
	}
	if len(v) != 1 {
		return 0, false
	}
	n, err := strconv.Atoi(v[0])
	return n, err == nil && n >= 0
}

// grpcAnswer returns, for a gRPC read that got no accepted answer, the
// last refused one when it is a gRPC answer (Unavailable from every
// replica it tried): the client gets the status its servers sent, as
// hedgegrpc returns the last attempt's.
func grpcAnswer(resp *http.Response, err error) (*http.Response, error) {
	// The engine returns the last refused answer beside ErrNotAccepted.
	if resp != nil && errors.Is(err, hedge.ErrNotAccepted) && resp.StatusCode == http.StatusOK {
		if _, ok := grpcStatus(resp); ok {
			return resp, nil
		}
	}
	return resp, err
}

// grpcWriter answers a gRPC call: a replica's answer with its trailers
// (answer), the gateway's own refusals and failures as gRPC statuses in
// a trailers-only response (status). serve wraps the client's writer in
// it for a gRPC route's reads; writeResponse and writeError look for it.
type grpcWriter struct{ http.ResponseWriter }

// Unwrap lets http.ResponseController reach the server's writer.
func (gw *grpcWriter) Unwrap() http.ResponseWriter { return gw.ResponseWriter }

// answer forwards a replica's buffered answer and its trailers.
func (gw *grpcWriter) answer(resp *http.Response) served {
	h := gw.Header()
	copyEndToEnd(h, resp.Header)
	delete(h, "Content-Length") // the trailers follow the body: HTTP/2 frames it
	gw.WriteHeader(resp.StatusCode)
	n, _ := io.Copy(gw.ResponseWriter, resp.Body)
	forwardTrailers(h, resp.Trailer)
	return served{code: resp.StatusCode, bytes: n}
}

// forwardTrailers sets a response's trailers to go after the body
// written (net/http's TrailerPrefix: no announcement needed).
func forwardTrailers(h, trailer http.Header) {
	for k, v := range trailer {
		h[http.TrailerPrefix+k] = v
	}
}

// status answers the call with the gRPC status that stands for the HTTP
// error code the gateway would have answered a read with (reason says
// why: grpcCode). The metrics and the access log count code, as for an
// HTTP read, so that a dashboard's error rates include gRPC calls; the
// client sees HTTP 200 and the status.
func (gw *grpcWriter) status(code int, msg, reason string) served {
	writeGRPCStatus(gw.ResponseWriter, grpcCode(code, reason), msg)
	return served{code: code, reason: reason}
}

// grpcCode maps why the gateway refused or failed a read to a gRPC
// status: the codes gRPC's own HTTP mapping and its servers use for the
// same conditions.
func grpcCode(code int, reason string) int {
	switch reason {
	case rejectRequests, rejectAttempts, reasonNoReplica, reasonFailed:
		return codeUnavailable // overloaded or no replica: another try may do
	case rejectDeadline, reasonTimeout, rejectBodyTimeout:
		return codeDeadlineExceeded
	case rejectBodyTooLarge, reasonTooLarge:
		return codeResourceExhausted // as a server's message over its limit
	case rejectMethod:
		return codeUnimplemented
	case rejectBadDeadline, rejectBody, rejectTarget:
		return codeInternal // as grpc-go for a malformed grpc-timeout
	}
	if code >= 500 {
		return codeUnavailable
	}
	return codeUnknown
}

// writeGRPCStatus writes a trailers-only answer: HTTP 200, the status
// and its message as headers, no body.
func writeGRPCStatus(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	// Over HTTP/2 a Connection header would be a GOAWAY for every call on
	// the connection (net/http reads "close" so); a call's framing is the
	// stream's, never in doubt.
	delete(h, "Connection")
	delete(h, "Allow")
	h["Content-Type"] = grpcType
	h[grpcStatusKey] = []string{strconv.Itoa(code)}
	h[grpcMessageKey] = []string{percentEncode(msg)}
	w.WriteHeader(http.StatusOK)
}

// percentEncode encodes a grpc-message as gRPC's protocol asks: bytes
// outside printable ASCII, and '%', as %XX.
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c <= 0x7e && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// grpcUnrouted answers a gRPC call that no gRPC route takes:
// UNIMPLEMENTED, as a server without the method would, rather than a 405
// no gRPC client reads.
func (g *Gateway) grpcUnrouted(w http.ResponseWriter, r *http.Request) served {
	g.metrics.reject(rejectMethod)
	writeGRPCStatus(w, codeUnimplemented, "no gRPC route of the gateway takes "+r.URL.Path)
	return served{code: http.StatusMethodNotAllowed, reason: rejectMethod}
}

// passGRPC proxies a call of a gRPC route that is not a listed read (a
// stream, a write, an unlisted method) once, unhedged, streaming: the
// request's messages go on as the client sends them, the answer's as the
// replica does, each flushed, then its trailers. The replica is picked
// as a primary is, under the request and attempt limits; the call's time
// is the route's timeout, or its grpc-timeout when shorter, and the
// server's read and write limits on the stream follow it (a stream may
// outlast the 10s a request's read is given). A stream teaches nothing
// of a replica's latency: only a failure to answer reaches its breaker.
func (g *Gateway) passGRPC(w http.ResponseWriter, r *http.Request, v *view, rt *route, start time.Time) served {
	gw := &grpcWriter{w}
	if !isGRPC(r) {
		return g.reject(gw, rejectMethod, http.StatusMethodNotAllowed, "only gRPC calls are proxied on a gRPC route")
	}
	if !g.requests.tryAcquire() {
		return g.reject(gw, rejectRequests, http.StatusServiceUnavailable, "overloaded: too many requests in flight")
	}
	defer g.requests.release()
	budget := rt.timeout
	if d, ok, err := callTimeout(r.Header); ok {
		switch {
		case err != nil:
			return g.reject(gw, rejectBadDeadline, http.StatusBadRequest, err.Error())
		case d <= 0:
			return g.reject(gw, rejectDeadline, http.StatusGatewayTimeout, "deadline: "+d.String()+" left, need more than 0s")
		}
		budget = min(budget, d)
	}
	end := start.Add(budget)
	ctx, cancel := context.WithDeadline(r.Context(), end)
	defer cancel()
	if !g.attempts.tryAcquire() {
		return g.reject(gw, rejectAttempts, http.StatusServiceUnavailable, "overloaded: too many backend attempts in flight")
	}
	defer g.attempts.release()
	route := rt.pool.set.Route(nil, false)
	defer route.Finish()
	i, ok := route.Pick(0, false, nil, time.Now())
	if !ok {
		return writeError(gw, http.StatusBadGateway, "no replica available: every circuit breaker is open", reasonNoReplica)
	}
	u := targetURL(r)
	u.Scheme, u.Host = rt.pool.targets[i].Scheme, rt.pool.targets[i].Host
	h := forwardedHeaders(r, v.cfg.TrustedHop, new([3]string))
	h["Te"] = teTrailers
	delete(h, grpcTimeout) // rt.base writes what remains
	out := (&http.Request{Method: http.MethodPost, URL: &u, Header: h, Body: r.Body, ContentLength: r.ContentLength,
		Proto: "HTTP/2.0", ProtoMajor: 2}).WithContext(ctx)
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(end)
	rc.SetWriteDeadline(end.Add(serverSlack))
	sent := time.Now()
	resp, err := rt.base.RoundTrip(out)
	if err != nil {
		route.Done(0, replica.Failure, time.Since(sent))
		switch {
		case r.Context().Err() != nil:
			return served{reason: reasonClientGone}
		case ctx.Err() != nil:
			return writeError(gw, http.StatusGatewayTimeout, "timeout: no answer within "+budget.String(), reasonTimeout)
		}
		return writeError(gw, http.StatusBadGateway, "the replica failed: "+cause(err), reasonFailed)
	}
	defer resp.Body.Close()
	route.Done(0, replica.Canceled, 0) // answered: no latency sample, the breaker unmoved
	wh := w.Header()
	copyEndToEnd(wh, resp.Header)
	delete(wh, "Content-Length")
	w.WriteHeader(resp.StatusCode)
	rc.Flush() // a stream's client may wait for the headers before it sends
	n, err := copyFlushing(w, rc, resp.Body)
	if err != nil {
		// Cut short: the client is told so, rather than left with a
		// stream that ends without a status.
		wh[http.TrailerPrefix+grpcStatusKey] = []string{strconv.Itoa(codeUnavailable)}
		wh[http.TrailerPrefix+grpcMessageKey] = []string{percentEncode("the replica's stream failed: " + cause(err))}
		return served{code: resp.StatusCode, bytes: n, reason: reasonFailed}
	}
	forwardTrailers(wh, resp.Trailer)
	return served{code: resp.StatusCode, bytes: n}
}

// copyFlushing copies src to w, flushing after each read: a stream's
// messages go on as they come.
func copyFlushing(w io.Writer, rc *http.ResponseController, src io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		m, err := src.Read(buf)
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return n, nil // the client left: nothing more to tell it
			}
			n += int64(m)
			rc.Flush()
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
