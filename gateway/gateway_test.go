package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend is a loopback replica whose behaviour a test scripts.
type backend struct {
	*httptest.Server
	name      string
	hits      atomic.Int32
	hedges    atomic.Int32
	cancelled chan string // request URIs whose cancellation the handler saw
	mu        sync.Mutex
	seen      []*http.Request
	handle    func(b *backend, w http.ResponseWriter, r *http.Request)
}

func newBackend(t *testing.T, name string, handle func(b *backend, w http.ResponseWriter, r *http.Request)) *backend {
	t.Helper()
	b := &backend{name: name, handle: handle, cancelled: make(chan string, 100)}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		if r.Header.Get(hedge.HedgeHeader) != "" {
			b.hedges.Add(1)
		}
		b.mu.Lock()
		b.seen = append(b.seen, r.Clone(context.Background()))
		b.mu.Unlock()
		b.handle(b, w, r)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) last() *http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.seen) == 0 {
		return nil
	}
	return b.seen[len(b.seen)-1]
}

// answer writes the backend's name, or, for a primary, first straggles
// until cancelled when slowPrimary is set.
func straggleUnlessHedge(b *backend, w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(hedge.HedgeHeader) == "" {
		select {
		case <-r.Context().Done():
			b.cancelled <- r.RequestURI
			return
		case <-time.After(5 * time.Second):
		}
	}
	io.WriteString(w, b.name)
}

func newGateway(t *testing.T, cfg Config, backends ...*backend) (*Gateway, *httptest.Server) {
	t.Helper()
	for _, b := range backends {
		cfg.Backends = append(cfg.Backends, b.URL)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(func() {
		srv.Close()
		g.Close()
	})
	return g, srv
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func fixedPolicy(d time.Duration) hedge.Policy {
	b, _ := hedge.NewBudget(1, 1000)
	return hedge.Policy{Delay: d, Budget: b, Gate: hedge.Gate{Disabled: true}}
}

func TestStragglingPrimaryBeatenByHedge(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", straggleUnlessHedge)
	b := newBackend(t, "b", straggleUnlessHedge)
	_, srv := newGateway(t, Config{Policy: fixedPolicy(20 * time.Millisecond)}, a, b)
	start := time.Now()
	resp, body := get(t, srv.URL+"/item?id=7")
	if resp.StatusCode != 200 || (body != "a" && body != "b") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("answer after %v: the hedge did not win", d)
	}
	// The winner got the hedge; the other replica saw its primary cancelled.
	winner, loser := a, b
	if body == "b" {
		winner, loser = b, a
	}
	if winner.hedges.Load() != 1 || loser.hits.Load() != 1 {
		t.Errorf("winner hedges %d, loser hits %d", winner.hedges.Load(), loser.hits.Load())
	}
	select {
	case uri := <-loser.cancelled:
		if uri != "/item?id=7" {
			t.Errorf("cancelled %q", uri)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the straggling primary's backend never saw the cancellation")
	}
}

func TestServerErrorAnsweredByAlternate(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	failPrimary := func(b *backend, w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(hedge.HedgeHeader) == "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, b.name)
	}
	a := newBackend(t, "a", failPrimary)
	b := newBackend(t, "b", failPrimary)
	_, srv := newGateway(t, Config{Policy: fixedPolicy(time.Second)}, a, b)
	start := time.Now()
	resp, body := get(t, srv.URL+"/x")
	if resp.StatusCode != 200 || (body != "a" && body != "b") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("%v: the 503 should launch the hedge at once, not after the 1s delay", d)
	}
	if a.hits.Load()+b.hits.Load() != 2 {
		t.Errorf("hits %d + %d", a.hits.Load(), b.hits.Load())
	}
}

// deadAddr returns a loopback URL nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestAllReplicasDownIs502Fast(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	g, err := New(Config{Backends: []string{deadAddr(t), deadAddr(t)}, Policy: fixedPolicy(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	defer g.Close()
	start := time.Now()
	resp, body := get(t, srv.URL+"/x")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "connection refused") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("502 after %v: should be fast", d)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
}

