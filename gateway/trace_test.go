package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/memnet"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// tracedConfig returns cfg with a TracerProvider that records, as they
// end, in the returned exporter, the spans of every read but those whose
// client's traceparent says not sampled (the SDK's default sampler).
func tracedConfig(t *testing.T, cfg Config) (Config, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	cfg.TracerProvider = tp
	return cfg, exp
}

// attr returns span s's attribute k as a string ("" if absent).
func attr(s tracetest.SpanStub, k attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value.Emit()
		}
	}
	return ""
}

// spansByRole returns the spans of exp by their tailgate.role; the read's
// own, which has none, under "read". It fails on two spans of one role.
func spansByRole(t *testing.T, exp *tracetest.InMemoryExporter) map[string]tracetest.SpanStub {
	t.Helper()
	m := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		role := attr(s, attrRole)
		if role == "" {
			role = "read"
		}
		if _, dup := m[role]; dup {
			t.Fatalf("two %s spans: %v", role, names(exp.GetSpans()))
		}
		m[role] = s
	}
	return m
}

func names(spans tracetest.SpanStubs) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	return n
}

// traceparentOf is the W3C traceparent that carries span context sc.
func traceparentOf(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// A hedged read is one server span with two client spans, its children:
// the primary, to the replica that straggled, lost (cancelled when the
// hedge won); the hedge, sent after exactly the delay for that reason,
// won. Each replica received its own attempt's span as the traceparent's
// parent id, in the read's trace.
func TestTraceHedgedRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", straggleUnlessHedge)
		b := newMemBackend(net, "b", straggleUnlessHedge)
		cfg, exp := tracedConfig(t, Config{Policy: fixedPolicy(20 * time.Millisecond)})
		g := newMemGateway(t, net, cfg, a, b)
		start := time.Now()
		w := serveIn(g, http.MethodGet, "/item?id=7&token=secret", nil)
		if w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		synctest.Wait()
		spans := spansByRole(t, exp)
		read, primary, hedged := spans["read"], spans["primary"], spans["hedge"]
		if len(spans) != 3 || !read.SpanContext.IsValid() || !primary.SpanContext.IsValid() || !hedged.SpanContext.IsValid() {
			t.Fatalf("spans %v, want the read's, a primary's and a hedge's", names(exp.GetSpans()))
		}

		winner, loser := a, b
		if w.Body.String() == "b" {
			winner, loser = b, a
		}
		if read.Name != "GET" || read.SpanKind != trace.SpanKindServer || read.Parent.IsValid() {
			t.Errorf("read span %q kind %v parent %v: want a root server span named GET", read.Name, read.SpanKind, read.Parent)
		}
		for k, want := range map[attribute.Key]string{
			"http.request.method": "GET", "url.path": "/item", "http.response.status_code": "200",
			attrAttempts: "2", attrHedgeWon: "true", attrWinner: winner.URL,
		} {
			if got := attr(read, k); got != want {
				t.Errorf("read span %s = %q, want %q", k, got, want)
			}
		}
		if !read.StartTime.Equal(start) || !read.EndTime.Equal(start.Add(20*time.Millisecond)) {
			t.Errorf("read span from %v to %v, want 0 to 20ms", read.StartTime.Sub(start), read.EndTime.Sub(start))
		}

		for _, c := range []struct {
			span                   tracetest.SpanStub
			name, trigger, outcome string
			to                     *backend
			from, to_              time.Duration
		}{
			{primary, "GET primary", "primary", "lost", loser, 0, 20 * time.Millisecond},
			{hedged, "GET hedge", "delay", "won", winner, 20 * time.Millisecond, 20 * time.Millisecond},
		} {
			s := c.span
			if s.Name != c.name || s.SpanKind != trace.SpanKindClient || !s.Parent.Equal(read.SpanContext) {
				t.Errorf("%s: kind %v, parent %v; want a client span, child of the read's %v", s.Name, s.SpanKind, s.Parent.SpanID(), read.SpanContext.SpanID())
			}
			if got := attr(s, attrReplica); got != c.to.URL {
				t.Errorf("%s went to %s, want %s", c.name, got, c.to.URL)
			}
			if got, got2 := attr(s, attrTrigger), attr(s, attrOutcome); got != c.trigger || got2 != c.outcome {
				t.Errorf("%s: trigger %s outcome %s, want %s and %s", c.name, got, got2, c.trigger, c.outcome)
			}
			if !s.StartTime.Equal(start.Add(c.from)) || !s.EndTime.Equal(start.Add(c.to_)) {
				t.Errorf("%s from %v to %v, want %v to %v", c.name, s.StartTime.Sub(start), s.EndTime.Sub(start), c.from, c.to_)
			}
			if s.Status.Code == codes.Error {
				t.Errorf("%s in error: %v", c.name, s.Status)
			}
			// What the replica received: this attempt's own context.
			if got, want := c.to.last().Header.Get("Traceparent"), traceparentOf(s.SpanContext); got != want {
				t.Errorf("%s's replica got traceparent %q, want %q", c.name, got, want)
			}
		}
		if got := attr(hedged, "http.response.status_code"); got != "200" {
			t.Errorf("hedge's status %q", got)
		}
	})
}

