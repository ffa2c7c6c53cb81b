package gateway

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/buildinfo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// This file: OpenTelemetry traces of reads (Config.TracerProvider). A read
// is a server span; each attempt of it (primary, hedge, tied copy) and
// each shadow that follows it is a client span, its child. The engine
// knows nothing of tracing: the exchange's hooks start an attempt's span
// as the attempt leaves (Rewrite) and end it once its outcome is settled
// (see attemptTally), and the engine's SuppressHook tells the read's span
// of each hedge it wanted and did not send. Off, a read costs one nil
// check per hook, and no allocation.

// tracerName names the gateway's instrumentation scope.
const tracerName = "github.com/tailgate-dev/tailgate/gateway"

// Attribute keys of Tailgate's own, beside the semantic conventions'.
const (
	attrReplica    = attribute.Key("tailgate.replica")          // the backend, as configured (see replicaLabel)
	attrRole       = attribute.Key("tailgate.role")             // primary, hedge, tied, shadow
	attrAttempt    = attribute.Key("tailgate.attempt")          // the attempt's index: 0 for the primary
	attrTrigger    = attribute.Key("tailgate.trigger")          // why it was sent: primary, delay, failure
	attrOutcome    = attribute.Key("tailgate.outcome")          // as tailgate_replica_attempts_total counts it
	attrFailure    = attribute.Key("tailgate.failure")          // as tailgate_attempt_failures_total counts it
	attrTied       = attribute.Key("tailgate.tied")             // a copy that carried its tie
	attrSuppressed = attribute.Key("tailgate.hedge.suppressed") // why the read's last wanted hedge was not sent
	attrAttempts   = attribute.Key("tailgate.attempts")         // attempts sent, the primary included
	attrHedgeWon   = attribute.Key("tailgate.hedge.won")        // the answer forwarded was a hedge's
	attrReason     = attribute.Key("tailgate.reason")           // why a read was refused or failed (the access log's)
	attrWinner     = attribute.Key("tailgate.winner")           // the replica whose answer was forwarded
	eventSuppress  = "hedge suppressed"                         // a wanted hedge not sent
	attrSuppReason = attribute.Key("tailgate.suppress.reason")  // on eventSuppress: budget, gate, deadline, ...
	attrSuppWanted = attribute.Key("tailgate.suppress.trigger") // on eventSuppress: delay or failure
	attrSuppIndex  = attribute.Key("tailgate.suppress.attempt") // on eventSuppress: the attempt it would have been
)

// Trace roles: the metrics' (roleNames), and tied mode's second copy.
const roleTied = nRoles

var traceRoles = [nRoles + 1]string{rolePrimary: "primary", roleHedge: "hedge", roleShadow: "shadow", roleTied: "tied"}

// tracing is what New builds of Config.TracerProvider; nil when tracing is
// off.
type tracing struct {
	tracer trace.Tracer
	// W3C trace context (traceparent, tracestate), both ways: a client's
	// is the parent of its read's span, and each attempt carries its own.
	prop propagation.TraceContext
}

func newTracing(tp trace.TracerProvider) *tracing {
	if tp == nil {
		return nil
	}
	return &tracing{tracer: tp.Tracer(tracerName, trace.WithInstrumentationVersion(buildinfo.Get().Version))}
}

// readTrace is one read's tracing state, held by its exchange (nil when
// tracing is off).
type readTrace struct {
	t    *tracing
	ctx  context.Context // holds span: the parent of the attempts and shadows
	span trace.Span
	// Each attempt's span, started by Rewrite, under the engine's lock,
	// before the attempt runs; and when its Done came, which is when its
	// span ends, whenever its outcome is settled (see endAttempt).
	attempts [hedge.MaxAttemptsCap]trace.Span
	ended    [hedge.MaxAttemptsCap]time.Time
}

// spanNames are the spans' names, made once: "GET", "GET hedge", ...
var spanNames = func() map[string]*[nRoles + 2]string {
	m := map[string]*[nRoles + 2]string{}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		var n [nRoles + 2]string
		for role, name := range traceRoles {
			n[role] = method + " " + name
		}
		n[nRoles+1] = method
		m[method] = &n
	}
	return m
}()