func TestBreakerOpensProbesAndCloses(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	var healthy atomic.Bool
	var probeGate = make(chan struct{})
	var probes atomic.Int32
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		probes.Add(1)
		<-probeGate // hold the probe so concurrent requests find the slot taken
		io.WriteString(w, "a")
	})
	g, srv := newGateway(t, Config{
		Policy:  hedge.Policy{MaxAttempts: 1},
		Replica: replica.Config{FailureThreshold: 3, Cooldown: 100 * time.Millisecond},
	}, a)
	for i := range 3 {
		if resp, body := get(t, srv.URL+"/x"); resp.StatusCode != 502 || !strings.Contains(body, "replica answered 500") {
			t.Fatalf("request %d: %d %q, want 502 naming the replica's 500", i, resp.StatusCode, body)
		}
	}
	if st := g.Replicas().Snapshot(time.Now())[0]; st.Breaker != replica.Open {
		t.Fatalf("breaker %v after 3 failures", st.Breaker)
	}
	hits := a.hits.Load()
	resp, body := get(t, srv.URL+"/x")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "circuit breaker") || a.hits.Load() != hits {
		t.Fatalf("while open: %d %q, backend hit %d times", resp.StatusCode, body, a.hits.Load()-hits)
	}
	time.Sleep(150 * time.Millisecond) // the cooldown passes
	healthy.Store(true)
	probe := make(chan int, 1)
	go func() {
		resp, _ := get(t, srv.URL+"/probe")
		probe <- resp.StatusCode
	}()
	for probes.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// The probe is out: other requests are not let through meanwhile.
	if resp, _ := get(t, srv.URL+"/x"); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("second request during the probe: %d, want 502", resp.StatusCode)
	}
	close(probeGate)
	if code := <-probe; code != 200 {
		t.Fatalf("probe answered %d", code)
	}
	if st := g.Replicas().Snapshot(time.Now())[0]; st.Breaker != replica.Closed {
		t.Fatalf("breaker %v after a successful probe", st.Breaker)
	}
	if resp, body := get(t, srv.URL+"/x"); resp.StatusCode != 200 || body != "a" {
		t.Errorf("after closing: %d %q", resp.StatusCode, body)
	}
}

func TestLimitsRefuseWith503(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		io.WriteString(w, "a")
	})
	for _, c := range []struct {
		name             string
		requests, atts   int
		wantMsg, metricR string
	}{
		{"requests", 1, 5, "too many requests", "max_requests"},
		{"attempts", 5, 1, "too many backend attempts", "max_attempts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, srv := newGateway(t, Config{Policy: hedge.Policy{MaxAttempts: 1}, MaxInFlightRequests: c.requests, MaxInFlightAttempts: c.atts}, a)
			done := make(chan int)
			go func() {
				resp, _ := get(t, srv.URL+"/held")
				done <- resp.StatusCode
			}()
			<-started
			resp, body := get(t, srv.URL+"/refused")
			if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, c.wantMsg) {
				t.Errorf("%d %q %q", resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
			release <- struct{}{}
			if code := <-done; code != 200 {
				t.Errorf("held request: %d", code)
			}
			if got := counterValue(t, g, "tailgate_rejections_total", "reason", c.metricR); got != 1 {
				t.Errorf("rejections{%s} = %v", c.metricR, got)
			}
		})
	}
}

func TestHedgeWithoutAttemptSlotIsSuppressed(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	release := make(chan struct{})
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { <-release; io.WriteString(w, "a") })
	b := newBackend(t, "b", func(b *backend, w http.ResponseWriter, r *http.Request) { <-release; io.WriteString(w, "b") })
	g, srv := newGateway(t, Config{Policy: fixedPolicy(10 * time.Millisecond), MaxInFlightRequests: 2, MaxInFlightAttempts: 2}, a, b)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { get(t, srv.URL+"/x") })
	}
	deadline := time.Now().Add(5 * time.Second)
	for counterValue(t, g, "tailgate_hedges_suppressed_total", "reason", "capacity") < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	if got := counterValue(t, g, "tailgate_hedges_suppressed_total", "reason", "capacity"); got != 2 {
		t.Errorf("capacity suppressions %v, want 2: both slots were held by primaries", got)
	}
	if a.hedges.Load()+b.hedges.Load() != 0 {
		t.Error("a hedge was sent without a slot")
	}
}

