package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/memnet"
	"github.com/tailgate-dev/tailgate/replica"
	"go.uber.org/goleak"
)

// The gateway's behaviour is tested in two ways. Timing (hedge delays,
// breaker cool-downs, timeouts, limits held by requests in flight) runs
// in memory, in a synctest bubble: replicas are handlers on a
// memnet.Transport given as Config.Base, requests go straight to
// ServeHTTP, and every duration is exact virtual time. What only a real
// socket shows (raw request lines, headers as net/http writes and parses
// them, connections refused, cancellation crossing a connection, h2c) is
// tested on loopback, in the tests named TestLoopback....

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend is a replica whose behaviour a test scripts: on loopback
// (newBackend, an httptest server) or in memory (newMemBackend, a handler
// on a memnet.Transport). Either way it counts requests and hedges and
// keeps what it was sent.
type backend struct {
	URL       string
	name      string
	hits      atomic.Int32
	hedges    atomic.Int32
	cancelled chan string // request URIs whose cancellation the handler saw
	mu        sync.Mutex
	seen      []*http.Request
	handle    func(b *backend, w http.ResponseWriter, r *http.Request)
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.RequestURI == "" {
		// In memory the handler gets the client's request: give it what a
		// server would have parsed.
		r = r.WithContext(r.Context())
		r.RequestURI = r.URL.RequestURI()
	}
	b.hits.Add(1)
	if r.Header.Get(hedge.HedgeHeader) != "" {
		b.hedges.Add(1)
	}
	seen := r.Clone(context.Background())
	if r.Body != nil && r.Body != http.NoBody {
		// A read with a body (a declared POST, a gRPC call): kept whole,
		// for the test, and handed on to the handler.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		seen.Body = io.NopCloser(bytes.NewReader(body))
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	b.mu.Lock()
	b.seen = append(b.seen, seen)
	b.mu.Unlock()
	b.handle(b, w, r)
}

// newBackend starts a loopback replica, closed when the test ends.
func newBackend(t *testing.T, name string, handle func(b *backend, w http.ResponseWriter, r *http.Request)) *backend {
	t.Helper()
	b := &backend{name: name, handle: handle, cancelled: make(chan string, 100)}
	srv := httptest.NewServer(b)
	b.URL = srv.URL
	t.Cleanup(srv.Close)
	return b
}

// newMemBackend registers an in-memory replica on net as host name.test
// (URL http://name.test).
func newMemBackend(net *memnet.Transport, name string, handle func(b *backend, w http.ResponseWriter, r *http.Request)) *backend {
	b := &backend{URL: "http://" + name + ".test", name: name, handle: handle, cancelled: make(chan string, 100)}
	net.Handle(name+".test", b)
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

// straggleUnlessHedge writes the backend's name at once for a hedge; a
// primary straggles until cancelled (or 5s).
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

// wantCancelled checks, in a bubble once every goroutine has settled, that
// b saw the cancellation of its request for uri.
func wantCancelled(t *testing.T, b *backend, uri string) {
	t.Helper()
	synctest.Wait()
	select {
	case got := <-b.cancelled:
		if got != uri {
			t.Errorf("%s saw %q cancelled, want %q", b.name, got, uri)
		}
	default:
		t.Errorf("%s never saw its request for %s cancelled", b.name, uri)
	}
}

// newGateway returns a gateway over the backends, served on loopback.
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

// newMemGateway returns a gateway over in-memory backends on net, seeded
// (Replica.Seed 1 unless cfg sets one). When the test ends it is closed and
// every handler started on net has returned.
func newMemGateway(t *testing.T, net *memnet.Transport, cfg Config, backends ...*backend) *Gateway {
	t.Helper()
	for _, b := range backends {
		cfg.Backends = append(cfg.Backends, b.URL)
	}
	cfg.Base = net
	if cfg.Replica.Seed == 0 {
		cfg.Replica.Seed = 1
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Close()
		net.Wait()
	})
	return g
}

// serveIn sends one request through g in memory: hdr holds header names
// and values in turn.
func serveIn(g http.Handler, method, path string, body io.Reader, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, body)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	return w
}

