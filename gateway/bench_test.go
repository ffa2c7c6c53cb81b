package gateway

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tailgate-dev/tailgate/deadline"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// cannedBackend answers at once from memory, so the benchmark measures the
// gateway's own per-request work.
type cannedBackend struct{ body []byte }

func (c *cannedBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, ContentLength: int64(len(c.body)),
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(bytes.NewReader(c.body)), Request: req,
	}, nil
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

func BenchmarkServeHTTP(b *testing.B) { benchServeHTTP(b, Config{}, nil) }

// benchServeHTTP serves one read after another through a gateway built
// from cfg over two canned replicas, the request as wrk sends it, with
// header set on it: the gateway's own cost per read.
func benchServeHTTP(b *testing.B, cfg Config, header http.Header) {
	cfg.Backends = []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}
	cfg.Base = &cannedBackend{body: []byte(`{"value":"0123456789abcdef"}`)}
	g, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/item?id=1", nil)
	req.Header.Set("User-Agent", "wrk")
	req.Header.Set("Accept", "*/*")
	for k, v := range header {
		req.Header[k] = v
	}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		g.ServeHTTP(w, req)
	}
}

// BenchmarkServeHTTPWithDeadline is BenchmarkServeHTTP for a client that
// sends its own, shorter, deadline: the refusal check and the primary's
// value are on the path.
func BenchmarkServeHTTPWithDeadline(b *testing.B) {
	benchServeHTTP(b, Config{}, http.Header{deadline.Header: {"250m"}})
}

// BenchmarkLoopback runs real HTTP through the gateway on 127.0.0.1, with
// parallel keep-alive clients and a trivial backend: for profiles of the
// whole request path. Its sub-benchmarks differ in the backend client:
// the default (internal/h1), and net/http's Transport as the gateway built
// it before (newStdBase), side by side.
func BenchmarkLoopback(b *testing.B) {
	body := []byte(`{"value":"0123456789abcdef"}`)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer backend.Close()
	cfg := Config{Backends: []string{backend.URL}, MaxInFlightRequests: 1024}
	std, err := cfg.withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		base http.RoundTripper
	}{{"h1", nil}, {"net-http", newStdBase(std, newBackendTLS(dialBackend, nil))}} {
		b.Run(c.name, func(b *testing.B) {
			cfg.Base = c.base
			g, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			front := httptest.NewServer(g)
			defer front.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			defer client.CloseIdleConnections()
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(front.URL + "/item?id=1")
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}

// BenchmarkServeHTTPTied is BenchmarkServeHTTP in tied mode, for a read
// whose first copy answers within the tied delay (no second copy sent):
// the tie (identity, twin's ticket, headers) is on the path.
func BenchmarkServeHTTPTied(b *testing.B) { benchServeHTTP(b, Config{Tied: true}, nil) }

// BenchmarkServeHTTPAccessLog is BenchmarkServeHTTP with the access log
// on, every request logged, as JSON to nowhere: what a line costs.
func BenchmarkServeHTTPAccessLog(b *testing.B) {
	benchServeHTTP(b, Config{AccessLog: slog.New(slog.NewJSONHandler(io.Discard, nil))}, nil)
}

// BenchmarkServeHTTPTraced is BenchmarkServeHTTP with tracing on: every
// read recorded (sampled; spans end in a provider with no exporter, so
// this is the gateway's and the SDK's cost, not an export's), or none
// (unsampled: spans are still made, and their context still goes to the
// replica).
func BenchmarkServeHTTPTraced(b *testing.B) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}} {
		b.Run(c.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler))
			defer tp.Shutdown(context.Background())
			benchServeHTTP(b, Config{TracerProvider: tp}, nil)
		})
	}
}