// methodAttr is the semantic conventions' http.request.method of method:
// a method outside RFC 9110's (and PATCH's) is "_OTHER", so that a client
// cannot make up values.
func methodAttr(method string) attribute.KeyValue {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return semconv.HTTPRequestMethodKey.String(method)
	}
	return semconv.HTTPRequestMethodKey.String("_OTHER")
}

// spanName is the name of a span of role for method (role -1: the read's
// own), as the semantic conventions name HTTP spans ("{method}", here
// with the role, which has few values).
func spanName(method string, role int) string {
	n, ok := spanNames[method]
	if !ok {
		return "HTTP" // not a read (refused): its method is not the name of a span
	}
	if role < 0 {
		return n[nRoles+1]
	}
	return n[role]
}

// startRead starts the span of request r, which arrived at start. Its
// parent is the span r's context already holds (a server that traces its
// own requests), or else the client's traceparent: kept as the parent
// whether or not the client is a trusted hop, since it only ties this
// trace to the client's, and never forwarded as it came (each attempt
// carries its own; see inject).
func (t *tracing) startRead(r *http.Request, start time.Time) *readTrace {
	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = t.prop.Extract(ctx, headerCarrier(r.Header))
	}
	rt := &readTrace{t: t}
	rt.ctx, rt.span = t.tracer.Start(ctx, spanName(r.Method, -1),
		serverKind,
		trace.WithTimestamp(start),
		trace.WithAttributes(
			methodAttr(r.Method),
			semconv.URLPath(r.URL.Path), // no query: query strings carry tokens
		))
	return rt
}

// end ends the read's span at end with what serve did.
func (rt *readTrace) end(s served, end time.Time) {
	span := rt.span
	if !span.IsRecording() {
		span.End() // without a timestamp, which would allocate: nothing records it
		return
	}
	attempts, hedgeWon := 0, false
	if x := s.x; x != nil {
		if x.started {
			attempts = 1 + int(x.hedges)
		}
		if w := int(x.tally.winner); x.tally.decided && w >= 0 {
			span.SetAttributes(attrWinner.String(replicaLabel(x.rt.pool.backends[x.tally.replica[w]])))
			hedgeWon = w > 0
		}
	}
	span.SetAttributes(attrAttempts.Int(attempts), attrHedgeWon.Bool(hedgeWon))
	if s.code != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(s.code))
	}
	if s.reason != "" {
		span.SetAttributes(attrReason.String(s.reason))
	}
	// A server span is in error for a 5xx only: a 4xx is the client's
	// (semantic conventions), and a client gone is nobody's.
	if s.code >= 500 {
		span.SetStatus(codes.Error, s.reason)
	}
	span.End(trace.WithTimestamp(end))
}

// inject writes the trace context of the span ctx holds into h, in place
// of any the client sent: a tracestate is only meaningful with the
// traceparent it came with.
func (t *tracing) inject(ctx context.Context, h http.Header) {
	delete(h, "Traceparent")
	delete(h, "Tracestate")
	t.prop.Inject(ctx, headerCarrier(h))
}

// The span kinds, as start options made once: each call of
// trace.WithSpanKind allocates one.
var (
	serverKind = trace.WithSpanKind(trace.SpanKindServer)
	clientKind = trace.WithSpanKind(trace.SpanKindClient)
)

// headerCarrier is propagation.HeaderCarrier for the trace context's two
// headers, whose canonical forms it knows: HeaderCarrier canonicalises
// every key it is given, an allocation each for these two (net/textproto
// has neither in its table of common headers). A tracestate split over
// several header lines is one list, as W3C trace context has it.
type headerCarrier http.Header

func canonicalKey(k string) string {
	switch k {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	}
	return http.CanonicalHeaderKey(k)
}

func (h headerCarrier) Get(k string) string {
	v := h[canonicalKey(k)]
	switch len(v) {
	case 0:
		return ""
	case 1:
		return v[0]
	}
	return strings.Join(v, ",")
}

