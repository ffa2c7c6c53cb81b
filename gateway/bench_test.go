package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	runtimemetrics "runtime/metrics"
	"testing"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/internal/h1server"
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

// BenchmarkProxiedRead counts the gateway's own allocations per proxied
// read, the server of its clients (h1server), the handler, the engine and
// the backend client (internal/h1) together, over real sockets on
// 127.0.0.1: the client and the backend speak raw bytes from buffers of
// their own and allocate nothing per read, so that every allocation
// reported is the gateway's (the direct sub-benchmark, the client reading
// the backend without the gateway, shows 0). Its time per read is the
// whole loop's, client and backend included:
//
//	go test -run '^$' -bench ProxiedRead -benchmem -count 6 ./gateway
func BenchmarkProxiedRead(b *testing.B) {
	backend := startRawBackend(b)
	defer backend.Close()
	b.Run("direct", func(b *testing.B) { benchRawReads(b, backend.Addr().String()) })
	b.Run("gateway", func(b *testing.B) {
		g, err := New(Config{Backends: []string{"http://" + backend.Addr().String()}, MaxInFlightRequests: 1024})
		if err != nil {
			b.Fatal(err)
		}
		defer g.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := h1server.Like(g.Server(ServerConfig{}), g) // as tailgate serve serves plain-HTTP clients
		done := make(chan struct{})
		go func() { srv.Serve(ln); close(done) }()
		defer func() { srv.Close(); <-done }()
		benchRawReads(b, ln.Addr().String())
	})
}

// wrkRequest is a read as wrk sends it.
var wrkRequest = []byte("GET /item?id=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")

// benchRawReads reads addr from 8 connections per core at once, each a
// keep-alive connection that sends wrkRequest and reads the answer into a
// buffer of its own. It reports the goroutines the process started per
// read besides (0 for the direct reads; the gateway's design needs none
// for a read answered within h1server's WatchAfter).
func benchRawReads(b *testing.B, addr string) {
	b.ReportAllocs()
	b.SetParallelism(8)
	created := func() uint64 {
		s := []runtimemetrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
		runtimemetrics.Read(s)
		return s[0].Value.Uint64()
	}
	g0 := created()
	defer func() { b.ReportMetric(float64(created()-g0)/float64(b.N), "goroutines/op") }()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		for pb.Next() {
			if _, err := c.Write(wrkRequest); err != nil {
				b.Error(err)
				return
			}
			if err := readRawResponse(c, buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// readRawResponse reads one answer from c into buf and checks that it is
// a 200 framed by Content-Length, without allocating.
func readRawResponse(c net.Conn, buf []byte) error {
	n, end := 0, -1
	for end < 0 {
		m, err := c.Read(buf[n:])
		if err != nil {
			return err
		}
		n += m
		end = bytes.Index(buf[:n], crlfcrlf)
		if end < 0 && n == len(buf) {
			return errors.New("header block larger than the buffer")
		}
	}
	head := buf[:end]
	if !bytes.HasPrefix(head, []byte("HTTP/1.1 200 ")) {
		return errors.New("not a 200: " + string(head))
	}
	i := bytes.Index(head, []byte("\r\nContent-Length: "))
	if i < 0 {
		return errors.New("no Content-Length: " + string(head))
	}
	length := 0
	for _, d := range head[i+len("\r\nContent-Length: "):] {
		if d < '0' || d > '9' {
			break
		}
		length = length*10 + int(d-'0')
	}
	for want := end + 4 + length; n < want; {
		m, err := c.Read(buf[n:want])
		if err != nil {
			return err
		}
		n += m
	}
	return nil
}

var crlfcrlf = []byte("\r\n\r\n")

// startRawBackend starts a backend on 127.0.0.1 that answers each request
// on a connection with the same bytes, from buffers of its own: it
// allocates nothing per read. Close its listener to stop it; the
// connections end when their clients close them.
func startRawBackend(b *testing.B) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 28\r\n\r\n" + `{"value":"0123456789abcdef"}`)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 8192)
				n := 0
				for {
					m, err := c.Read(buf[n:])
					if err != nil {
						return
					}
					n += m
					// Each request (the gateway sends one at a time) ends
					// its header block; a read has no body.
					for {
						end := bytes.Index(buf[:n], crlfcrlf)
						if end < 0 {
							break
						}
						n = copy(buf, buf[end+4:n])
						if _, err := c.Write(answer); err != nil {
							return
						}
					}
					if n == len(buf) {
						return
					}
				}
			}()
		}
	}()
	return ln
}