// adminGet sends a GET for path to g's admin handler, in memory.
func adminGet(g *Gateway, path string) (int, string) {
	w := serveIn(g.Admin(), http.MethodGet, path, nil)
	return w.Code, w.Body.String()
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

// A primary that straggles is hedged after exactly the delay; the hedge's
// answer is returned at once, and the primary's replica sees its request
// cancelled.
func TestStragglingPrimaryBeatenByHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", straggleUnlessHedge)
		b := newMemBackend(net, "b", straggleUnlessHedge)
		g := newMemGateway(t, net, Config{Policy: fixedPolicy(20 * time.Millisecond)}, a, b)
		start := time.Now()
		w := serveIn(g, http.MethodGet, "/item?id=7", nil)
		if took := time.Since(start); w.Code != 200 || (w.Body.String() != "a" && w.Body.String() != "b") || took != 20*time.Millisecond {
			t.Fatalf("%d %q after %v; want the hedge's answer after the 20ms delay", w.Code, w.Body, took)
		}
		synctest.Wait()
		winner, loser := a, b
		if w.Body.String() == "b" {
			winner, loser = b, a
		}
		if winner.hits.Load() != 1 || winner.hedges.Load() != 1 || loser.hits.Load() != 1 || loser.hedges.Load() != 0 {
			t.Errorf("winner: %d hits, %d hedges; loser: %d hits, %d hedges; want the hedge to the winner, the primary to the loser",
				winner.hits.Load(), winner.hedges.Load(), loser.hits.Load(), loser.hedges.Load())
		}
		wantCancelled(t, loser, "/item?id=7")
		if v := counterValue(t, g, "tailgate_hedge_wins_total", "", ""); v != 1 {
			t.Errorf("tailgate_hedge_wins_total %v", v)
		}
	})
}

// Through real sockets: the hedge wins, and the cancellation of the
// straggling primary crosses the connection to its replica.
func TestLoopbackHedgeWinsAndStragglerSeesCancellation(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", straggleUnlessHedge)
	b := newBackend(t, "b", straggleUnlessHedge)
	_, srv := newGateway(t, Config{Policy: fixedPolicy(20 * time.Millisecond)}, a, b)
	resp, body := get(t, srv.URL+"/item?id=7")
	if resp.StatusCode != 200 || (body != "a" && body != "b") {
		t.Fatalf("%d %q", resp.StatusCode, body)
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

// A 5xx is not an answer: the hedge goes to the other replica as soon as
// it comes, not after the (1s) delay.
func TestServerErrorAnsweredByAlternate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		failPrimary := func(b *backend, w http.ResponseWriter, r *http.Request) {
			if !memnet.Sleep(r.Context(), 5*time.Millisecond) {
				return
			}
			if r.Header.Get(hedge.HedgeHeader) == "" {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, b.name)
		}
		a := newMemBackend(net, "a", failPrimary)
		b := newMemBackend(net, "b", failPrimary)
		g := newMemGateway(t, net, Config{Policy: fixedPolicy(time.Second)}, a, b)
		start := time.Now()
		w := serveIn(g, http.MethodGet, "/x", nil)
		if took := time.Since(start); w.Code != 200 || (w.Body.String() != "a" && w.Body.String() != "b") || took != 10*time.Millisecond {
			t.Fatalf("%d %q after %v; want the alternate's answer after 5ms + 5ms", w.Code, w.Body, took)
		}
		if a.hits.Load()+b.hits.Load() != 2 || a.hedges.Load()+b.hedges.Load() != 1 {
			t.Errorf("hits %d + %d, hedges %d + %d; want one primary and one hedge", a.hits.Load(), b.hits.Load(), a.hedges.Load(), b.hedges.Load())
		}
		if a.hits.Load() != 1 || b.hits.Load() != 1 {
			t.Errorf("hits %d and %d: the hedge went to the replica that failed", a.hits.Load(), b.hits.Load())
		}
	})
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

// Replicas that cannot be reached: each is tried once, the second at once
// after the first fails (not after the 1s delay), and the client gets a
// JSON 502 at once.
func TestAllReplicasDownIs502AtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport) // no hosts: every attempt fails at once
		g, err := New(Config{Backends: []string{"http://a.test", "http://b.test"}, Base: net, Policy: fixedPolicy(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		start := time.Now()
		w := serveIn(g, http.MethodGet, "/x", nil)
		if took := time.Since(start); w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), "no host") || took != 0 {
			t.Fatalf("%d %q after %v; want 502 naming the failure, at once", w.Code, w.Body, took)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("content type %q", ct)
		}
		if pr, h := counterValue(t, g, "tailgate_attempts_total", "role", "primary"), counterValue(t, g, "tailgate_attempts_total", "role", "hedge"); pr != 1 || h != 1 {
			t.Errorf("attempts: %v primaries, %v hedges; want each replica tried once", pr, h)
		}
	})
}

