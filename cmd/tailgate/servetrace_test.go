package main

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

func TestServeRejectsBadTraceFlags(t *testing.T) {
	ok := "http://127.0.0.1:1"
	for _, args := range [][]string{
		{"-trace-sample", "0.5"}, // without an endpoint
		{"-trace-otlp-endpoint", "127.0.0.1:4318"},
		{"-trace-otlp-endpoint", "grpc://127.0.0.1:4317"},
		{"-trace-otlp-endpoint", "http://"},
		{"-trace-otlp-endpoint", "http://127.0.0.1:4318?x=1"},
		{"-trace-otlp-endpoint", "http://user:pw@127.0.0.1:4318"},
		{"-trace-otlp-endpoint", "http://127.0.0.1:4318", "-trace-sample", "1.5"},
		{"-trace-otlp-endpoint", "http://127.0.0.1:4318", "-trace-sample", "-0.1"},
		{"-trace-otlp-endpoint", "http://127.0.0.1:4318", "-trace-sample", "NaN"},
	} {
		code, _, stderr := runCmd(append([]string{"serve", "-backends", ok}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, "-trace-") {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 naming the trace flag", args, code, stderr)
		}
	}
	for base, want := range map[string]string{
		"http://127.0.0.1:4318":          "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":         "http://127.0.0.1:4318/v1/traces",
		"https://otel.example:4318/otlp": "https://otel.example:4318/otlp/v1/traces",
	} {
		if got, err := tracesURL(base); got != want || err != nil {
			t.Errorf("tracesURL(%q) = %q, %v; want %q", base, got, err, want)
		}
	}
}

// collector is an OTLP/HTTP trace collector on loopback: it keeps the
// spans it is sent, by trace id, with the service that sent them.
type collector struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
	bad      []string // requests that were not an OTLP/HTTP protobuf export
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &req) != nil {
		c.bad = append(c.bad, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				c.services = append(c.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(nil) // an empty ExportTraceServiceResponse: all accepted
}

// The whole path: serve with -trace-otlp-endpoint and -trace-sample 0
// sends, by the time it has exited, the spans of the one read whose client
// sent a sampled traceparent (the client's decision is kept) and none of
// the read without one (the ratio, 0, applies); the spans are the read's,
// a child of the client's span, and its primary's, whose id the replica
// received in its traceparent; the service is tailgate.
func TestServeExportsTraces(t *testing.T) {
	var mu sync.Mutex
	var received []string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Header.Get("Traceparent"))
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer backend.Close()
	col := &collector{}
	colSrv := httptest.NewServer(col)
	defer colSrv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-backends", backend.URL, "-listen", "127.0.0.1:0", "-admin", "",
			"-trace-otlp-endpoint", colSrv.URL, "-trace-sample", "0", "-drain-timeout", "5s"}, io.Discard, logs)
	}()
	re := regexp.MustCompile(`msg="gateway listening" addr=(\S+)`)
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no listening line in:\n%s", logs.String())
		}
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
		}
	}
	const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, tp := range []string{"", "00-" + clientTrace + "-" + clientSpan + "-01"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/x", nil)
		if tp != "" {
			req.Header.Set("Traceparent", tp)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("serve exited %d:\n%s", code, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit")
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.bad) > 0 {
		t.Errorf("not OTLP/HTTP protobuf exports: %v", col.bad)
	}
	byName := map[string]*tracepb.Span{}
	for _, s := range col.spans {
		if got := hex.EncodeToString(s.TraceId); got != clientTrace {
			t.Errorf("span %q of trace %s: the unsampled read was recorded", s.Name, got)
		}
		byName[s.Name] = s
	}
	read, primary := byName["GET"], byName["GET primary"]
	if len(col.spans) != 2 || read == nil || primary == nil {
		t.Fatalf("spans %v, want GET and GET primary", col.spans)
	}
	if hex.EncodeToString(read.ParentSpanId) != clientSpan || string(primary.ParentSpanId) != string(read.SpanId) {
		t.Errorf("parents: read %x (want the client's %s), primary %x (want the read's %x)", read.ParentSpanId, clientSpan, primary.ParentSpanId, read.SpanId)
	}
	for _, svc := range col.services {
		if svc != "tailgate" {
			t.Errorf("service.name %q, want tailgate", svc)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := "00-" + clientTrace + "-" + hex.EncodeToString(primary.SpanId) + "-01"
	if len(received) != 2 || received[1] != want || !strings.HasSuffix(received[0], "-00") {
		t.Errorf("the replica received traceparents %q; want an unsampled one, then %q", received, want)
	}
}
