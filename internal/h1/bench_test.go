package h1

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkRoundTrip sends GETs over loopback to a trivial net/http
// backend, through this Transport and through net/http's, each body read
// in full and closed as the gateway does; sequential (one connection) and
// from 8 goroutines at once.
func BenchmarkRoundTrip(b *testing.B) {
	body := []byte(`{"value":"0123456789abcdef"}`)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer backend.Close()
	h1, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer h1.CloseIdleConnections()
	std := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}
	defer std.CloseIdleConnections()
	for _, tr := range []struct {
		name string
		rt   http.RoundTripper
	}{{"h1", h1}, {"net-http", std}} {
		send := func(b *testing.B, req *http.Request, buf []byte) {
			resp, err := tr.rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(resp.Body, buf[:len(body)]); err != nil {
				b.Fatal(err)
			}
			if n, err := resp.Body.Read(buf); n != 0 || err != io.EOF {
				b.Fatalf("body longer than expected: %d, %v", n, err)
			}
			resp.Body.Close()
		}
		b.Run(tr.name+"/sequential", func(b *testing.B) {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, backend.URL+"/item?id=1", nil)
			buf := make([]byte, 512)
			b.ReportAllocs()
			for b.Loop() {
				send(b, req, buf)
			}
		})
		b.Run(tr.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(4) // 8 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				ctx, cancel := context.WithCancel(context.Background()) // as an attempt's
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, backend.URL+"/item?id=1", nil)
				buf := make([]byte, 512)
				for pb.Next() {
					send(b, req, buf)
				}
			})
		})
	}
}