func TestRefusals(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
	_, srv := newGateway(t, Config{}, a)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodPatch} {
		req, _ := http.NewRequest(m, srv.URL+"/x", strings.NewReader("data"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: %d Allow %q", m, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	// A GET with a body.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/x", strings.NewReader("data"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "body") {
		t.Errorf("GET with body: %d %q", resp.StatusCode, body)
	}
	// Raw request lines: absolute-form, authority-form CONNECT, a chunked GET.
	for _, raw := range []string{
		"GET http://evil.example/steal HTTP/1.1\r\nHost: evil.example\r\n\r\n",
		"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\ndata\r\n0\r\n\r\n",
	} {
		code := rawRequest(t, srv.Listener.Addr().String(), raw)
		if code != 400 && code != 405 {
			t.Errorf("%q: %d, want a 4xx refusal", strings.SplitN(raw, "\r\n", 2)[0], code)
		}
	}
	if n := a.hits.Load(); n != 0 {
		t.Errorf("refused requests reached the backend %d times", n)
	}
}

// rawRequest writes raw on a fresh connection and returns the status code.
func rawRequest(t *testing.T, addr, raw string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, raw)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestPathAndQueryForwardedByteForByte(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	var got atomic.Value
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { got.Store(r.RequestURI) })
	_, srv := newGateway(t, Config{}, a)
	for _, uri := range []string{"/a%2Fb", "/a%2fb?x=%20y&z=1+2", "/%7euser/./x", "/p;q?a=b#", "/", "/x?", "//double/slash"} {
		code := rawRequest(t, srv.Listener.Addr().String(), "GET "+uri+" HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
		want := uri
		if code != 200 || got.Load() != want {
			t.Errorf("sent %q: backend got %q (status %d), want %q", uri, got.Load(), code, want)
		}
	}
}

func TestHopByHopStrippedBothWays(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Connection", "X-Resp-Hop")
		h.Set("X-Resp-Hop", "1")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Proxy-Authenticate", "Basic")
		h.Set("X-End-To-End", "kept")
		io.WriteString(w, "a")
	})
	_, srv := newGateway(t, Config{}, a)
	resp, _ := get(t, srv.URL+"/x",
		"Connection", "X-Req-Hop", "X-Req-Hop", "secret", "Keep-Alive", "timeout=5", "Proxy-Connection", "keep-alive",
		"Te", "trailers", "Proxy-Authorization", "Basic abc", "X-Forwarded-For", "10.0.0.1", "X-Custom", "kept")
	r := a.last()
	for _, h := range []string{"X-Req-Hop", "Keep-Alive", "Proxy-Connection", "Te", "Proxy-Authorization"} {
		if v := r.Header.Get(h); v != "" {
			t.Errorf("backend got hop-by-hop %s: %q", h, v)
		}
	}
	if r.Header.Get("X-Custom") != "kept" {
		t.Error("end-to-end request header lost")
	}
	if xff := r.Header.Get("X-Forwarded-For"); xff != "10.0.0.1, 127.0.0.1" {
		t.Errorf("X-Forwarded-For %q", xff)
	}
	if r.Header.Get("X-Forwarded-Host") != strings.TrimPrefix(srv.URL, "http://") || r.Header.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("X-Forwarded-Host %q Proto %q", r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Forwarded-Proto"))
	}
	if r.Host != strings.TrimPrefix(a.URL, "http://") {
		t.Errorf("backend Host %q, want its own address", r.Host)
	}
	for _, h := range []string{"X-Resp-Hop", "Keep-Alive", "Proxy-Authenticate"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("client got hop-by-hop %s: %q", h, v)
		}
	}
	if resp.Header.Get("X-End-To-End") != "kept" {
		t.Error("end-to-end response header lost")
	}
}