// Through real sockets: a refused connection is a 502 that says so.
func TestLoopbackRefusedConnectionsAre502(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	g, err := New(Config{Backends: []string{deadAddr(t), deadAddr(t)}, Policy: fixedPolicy(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	defer g.Close()
	resp, body := get(t, srv.URL+"/x")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "connection refused") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
}

// The breaker opens after 3 failures and refuses without calling the
// replica for exactly the cooldown; then one probe goes through (half-open:
// others are refused while it is out), and its success closes the breaker.
// Each state shows in tailgate_breaker_state.
func TestBreakerOpensProbesAndCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		var healthy atomic.Bool
		probeGate := make(chan struct{})
		var probes atomic.Int32
		a := newMemBackend(net, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
			if !healthy.Load() {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			probes.Add(1)
			<-probeGate // hold the probe so concurrent requests find the slot taken
			io.WriteString(w, "a")
		})
		g := newMemGateway(t, net, Config{
			Policy:  hedge.Policy{MaxAttempts: 1},
			Replica: replica.Config{FailureThreshold: 3, Cooldown: 100 * time.Millisecond},
		}, a)
		state := func() (replica.BreakerState, float64) {
			return g.Replicas().Snapshot(time.Now())[0].Breaker, gaugeValue(t, g, "tailgate_breaker_state", "replica", a.URL)
		}
		for i := range 3 {
			if st, v := state(); st != replica.Closed || v != 0 {
				t.Fatalf("before failure %d: breaker %v (gauge %v), want closed (0)", i+1, st, v)
			}
			if w := serveIn(g, http.MethodGet, "/x", nil); w.Code != 502 || !strings.Contains(w.Body.String(), "replica answered 500") {
				t.Fatalf("request %d: %d %q, want 502 naming the replica's 500", i, w.Code, w.Body)
			}
		}
		if st, v := state(); st != replica.Open || v != 2 {
			t.Fatalf("breaker %v (gauge %v) after 3 failures, want open (2)", st, v)
		}
		hits := a.hits.Load()
		// Open for the whole cooldown: refused without a call, up to its
		// last nanosecond.
		for _, wait := range []time.Duration{0, 100*time.Millisecond - time.Nanosecond} {
			time.Sleep(wait)
			w := serveIn(g, http.MethodGet, "/x", nil)
			if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), "circuit breaker") || a.hits.Load() != hits {
				t.Fatalf("open, %v into the cooldown: %d %q, backend hit %d times", wait, w.Code, w.Body, a.hits.Load()-hits)
			}
		}
		time.Sleep(time.Nanosecond) // the cooldown is over
		healthy.Store(true)
		probe := make(chan int, 1)
		go func() { probe <- serveIn(g, http.MethodGet, "/probe", nil).Code }()
		synctest.Wait() // the probe is held in the replica
		if n := probes.Load(); n != 1 {
			t.Fatalf("%d probes out, want 1", n)
		}
		if st, v := state(); st != replica.HalfOpen || v != 1 {
			t.Errorf("breaker %v (gauge %v) while the probe is out, want half-open (1)", st, v)
		}
		// The probe is out: other requests are not let through meanwhile.
		if w := serveIn(g, http.MethodGet, "/x", nil); w.Code != http.StatusBadGateway || a.hits.Load() != hits+1 {
			t.Errorf("second request during the probe: %d, backend hit %d times; want 502 and only the probe", w.Code, a.hits.Load()-hits)
		}
		close(probeGate)
		if code := <-probe; code != 200 {
			t.Fatalf("probe answered %d", code)
		}
		if st, v := state(); st != replica.Closed || v != 0 {
			t.Fatalf("breaker %v (gauge %v) after a successful probe, want closed (0)", st, v)
		}
		if w := serveIn(g, http.MethodGet, "/x", nil); w.Code != 200 || w.Body.String() != "a" {
			t.Errorf("after closing: %d %q", w.Code, w.Body)
		}
	})
}