// A client's traceparent is the parent of the read's span (the trace goes
// on), never forwarded as it came: each replica gets its attempt's span
// as the parent, in the client's trace, with the client's tracestate. A
// tracestate without a valid traceparent is dropped with it.
func TestTraceClientTraceparentIsParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, b.name) })
		cfg, exp := tracedConfig(t, Config{})
		g := newMemGateway(t, net, cfg, a)

		const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		if w := serveIn(g, http.MethodGet, "/x", nil, "Traceparent", client, "Tracestate", "vendor=opaque"); w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		spans := spansByRole(t, exp)
		read, primary := spans["read"], spans["primary"]
		if got := traceparentOf(read.Parent); got != client || !read.Parent.IsRemote() {
			t.Errorf("read span's parent %s (remote %v), want the client's %s", got, read.Parent.IsRemote(), client)
		}
		if !primary.Parent.Equal(read.SpanContext) || primary.SpanContext.TraceID() != read.Parent.TraceID() {
			t.Errorf("primary: parent %v trace %v, want the read's span, in the client's trace", primary.Parent.SpanID(), primary.SpanContext.TraceID())
		}
		got := a.last().Header
		if tp := got.Get("Traceparent"); tp != traceparentOf(primary.SpanContext) || len(got["Traceparent"]) != 1 {
			t.Errorf("replica got traceparent %q, want the primary's %q alone", got["Traceparent"], traceparentOf(primary.SpanContext))
		}
		if ts := got["Tracestate"]; len(ts) != 1 || ts[0] != "vendor=opaque" {
			t.Errorf("replica got tracestate %q, want the client's, which goes with its trace", ts)
		}

		// A malformed traceparent: a new trace, and its tracestate goes.
		exp.Reset()
		if w := serveIn(g, http.MethodGet, "/x", nil, "Traceparent", "00-zz-nonsense-01", "Tracestate", "vendor=orphan"); w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		spans = spansByRole(t, exp)
		read, primary = spans["read"], spans["primary"]
		if read.Parent.IsValid() {
			t.Errorf("read span has parent %v from a malformed traceparent", read.Parent)
		}
		got = a.last().Header
		if tp := got.Get("Traceparent"); tp != traceparentOf(primary.SpanContext) {
			t.Errorf("replica got traceparent %q, want the primary's %q", tp, traceparentOf(primary.SpanContext))
		}
		if ts, ok := got["Tracestate"]; ok {
			t.Errorf("replica got tracestate %q, which belonged to no valid traceparent", ts)
		}
	})
}

