package gateway

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// A client that hangs up mid-request cancels the backend attempt, through
// either server: the engine's attempt sees its context end while the
// backend still works on it.
func TestPlainServerClientGoneCancelsAttempt(t *testing.T) {
	for _, plain := range plainServers {
		t.Run(plain, func(t *testing.T) {
			entered := make(chan struct{}, 1)
			a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
				entered <- struct{}{}
				select {
				case <-r.Context().Done():
					b.cancelled <- r.RequestURI
				case <-time.After(5 * time.Second):
				}
			})
			g, err := New(Config{Backends: []string{a.URL}, Timeout: 10 * time.Second, Policy: hedge.Policy{MaxAttempts: 1}, DisableProbation: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			c, err := net.Dial("tcp", servePlain(t, g, plain))
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
			<-entered
			start := time.Now()
			c.Close()
			select {
			case uri := <-a.cancelled:
				if uri != "/slow" {
					t.Errorf("cancelled %q", uri)
				}
				if took := time.Since(start); took > time.Second {
					t.Errorf("the attempt was cancelled %v after the client left", took)
				}
			case <-time.After(4 * time.Second):
				t.Fatal("the client left; the backend attempt went on")
			}
			waitIdle(t, g)
		})
	}
}

// The h1 server gets Server's header limit: a block over it is answered
// 431. (Its write limit and its extension by a reload:
// TestLoopbackReloadRaisedTimeoutExtendsWrites, on both servers.)
func TestPlainServerHeaderLimit(t *testing.T) {
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	g, err := New(Config{Backends: []string{a.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	addr := servePlain(t, g, plainH1)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/x", nil)
	req.Header.Set("X-Big", strings.Repeat("a", DefaultMaxHeaderBytes+8<<10))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("header block over the limit: %v, want 431", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("header block over the limit: %d, want 431", resp.StatusCode)
	}
}

// BenchmarkLoopbackServers is BenchmarkLoopback's proxied read (client,
// gateway, backend in one process; the backend client internal/h1) with
// the gateway served by each server of plain-HTTP clients:
//
//	go test -run '^$' -bench LoopbackServers -benchmem -count 6 ./gateway
func BenchmarkLoopbackServers(b *testing.B) {
	body := []byte(`{"value":"0123456789abcdef"}`)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer backend.Close()
	for _, plain := range plainServers {
		b.Run(strings.ReplaceAll(plain, "/", "-"), func(b *testing.B) {
			g, err := New(Config{Backends: []string{backend.URL}, MaxInFlightRequests: 1024})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := plainServer(g, ServerConfig{}, plain)
			done := make(chan struct{})
			go func() { srv.Serve(ln); close(done) }()
			defer func() { srv.Close(); <-done }()
			url := "http://" + ln.Addr().String() + "/item?id=1"
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			defer client.CloseIdleConnections()
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(url)
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