// A request beyond a limit is refused at once with 503 and Retry-After
// while another holds the limit's only slot, and counted by reason.
func TestLimitsRefuseWith503(t *testing.T) {
	for _, c := range []struct {
		name             string
		requests, atts   int
		wantMsg, metricR string
	}{
		{"requests", 1, 5, "too many requests", "max_requests"},
		{"attempts", 5, 1, "too many backend attempts", "max_attempts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := new(memnet.Transport)
				release := make(chan struct{})
				a := newMemBackend(net, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
					<-release
					io.WriteString(w, "a")
				})
				g := newMemGateway(t, net, Config{Policy: hedge.Policy{MaxAttempts: 1}, MaxInFlightRequests: c.requests, MaxInFlightAttempts: c.atts}, a)
				done := make(chan int)
				go func() { done <- serveIn(g, http.MethodGet, "/held", nil).Code }()
				synctest.Wait() // the held request is in the replica
				start := time.Now()
				w := serveIn(g, http.MethodGet, "/refused", nil)
				if w.Code != 503 || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), c.wantMsg) || time.Since(start) != 0 {
					t.Errorf("%d %q %q after %v", w.Code, w.Header().Get("Retry-After"), w.Body, time.Since(start))
				}
				if n := a.hits.Load(); n != 1 {
					t.Errorf("replica hit %d times, want the held request only", n)
				}
				close(release)
				if code := <-done; code != 200 {
					t.Errorf("held request: %d", code)
				}
				if got := counterValue(t, g, "tailgate_rejections_total", "reason", c.metricR); got != 1 {
					t.Errorf("rejections{%s} = %v", c.metricR, got)
				}
			})
		})
	}
}

// Two primaries hold both attempt slots past the hedge delay: each
// request's hedge is suppressed for capacity, once, and never sent.
func TestHedgeWithoutAttemptSlotIsSuppressed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		release := make(chan struct{})
		hold := func(b *backend, w http.ResponseWriter, r *http.Request) { <-release; io.WriteString(w, b.name) }
		a := newMemBackend(net, "a", hold)
		b := newMemBackend(net, "b", hold)
		g := newMemGateway(t, net, Config{Policy: fixedPolicy(10 * time.Millisecond), MaxInFlightRequests: 2, MaxInFlightAttempts: 2}, a, b)
		capacity := func() float64 { return counterValue(t, g, "tailgate_hedges_suppressed_total", "reason", "capacity") }
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if w := serveIn(g, http.MethodGet, "/x", nil); w.Code != 200 {
					t.Errorf("%d %q", w.Code, w.Body)
				}
			})
		}
		time.Sleep(10*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		if got := capacity(); got != 0 {
			t.Errorf("capacity suppressions %v before the delay", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := capacity(); got != 2 {
			t.Errorf("capacity suppressions %v at the delay, want 2: both slots were held by primaries", got)
		}
		time.Sleep(time.Second)
		close(release)
		wg.Wait()
		if got := capacity(); got != 2 {
			t.Errorf("capacity suppressions %v in the end, want 2: one per request", got)
		}
		if a.hedges.Load()+b.hedges.Load() != 0 || a.hits.Load()+b.hits.Load() != 2 {
			t.Errorf("%d hedges, %d hits; want no hedge sent without a slot", a.hedges.Load()+b.hedges.Load(), a.hits.Load()+b.hits.Load())
		}
	})
}

// Methods other than GET and HEAD are refused with 405 and Allow, a GET
// with a body with 400, and none reaches a replica.
func TestRefusesUnsafeMethodsAndBodies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
		g := newMemGateway(t, net, Config{}, a)
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodPatch} {
			w := serveIn(g, m, "/x", strings.NewReader("data"))
			if w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("%s: %d Allow %q", m, w.Code, w.Header().Get("Allow"))
			}
		}
		if w := serveIn(g, http.MethodGet, "/x", strings.NewReader("data")); w.Code != 400 || !strings.Contains(w.Body.String(), "body") {
			t.Errorf("GET with body: %d %q", w.Code, w.Body)
		}
		if n := a.hits.Load(); n != 0 {
			t.Errorf("refused requests reached the backend %d times", n)
		}
		if v := counterValue(t, g, "tailgate_rejections_total", "reason", "method"); v != 5 {
			t.Errorf("rejections{method} = %v, want 5", v)
		}
	})
}