// A read its client did not sample is not recorded, nor its attempts, a
// hedge included; each replica still gets a traceparent in the client's
// trace, saying not sampled, whose parent is the gateway's read (not the
// client's span: the gateway is a hop of the trace).
func TestTraceUnsampledRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", straggleUnlessHedge)
		b := newMemBackend(net, "b", straggleUnlessHedge)
		cfg, exp := tracedConfig(t, Config{Policy: fixedPolicy(20 * time.Millisecond)})
		g := newMemGateway(t, net, cfg, a, b)
		const trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		if w := serveIn(g, http.MethodGet, "/x", nil, "Traceparent", "00-"+trace+"-"+span+"-00"); w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		synctest.Wait()
		if spans := exp.GetSpans(); len(spans) != 0 {
			t.Errorf("spans %v of an unsampled read", names(spans))
		}
		pa, pb := a.last().Header.Get("Traceparent"), b.last().Header.Get("Traceparent")
		re := regexp.MustCompile("^00-" + trace + "-[0-9a-f]{16}-00$")
		if !re.MatchString(pa) || pa != pb || strings.Contains(pa, span) {
			t.Errorf("replicas got %q and %q; want one traceparent, the gateway's read in the client's trace, not sampled", pa, pb)
		}
	})
}

// A hedge wanted and not sent is an event on the read's span, at the time
// it was wanted, with its reason, and the span's attribute names the
// reason: here the budget (its one credit spent by the read before) and
// the attempt limit (no free slot).
func TestTraceSuppressedHedge(t *testing.T) {
	for _, c := range []struct {
		reason string
		cfg    func(*Config)
	}{
		{"budget", func(cfg *Config) {
			budget, _ := hedge.NewBudget(0, 1)
			cfg.Policy.Budget = budget
		}},
		{"capacity", func(cfg *Config) { cfg.MaxInFlightAttempts = 1 }},
	} {
		t.Run(c.reason, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := new(memnet.Transport)
				slow := func(b *backend, w http.ResponseWriter, r *http.Request) {
					if r.Header.Get(hedge.HedgeHeader) == "" && !memnet.Sleep(r.Context(), 50*time.Millisecond) {
						return
					}
					io.WriteString(w, b.name)
				}
				a := newMemBackend(net, "a", slow)
				b := newMemBackend(net, "b", slow)
				cfg := Config{Policy: fixedPolicy(20 * time.Millisecond)}
				c.cfg(&cfg)
				cfg, exp := tracedConfig(t, cfg)
				g := newMemGateway(t, net, cfg, a, b)
				if c.reason == "budget" {
					serveIn(g, http.MethodGet, "/spend", nil) // hedged: the credit goes
					synctest.Wait()
					exp.Reset()
				}
				start := time.Now()
				if w := serveIn(g, http.MethodGet, "/x", nil); w.Code != 200 {
					t.Fatalf("%d %s", w.Code, w.Body)
				}
				synctest.Wait()
				spans := spansByRole(t, exp)
				read, primary := spans["read"], spans["primary"]
				if len(spans) != 2 || attr(primary, attrOutcome) != "won" {
					t.Fatalf("spans %v, primary outcome %q: want the read's and the primary's, which won", names(exp.GetSpans()), attr(primary, attrOutcome))
				}
				if got := attr(read, attrSuppressed); got != c.reason {
					t.Errorf("read span's %s = %q, want %q", attrSuppressed, got, c.reason)
				}
				if len(read.Events) != 1 {
					t.Fatalf("events %v, want one", read.Events)
				}
				ev := read.Events[0]
				s := tracetest.SpanStub{Attributes: ev.Attributes}
				if ev.Name != eventSuppress || attr(s, attrSuppReason) != c.reason || attr(s, attrSuppWanted) != "delay" || attr(s, attrSuppIndex) != "1" {
					t.Errorf("event %s %v, want %q for the reason %s, wanted after the delay, attempt 1", ev.Name, ev.Attributes, eventSuppress, c.reason)
				}
				if !ev.Time.Equal(start.Add(20 * time.Millisecond)) {
					t.Errorf("suppressed at %v, want at the 20ms delay", ev.Time.Sub(start))
				}
			})
		})
	}
}

// In tied mode both copies are attempts of the read: the first a primary,
// the second a "tied" copy, each marked as carrying its tie.
func TestTraceTiedCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", straggleUnlessHedge)
		b := newMemBackend(net, "b", straggleUnlessHedge)
		cfg, exp := tracedConfig(t, Config{Tied: true})
		g := newMemGateway(t, net, cfg, a, b)
		if w := serveIn(g, http.MethodGet, "/x", nil); w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		synctest.Wait()
		spans := spansByRole(t, exp)
		first, second := spans["primary"], spans["tied"]
		if len(spans) != 3 || second.Name != "GET tied" {
			t.Fatalf("spans %v, want the read's, the primary's and the tied copy's", names(exp.GetSpans()))
		}
		if attr(first, attrTied) != "true" || attr(second, attrTied) != "true" || attr(first, attrOutcome) != "lost" || attr(second, attrOutcome) != "won" {
			t.Errorf("first: tied %q %q; second: tied %q %q; want both tied, the second won",
				attr(first, attrTied), attr(first, attrOutcome), attr(second, attrTied), attr(second, attrOutcome))
		}
	})
}