func (h headerCarrier) Set(k, v string) { h[canonicalKey(k)] = []string{v} }

func (h headerCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// startAttempt starts the span of attempt a, of role, to replica, and
// writes its trace context into out, the attempt's request. Called from
// Rewrite, under the engine's lock.
//
// A read that is not recorded (its sampler said no) makes no span for
// its attempts: they would not be recorded either (a child follows its
// parent's decision, under the SDK's ParentBased sampler, its default),
// and each would cost a dozen allocations (BenchmarkServeHTTPTraced). Its
// replicas get the read's own context, which says "not sampled", so that
// they do not record their part of the trace either.
func (rt *readTrace) startAttempt(a hedge.Attempt, role int, replica string, tied bool, out *http.Request) {
	if !rt.span.IsRecording() {
		rt.t.inject(rt.ctx, out.Header)
		return
	}
	ctx, span := rt.t.tracer.Start(rt.ctx, spanName(out.Method, role),
		clientKind,
		trace.WithAttributes(
			methodAttr(out.Method),
			attrReplica.String(replica),
			attrRole.String(traceRoles[role]),
			attrAttempt.Int(a.Index),
			attrTrigger.String(a.Trigger.String()),
		))
	if tied {
		span.SetAttributes(attrTied.Bool(true))
	}
	rt.attempts[a.Index] = span
	rt.t.inject(ctx, out.Header)
}

// attemptDone notes, in attempt a's Done, what it got (a status, or why it
// failed) and when it ended: its span ends then, whenever its outcome is
// settled.
func (rt *readTrace) attemptDone(a hedge.Attempt, resp *http.Response, verdict error) {
	span := rt.attempts[a.Index]
	if span == nil {
		return // not recorded
	}
	rt.ended[a.Index] = time.Now()
	if resp != nil {
		span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	}
	if verdict == nil {
		return
	}
	if reason := failureReason(resp, verdict); reason != "" {
		span.SetAttributes(attrFailure.String(reason))
		span.SetStatus(codes.Error, verdict.Error())
	}
}

// endAttempt ends attempt i's span with its outcome (outWon, ...), once it
// is settled: in the attempt's Done, or when the read is decided.
func (rt *readTrace) endAttempt(i, outcome int) {
	span := rt.attempts[i]
	if span == nil {
		return
	}
	span.SetAttributes(attrOutcome.String(outcomeNames[outcome]))
	span.End(trace.WithTimestamp(rt.ended[i]))
}

// suppressed records on the read's span that a hedge it wanted (attempt
// a) was not sent, and why.
func (rt *readTrace) suppressed(a hedge.Attempt, reason hedge.SuppressReason) {
	span := rt.span
	if !span.IsRecording() {
		return
	}
	r := reason.String()
	span.AddEvent(eventSuppress, trace.WithAttributes(
		attrSuppReason.String(r),
		attrSuppWanted.String(a.Trigger.String()),
		attrSuppIndex.Int(a.Index),
	))
	span.SetAttributes(attrSuppressed.String(r))
}

// startShadow starts the span of a shadow of the read to replica, and
// writes its trace context into h, the shadow's header. A read not
// recorded makes none, as for its attempts (see startAttempt).
func (rt *readTrace) startShadow(method, replica string, h http.Header) trace.Span {
	if !rt.span.IsRecording() {
		rt.t.inject(rt.ctx, h)
		return nil
	}
	ctx, span := rt.t.tracer.Start(rt.ctx, spanName(method, roleShadow),
		clientKind,
		trace.WithAttributes(
			methodAttr(method),
			attrReplica.String(replica),
			attrRole.String(traceRoles[roleShadow]),
		))
	rt.t.inject(ctx, h)
	return span
}

// endShadow ends a shadow's span (nil: not traced) with its outcome.
func endShadow(span trace.Span, outcome int, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(attrOutcome.String(outcomeNames[outcome]))
	if outcome == outFailed {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