// Through real sockets, request lines that only the wire can carry:
// absolute-form, authority-form CONNECT, a chunked GET. Each is refused and
// none reaches a replica.
func TestLoopbackRefusesAbsoluteFormConnectAndChunkedGET(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
	_, srv := newGateway(t, Config{}, a)
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

func TestLoopbackPathAndQueryForwardedByteForByte(t *testing.T) {
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

func TestLoopbackHopByHopStrippedBothWays(t *testing.T) {
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
	if xff := r.Header.Get("X-Forwarded-For"); xff != "127.0.0.1" { // the client's own claim dropped (Config.TrustedHop)
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
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
			w.Write(make([]byte, 2<<20))
		})
		g := newMemGateway(t, net, Config{Policy: hedge.Policy{MaxAttempts: 1}}, a)
		if w := serveIn(g, http.MethodGet, "/big", nil); w.Code != 502 || !strings.Contains(w.Body.String(), "larger than 1048576 bytes") {
			t.Errorf("%d %q", w.Code, w.Body)
		}
	})
}

// A read that outlasts Timeout is answered 504 at exactly the timeout, and
// the replica sees its attempt cancelled.
func TestTimeoutIs504(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			b.cancelled <- r.RequestURI
		})
		g := newMemGateway(t, net, Config{Policy: hedge.Policy{MaxAttempts: 1}, Timeout: 100 * time.Millisecond}, a)
		start := time.Now()
		w := serveIn(g, http.MethodGet, "/slow", nil)
		if took := time.Since(start); w.Code != 504 || !strings.Contains(w.Body.String(), "timeout") || took != 100*time.Millisecond {
			t.Errorf("%d %q after %v; want 504 after the 100ms timeout", w.Code, w.Body, took)
		}
		wantCancelled(t, a, "/slow")
	})
}

func TestLoopbackHEADKeepsLargeContentLength(t *testing.T) {
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

func TestLoopbackH2CBackends(t *testing.T) {
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

// After one hedged read, the admin handler answers /healthz, /readyz,
// /metrics (every series, with the read counted) and /debug/replicas (the
// configuration's limits and the gate's state).
func TestAdminEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", straggleUnlessHedge)
		b := newMemBackend(net, "b", straggleUnlessHedge)
		g := newMemGateway(t, net, Config{Policy: fixedPolicy(10 * time.Millisecond)}, a, b)
		if w := serveIn(g, http.MethodGet, "/warm", nil); w.Code != 200 {
			t.Fatalf("%d %q", w.Code, w.Body)
		}
		synctest.Wait() // the loser has reported
		if code, body := adminGet(g, "/healthz"); code != 200 || body != "ok\n" {
			t.Errorf("healthz %d %q", code, body)
		}
		if code, _ := adminGet(g, "/readyz"); code != 200 {
			t.Errorf("readyz %d", code)
		}
		code, body := adminGet(g, "/metrics")
		if code != 200 {
			t.Fatalf("metrics %d", code)
		}
		for _, series := range []string{
			`tailgate_requests_total{code="200",route="default"} 1`,
			"tailgate_request_duration_seconds_bucket",
			`tailgate_attempts_total{role="primary",route="default"} 1`,
			`tailgate_attempts_total{role="hedge",route="default"} 1`,
			`tailgate_hedge_wins_total{route="default"} 1`,
			`tailgate_hedges_suppressed_total{reason="budget",route="default"} 0`,
			`tailgate_rejections_total{reason="method"} 0`,
			`tailgate_breaker_state{replica="` + a.URL + `"} 0`,
			"tailgate_replica_latency_ewma_seconds",
			`tailgate_hedge_delay_seconds{route="default"} 0.01`,
			"tailgate_late_completions_total",
			"tailgate_cancellations_observed_total",
			"tailgate_hedge_budget_credits",
			`tailgate_hedge_gate_open{route="default"} 1`,
			`tailgate_hedge_gate_signal{route="default",signal="noHelp"} 0`,
			`tailgate_hedge_gate_signal{route="default",signal="unavailable"} 0`,
			`tailgate_hedge_gate_window_hedges{result="won",route="default"} 1`, // the one request, hedged
			`tailgate_hedge_gate_median_seconds{route="default",window="baseline"} 0`,
			`tailgate_hedge_gate_probes_total{route="default"} 0`,
			`tailgate_hedge_gate_transitions_total{route="default",to="shut"} 0`,
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
		code, body = adminGet(g, "/debug/replicas")
		var st replicasView
		if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
			t.Fatalf("debug: %d %v %q", code, err, body)
		}
		if len(st.Replicas) != 2 || st.Hedge.DelayMs != 10 || st.InFlight.MaxRequests != 128 || st.InFlight.MaxAttempts != 160 ||
			st.InFlight.MaxShadows != DefaultMaxInFlightShadows || !st.Probation.Enabled || st.Probation.MaxOnProbation != 1 ||
			st.Probation.Factor != 3 || st.Probation.MinExcessMs != 2 || st.Probation.WindowMs != 5000 || st.Replicas[0].Probation == nil ||
			!st.Hedge.Gate.Open || st.Hedge.Gate.Reason != "open" || st.Hedge.Gate.Signals == nil {
			t.Errorf("debug %+v", st)
		}
	})
}