// A failed attempt's span is in error, with why (as
// tailgate_attempt_failures_total counts it), and the read's too when
// every attempt failed (502).
func TestTraceFailedAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		fail := func(b *backend, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }
		a := newMemBackend(net, "a", fail)
		b := newMemBackend(net, "b", fail)
		cfg, exp := tracedConfig(t, Config{Policy: fixedPolicy(time.Second)})
		g := newMemGateway(t, net, cfg, a, b)
		if w := serveIn(g, http.MethodGet, "/x", nil); w.Code != http.StatusBadGateway {
			t.Fatalf("%d %s, want 502", w.Code, w.Body)
		}
		synctest.Wait()
		spans := spansByRole(t, exp)
		for _, role := range []string{"primary", "hedge"} {
			s := spans[role]
			if attr(s, attrOutcome) != "failed" || attr(s, attrFailure) != failStatus || attr(s, "http.response.status_code") != "503" || s.Status.Code != codes.Error {
				t.Errorf("%s: outcome %q failure %q status %q %v; want failed for its 503, in error", role,
					attr(s, attrOutcome), attr(s, attrFailure), attr(s, "http.response.status_code"), s.Status)
			}
		}
		if got := attr(spans["hedge"], attrTrigger); got != "failure" {
			t.Errorf("hedge's trigger %q, want failure: it went at once, for the primary's 503", got)
		}
		read := spans["read"]
		if attr(read, attrReason) != reasonFailed || read.Status.Code != codes.Error || attr(read, "http.response.status_code") != "502" {
			t.Errorf("read: reason %q status %v code %q", attr(read, attrReason), read.Status, attr(read, "http.response.status_code"))
		}
	})
}

// A shadow to a replica on probation is a child of the read that was due
// it, and the replica gets the shadow's own span as its parent.
func TestTraceShadow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 5 * time.Millisecond, "b.test": 5 * time.Millisecond, "c.test": 100 * time.Millisecond})
		cfg, exp := tracedConfig(t, Config{Backends: memBackends, Base: m, Policy: hedge.Policy{MaxAttempts: 1}, Replica: quickProbation})
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		untilProbation(t, g, 2, 10*time.Second, onProbation)
		time.Sleep(time.Second) // a shadow is due, and the last one has ended
		exp.Reset()
		if code, body, _ := getIn(g, "/item?id=1"); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond) // for the shadow to end
		spans := spansByRole(t, exp)
		read, shadow := spans["read"], spans["shadow"]
		if len(spans) != 3 || shadow.Name != "GET shadow" {
			t.Fatalf("spans %v, want the read's, its primary's and a shadow's", names(exp.GetSpans()))
		}
		if !shadow.Parent.Equal(read.SpanContext) || attr(shadow, attrReplica) != "http://c.test" || attr(shadow, attrOutcome) != "answered" {
			t.Errorf("shadow: parent %v replica %q outcome %q; want the read's child, to c, answered",
				shadow.Parent.SpanID(), attr(shadow, attrReplica), attr(shadow, attrOutcome))
		}
		m.mu.Lock()
		got := m.shadowed[len(m.shadowed)-1].Header.Get("Traceparent")
		m.mu.Unlock()
		if want := traceparentOf(shadow.SpanContext); got != want {
			t.Errorf("shadow's replica got traceparent %q, want %q", got, want)
		}
	})
}