func TestOversizeResponseIs502(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, 2<<20))
	})
	_, srv := newGateway(t, Config{Policy: hedge.Policy{MaxAttempts: 1}}, a)
	resp, body := get(t, srv.URL+"/big")
	if resp.StatusCode != 502 || !strings.Contains(body, "larger than 1048576 bytes") {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
}

func TestTimeoutIs504(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	_, srv := newGateway(t, Config{Policy: hedge.Policy{MaxAttempts: 1}, Timeout: 100 * time.Millisecond}, a)
	start := time.Now()
	resp, body := get(t, srv.URL+"/slow")
	if resp.StatusCode != 504 || !strings.Contains(body, "timeout") {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("504 after %v", d)
	}
}

func TestHEADAndLargeHeadContentLength(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5000000")
		w.WriteHeader(200)
	})
	_, srv := newGateway(t, Config{}, a)
	resp, err := http.Head(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != 5000000 {
		t.Errorf("HEAD: %d length %d", resp.StatusCode, resp.ContentLength)
	}
}

func TestH2CBackends(t *testing.T) {
	var protos sync.Map
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto, true)
		io.WriteString(w, "h2c")
	})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Start()
	defer srv.Close()
	g, err := New(Config{Backends: []string{srv.URL}, BackendProtocol: ProtocolH2C})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	front := httptest.NewServer(g)
	defer front.Close()
	defer http.DefaultClient.CloseIdleConnections()
	resp, body := get(t, front.URL+"/x")
	if resp.StatusCode != 200 || body != "h2c" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if _, ok := protos.Load("HTTP/2.0"); !ok {
		t.Errorf("backend saw %v, want HTTP/2.0", keys(&protos))
	}
}

func keys(m *sync.Map) []any {
	var k []any
	m.Range(func(key, _ any) bool { k = append(k, key); return true })
	return k
}