// With its only replica's breaker open, the gateway is not ready.
func TestReadyzWithoutReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
		g := newMemGateway(t, net, Config{Policy: hedge.Policy{MaxAttempts: 1}, Replica: replica.Config{FailureThreshold: 1, Cooldown: time.Hour}}, a)
		if code, _ := adminGet(g, "/readyz"); code != 200 {
			t.Errorf("readyz %d with the breaker closed", code)
		}
		serveIn(g, http.MethodGet, "/x", nil)
		if code, _ := adminGet(g, "/readyz"); code != 503 {
			t.Errorf("readyz %d with the only breaker open", code)
		}
	})
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
		{Backends: []string{"http://a"}, MaxResponseHeaderBytes: -1},
		{Backends: []string{"http://a"}, MaxResponseHeaderBytes: MinResponseHeaderBytes - 1},
		{Backends: []string{"http://a"}, MaxResponseHeaderBytes: MaxResponseHeaderBytesLimit + 1},
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

// A backend's password never reaches New's error, however the URL is
// spelled; the backend is named once.
func TestNewHidesBackendUserInfo(t *testing.T) {
	for _, b := range []string{"http://user:s3cret@127.0.0.1:8081", "http://user:s3cret@127.0.0.1:port", "user:s3cret@127.0.0.1:8081"} {
		_, err := New(Config{Backends: []string{"http://127.0.0.1:1", b}})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("%q: %v", b, err)
		}
		if msg := err.Error(); strings.Contains(msg, "s3cret") || strings.Count(msg, "xxxxx@127.0.0.1") != 1 {
			t.Errorf("%q: error %q; want the backend once, its user information as xxxxx", b, msg)
		}
	}
}

// counterValue reads one counter from the gateway's registry, by one label
// (an empty label for an unlabelled counter).
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
			if label == "" {
				return m.GetCounter().GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// Through real sockets: a body larger than net/http's server buffers on
// its own is announced with Content-Length, not chunked, and the
// replica's Transfer-Encoding does not leak.
func TestLoopbackResponseLengthAnnounced(t *testing.T) {
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

// Through real sockets, the shutdown the Close documentation asks for:
// http.Server.Shutdown waits for a read in flight through the gateway,
// which is answered in full; then Close; nothing is left in flight.
func TestLoopbackShutdownDrainsReadInFlight(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	arrived, release := make(chan struct{}), make(chan struct{})
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		io.WriteString(w, "a")
	})
	g, err := New(Config{Backends: []string{a.URL}, Policy: hedge.Policy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	shuttingDown := make(chan struct{})
	srv.Config.RegisterOnShutdown(func() { close(shuttingDown) })

	type answer struct {
		code int
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/item")
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, string(b), err}
	}()
	<-arrived
	shutdown := make(chan error, 1)
	go func() { shutdown <- srv.Config.Shutdown(context.Background()) }()
	<-shuttingDown
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned (%v) with a read in flight", err)
	default:
	}
	close(release)
	if ans := <-got; ans.err != nil || ans.code != 200 || ans.body != "a" {
		t.Errorf("read in flight at shutdown: %d %q %v", ans.code, ans.body, ans.err)
	}
	if err := <-shutdown; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	g.Close()
	if d := g.replicasState(time.Now()); d.InFlight.Requests != 0 || d.InFlight.Attempts != 0 {
		t.Errorf("in flight after shutdown: %+v", d.InFlight)
	}
}