// Requests refused before any attempt are traced too, with the reason.
func TestTraceRefusedRequest(t *testing.T) {
	net := new(memnet.Transport)
	a := newMemBackend(net, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {})
	cfg, exp := tracedConfig(t, Config{})
	g := newMemGateway(t, net, cfg, a)
	if w := serveIn(g, "FROB", "/x", nil); w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("%d", w.Code)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "HTTP" || attr(spans[0], "http.request.method") != "_OTHER" || attr(spans[0], attrReason) != rejectMethod {
		t.Errorf("spans %v: want one named HTTP, method _OTHER, refused for its method", spans)
	}
	if a.hits.Load() != 0 {
		t.Errorf("the replica was sent a refused request")
	}
}

// Tracing off (no TracerProvider): no span anywhere, not even from the
// global provider; a client's trace context is forwarded as it came, like
// any end-to-end header; and a read allocates what it did before tracing
// existed.
func TestTraceOff(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)

	net := new(memnet.Transport)
	a := newMemBackend(net, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, b.name) })
	g := newMemGateway(t, net, Config{}, a)
	const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if w := serveIn(g, http.MethodGet, "/x", nil, "Traceparent", client, "Tracestate", "vendor=opaque"); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans with tracing off", n)
	}
	if h := a.last().Header; h.Get("Traceparent") != client || h.Get("Tracestate") != "vendor=opaque" {
		t.Errorf("replica got %q %q, want the client's trace context untouched", h.Get("Traceparent"), h.Get("Tracestate"))
	}
}

// readAllocs is what a read through BenchmarkServeHTTP's gateway
// allocates without tracing: 16, before tracing existed and after (a
// change elsewhere on the request path that moves it moves this too).
const readAllocs = 16

// With tracing off, a read allocates nothing for it: as many allocations
// as before tracing was added.
func TestTraceOffAllocatesNothing(t *testing.T) {
	g, err := New(Config{Backends: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}, Base: &cannedBackend{body: []byte(`{"value":"0123456789abcdef"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	req := httptest.NewRequest(http.MethodGet, "/item?id=1", nil)
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	w := &discardWriter{h: http.Header{}}
	allocs := testing.AllocsPerRun(200, func() {
		clear(w.h)
		g.ServeHTTP(w, req)
	})
	if allocs > readAllocs {
		t.Errorf("a read allocates %v times with tracing off, want at most %d (tracing off must cost nothing)", allocs, readAllocs)
	}
	// And tracing on does record, on the same path: the figure above is
	// not that of a path that skips the hooks.
	cfg, exp := tracedConfig(t, Config{Backends: []string{"http://127.0.0.1:1"}, Base: &cannedBackend{body: []byte(`{}`)}})
	g2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	g2.ServeHTTP(w, req)
	if got := names(exp.GetSpans()); strings.Join(got, ",") != "GET primary,GET" {
		t.Errorf("spans with tracing on: %v", got)
	}
}

// The carrier reads a tracestate split over header lines as one list, and
// writes the two headers under their canonical keys.
func TestTraceHeaderCarrier(t *testing.T) {
	h := http.Header{"Tracestate": {"a=1", "b=2"}, "Traceparent": {"00-x"}}
	c := headerCarrier(h)
	if got := c.Get("tracestate"); got != "a=1,b=2" {
		t.Errorf("tracestate %q, want the lines joined", got)
	}
	if got := c.Get("traceparent"); got != "00-x" {
		t.Errorf("traceparent %q", got)
	}
	c.Set("traceparent", "00-y")
	c.Set("tracestate", "c=3")
	if len(h) != 2 || h.Get("Traceparent") != "00-y" || len(h["Tracestate"]) != 1 || h.Get("Tracestate") != "c=3" {
		t.Errorf("header after Set: %v", h)
	}
}

// A reload keeps the TracerProvider New was given, whatever the new
// Config says: reads go on being traced.
func TestTraceKeptByReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, b.name) })
		cfg, exp := tracedConfig(t, Config{})
		g := newMemGateway(t, net, cfg, a)
		if _, err := g.Reload(Config{Backends: []string{a.URL}, Base: net, Timeout: time.Second}); err != nil {
			t.Fatal(err)
		}
		if w := serveIn(g, http.MethodGet, "/x", nil); w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if got := names(exp.GetSpans()); strings.Join(got, ",") != "GET primary,GET" {
			t.Errorf("spans after a reload: %v", got)
		}
	})
}