func TestAdminEndpoints(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", straggleUnlessHedge)
	b := newBackend(t, "b", straggleUnlessHedge)
	g, srv := newGateway(t, Config{Policy: fixedPolicy(10 * time.Millisecond)}, a, b)
	get(t, srv.URL+"/warm")
	admin := httptest.NewServer(g.Admin())
	defer admin.Close()
	if resp, body := get(t, admin.URL+"/healthz"); resp.StatusCode != 200 || body != "ok\n" {
		t.Errorf("healthz %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(t, admin.URL+"/readyz"); resp.StatusCode != 200 {
		t.Errorf("readyz %d", resp.StatusCode)
	}
	resp, body := get(t, admin.URL+"/metrics")
	if resp.StatusCode != 200 {
		t.Fatalf("metrics %d", resp.StatusCode)
	}
	for _, series := range []string{
		`tailgate_requests_total{code="200"} 1`,
		"tailgate_request_duration_seconds_bucket",
		`tailgate_attempts_total{role="primary"} 1`,
		`tailgate_attempts_total{role="hedge"} 1`,
		"tailgate_hedge_wins_total 1",
		`tailgate_hedges_suppressed_total{reason="budget"} 0`,
		`tailgate_rejections_total{reason="method"} 0`,
		`tailgate_breaker_state{replica="` + a.URL + `"} 0`,
		"tailgate_replica_latency_ewma_seconds",
		"tailgate_hedge_delay_seconds 0.01",
		"tailgate_late_completions_total",
		"tailgate_cancellations_observed_total",
		"tailgate_hedge_budget_credits",
		"tailgate_hedge_gate_open 1",
		`tailgate_hedge_gate_signal{signal="noHelp"} 0`,
		`tailgate_hedge_gate_signal{signal="unavailable"} 0`,
		`tailgate_hedge_gate_window_hedges{result="won"} 1`, // the one request, hedged
		`tailgate_hedge_gate_median_seconds{window="baseline"} 0`,
		"tailgate_hedge_gate_probes_total 0",
		`tailgate_hedge_gate_transitions_total{to="shut"} 0`,
		`tailgate_in_flight{kind="requests"} 0`,
		`tailgate_in_flight{kind="shadows"} 0`,
		`tailgate_replica_probation{replica="` + a.URL + `"} 0`,
		`tailgate_probation_transitions_total{replica="` + a.URL + `",to="probation"} 0`,
		`tailgate_shadow_requests_total{outcome="skipped"} 0`,
	} {
		if !strings.Contains(body, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	resp, body = get(t, admin.URL+"/debug/replicas")
	var st DebugState
	if err := json.Unmarshal([]byte(body), &st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("debug: %d %v %q", resp.StatusCode, err, body)
	}
	if len(st.Replicas) != 2 || st.Hedge.DelayMs != 10 || st.InFlight.MaxRequests != 128 || st.InFlight.MaxAttempts != 160 ||
		st.InFlight.MaxShadows != DefaultMaxInFlightShadows || !st.Probation.Enabled || st.Probation.MaxOnProbation != 1 ||
		st.Probation.Factor != 3 || st.Probation.WindowMs != 5000 || st.Replicas[0].Probation == nil ||
		!st.Hedge.Gate.Open || st.Hedge.Gate.Reason != "open" || st.Hedge.Gate.Signals == nil {
		t.Errorf("debug %+v", st)
	}
}

func TestReadyzWithoutReplicas(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	g, srv := newGateway(t, Config{Policy: hedge.Policy{MaxAttempts: 1}, Replica: replica.Config{FailureThreshold: 1, Cooldown: time.Hour}}, a)
	get(t, srv.URL+"/x")
	admin := httptest.NewServer(g.Admin())
	defer admin.Close()
	if resp, _ := get(t, admin.URL+"/readyz"); resp.StatusCode != 503 {
		t.Errorf("readyz %d with the only breaker open", resp.StatusCode)
	}
}

func TestNewRejects(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Backends: []string{"http://a", "http://a/"}},
		{Backends: []string{"ftp://a"}},
		{Backends: []string{"::bad"}},
		{Backends: []string{"http://a"}, MaxInFlightRequests: -1},
		{Backends: []string{"http://a"}, MaxInFlightAttempts: -1},
		{Backends: []string{"http://a"}, Timeout: -1},
		{Backends: []string{"http://a"}, MaxResponseBytes: -1},
		{Backends: []string{"http://a"}, BackendProtocol: "h3"},
		{Backends: []string{"http://a"}, Policy: hedge.Policy{MaxAttempts: 9}},
		{Backends: []string{"http://a"}, Replica: replica.Config{FailureThreshold: -1}},
		{Backends: []string{"http://a"}, Replica: replica.Config{Probation: replica.Probation{Factor: 0.5}}},
		{Backends: []string{"http://a"}, Replica: replica.Config{Probation: replica.Probation{MaxShare: 2}}},
		{Backends: []string{"http://a"}, MaxInFlightShadows: -1},
		{Backends: []string{"http://a"}, ShadowTimeout: -time.Second},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
}

// counterValue reads one labelled counter from the gateway's registry.
func counterValue(t *testing.T, g *Gateway, name, label, value string) float64 {
	t.Helper()
	mfs, err := g.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

var _ = fmt.Sprint

func TestResponseLengthAnnounced(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Transfer-Encoding", "chunked") // hop-by-hop: must not leak
		if r.URL.Path == "/big" {
			w.Write(make([]byte, 100_000))
			return
		}
		io.WriteString(w, "small")
	})
	_, srv := newGateway(t, Config{}, a)
	for path, want := range map[string]int64{"/small": 5, "/big": 100_000} {
		resp, body := get(t, srv.URL+path)
		if resp.StatusCode != 200 || resp.ContentLength != want || int64(len(body)) != want || len(resp.TransferEncoding) != 0 {
			t.Errorf("%s: %d, Content-Length %d, %d bytes, Transfer-Encoding %v", path, resp.StatusCode, resp.ContentLength, len(body), resp.TransferEncoding)
		}
	}
}
