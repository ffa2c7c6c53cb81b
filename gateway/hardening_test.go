package gateway

import (
	"context"
	"io"
	"math/rand/v2"
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
)

// A client gone before the gateway calls the engine must not leak the
// primary's attempt slot (or the exchange's reference).
func TestClientGoneBeforeEngineFreesAttemptSlot(t *testing.T) {
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
	g, err := New(Config{Backends: []string{a.URL}, MaxInFlightRequests: 4, MaxInFlightAttempts: 4,
		Policy: hedge.Policy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for range 4 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(ctx)
		r.RemoteAddr = "127.0.0.1:1234"
		serveAbortable(t, g, httptest.NewRecorder(), r)
	}
	if n := g.Debug(time.Now()).InFlight.Attempts; n != 0 {
		t.Errorf("attempt slots in use after 4 cancelled requests finished: %d, want 0", n)
	}
	// Now a healthy client is refused forever.
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	g.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Errorf("healthy request after the leak: %d %q", w.Code, w.Body.String())
	}
}

// Through a real loopback server: clients that send a GET and hang up at
// once must not leak attempt slots either. The check waits for events, not
// for time: a last client's read, answered, says that the server has
// accepted every connection before it (it accepts in order, one at a
// time), and the server's ConnState, that each of them is closed, its
// handler returned; the primary runs on the handler's goroutine, so its
// slot is back by then, or leaked.
func TestHangUpsFreeAttemptSlots(t *testing.T) {
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
	g, err := New(Config{Backends: []string{a.URL}, Policy: hedge.Policy{MaxAttempts: 1}, MaxInFlightRequests: 1000, MaxInFlightAttempts: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	closed := make(chan struct{}, 1) // a connection closed
	srv := httptest.NewUnstartedServer(g)
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(open, c)
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	start := time.Now()
	for range 2000 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
	last := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := last.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for {
		mu.Lock()
		n := len(open)
		mu.Unlock()
		if n == 0 {
			break
		}
		<-closed // the next one; the test's own timeout bounds a hang
	}
	d := g.Debug(time.Now())
	t.Logf("all closed after %v: requests in flight %d, attempts in flight %d, replica in-flight %d",
		time.Since(start), d.InFlight.Requests, d.InFlight.Attempts, d.Replicas[0].InFlight)
	if d.InFlight.Requests != 0 || d.InFlight.Attempts != 0 || d.Replicas[0].InFlight != 0 {
		t.Errorf("slots leaked: %+v, replica in flight %d", d.InFlight, d.Replicas[0].InFlight)
	}
}

// A primary cancelled because the hedge won must be neutral for its
// breaker, whether it was cancelled before its headers or mid-body, over
// HTTP/1 and h2c.
func TestCancelledLoserIsNeutralForBreaker(t *testing.T) {
	for _, proto := range []string{ProtocolHTTP1, ProtocolH2C} {
		for _, stage := range []string{"headers", "body"} {
			t.Run(proto+"/"+stage, func(t *testing.T) {
				h := func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get(hedge.HedgeHeader) != "" {
						io.WriteString(w, "hedge")
						return
					}
					if stage == "body" {
						w.Header().Set("Content-Length", "100")
						w.WriteHeader(200)
						io.WriteString(w, "partial")
						w.(http.Flusher).Flush()
					}
					select {
					case <-r.Context().Done():
					case <-time.After(5 * time.Second):
					}
				}
				var urls []string
				for range 2 {
					s := httptest.NewUnstartedServer(http.HandlerFunc(h))
					s.Config.Protocols = new(http.Protocols)
					s.Config.Protocols.SetHTTP1(true)
					s.Config.Protocols.SetUnencryptedHTTP2(true)
					s.Start()
					defer s.Close()
					urls = append(urls, s.URL)
				}
				g, err := New(Config{Backends: urls, BackendProtocol: proto, Policy: fixedPolicy(20 * time.Millisecond)})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				for range 5 {
					w := httptest.NewRecorder()
					serveAbortable(t, g, w, httptest.NewRequest(http.MethodGet, "/x", nil))
					if w.Code != 200 || w.Body.String() != "hedge" {
						t.Fatalf("%d %q", w.Code, w.Body.String())
					}
				}
				deadline := time.Now().Add(2 * time.Second)
				for {
					var inflight int64
					for _, s := range g.Replicas().Snapshot(time.Now()) {
						inflight += s.InFlight
					}
					if inflight == 0 || time.Now().After(deadline) {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				for _, s := range g.Replicas().Snapshot(time.Now()) {
					t.Logf("%s: succ %d fail %d canceled %d inflight %d breaker %v", s.Name, s.Successes, s.Failures, s.Canceled, s.InFlight, s.Breaker)
					if s.Failures != 0 {
						t.Errorf("%s: %d failures counted for cancelled losers", s.Name, s.Failures)
					}
				}
			})
		}
	}
}

// Load with every kind of backend misbehaviour, hedges and client
// cancellations: every counter must return to zero.
func TestCountersReturnToZeroUnderChaos(t *testing.T) {
	chaos := func(w http.ResponseWriter, r *http.Request) {
		n := rand.IntN(10)
		switch n {
		case 0: // 5xx
			w.WriteHeader(503)
		case 1: // reset
			c, _, _ := w.(http.Hijacker).Hijack()
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		case 2: // garbage
			c, buf, _ := w.(http.Hijacker).Hijack()
			buf.WriteString("garbage\r\n\r\n")
			buf.Flush()
			c.Close()
		case 3: // oversize
			w.Write(make([]byte, 70<<10))
		case 4: // cut short
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "short")
		case 5, 6: // slow
			select {
			case <-r.Context().Done():
			case <-time.After(time.Duration(rand.IntN(60)) * time.Millisecond):
			}
			io.WriteString(w, "slow")
		default:
			io.WriteString(w, "ok")
		}
	}
	var urls []string
	for range 3 {
		s := httptest.NewServer(http.HandlerFunc(chaos))
		defer s.Close()
		urls = append(urls, s.URL)
	}
	b, _ := hedge.NewBudget(0.5, 50)
	g, err := New(Config{Backends: urls, MaxInFlightRequests: 64, MaxInFlightAttempts: 70, MaxResponseBytes: 64 << 10,
		Timeout: 40 * time.Millisecond,
		Policy:  hedge.Policy{Delay: 5 * time.Millisecond, MaxAttempts: 3, Budget: b, Gate: hedge.Gate{Disabled: true}},
		Replica: replica.Config{FailureThreshold: 3, Cooldown: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 60 {
				ctx, cancel := context.WithCancel(context.Background())
				if rand.IntN(4) == 0 {
					time.AfterFunc(time.Duration(1+rand.IntN(20))*time.Millisecond, cancel)
				}
				method := http.MethodGet
				if rand.IntN(5) == 0 {
					method = http.MethodHead
				}
				r := httptest.NewRequest(method, "/x", nil).WithContext(ctx)
				serveAbortable(t, g, httptest.NewRecorder(), r)
				cancel()
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(3 * time.Second)
	var d DebugState
	for {
		d = g.Debug(time.Now())
		var rin int64
		for _, s := range d.Replicas {
			rin += s.InFlight
		}
		if d.InFlight.Attempts == 0 && d.InFlight.Requests == 0 && rin == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, s := range d.Replicas {
		t.Logf("%s breaker %v inflight %d succ %d fail %d canc %d stale %d picks %d", s.Name, s.Breaker, s.InFlight, s.Successes, s.Failures, s.Canceled, s.Stale, s.Picks)
		if s.InFlight != 0 {
			t.Errorf("%s: in flight %d", s.Name, s.InFlight)
		}
		if s.Picks != s.Successes+s.Failures+s.Canceled {
			t.Errorf("%s: %d picks but %d outcomes", s.Name, s.Picks, s.Successes+s.Failures+s.Canceled)
		}
	}
	if d.InFlight.Attempts != 0 || d.InFlight.Requests != 0 {
		t.Errorf("limiters: requests %d attempts %d", d.InFlight.Requests, d.InFlight.Attempts)
	}
	for _, reason := range []string{"capacity", "noTarget", "budget", "maxAttempts", "deadline"} {
		t.Logf("suppressed %s: %v", reason, counterValue(t, g, "tailgate_hedges_suppressed_total", "reason", reason))
	}
	t.Logf("hedges %v", counterValue(t, g, "tailgate_attempts_total", "role", "hedge"))
}

// A backend URL with a path is refused: the client's path is forwarded byte
// for byte, and a prefix would have to be spliced into it.
func TestBackendWithPathRejected(t *testing.T) {
	if _, err := New(Config{Backends: []string{"http://127.0.0.1:1/api"}}); err == nil || !strings.Contains(err.Error(), "must not have a path") {
		t.Errorf("New accepted a backend with a path: %v", err)
	}
}

// A backend answering 101 to a plain GET: not an answer the client asked
// for, so not a winner.
func TestStray101IsNotForwarded(t *testing.T) {
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		c, buf, _ := w.(http.Hijacker).Hijack()
		buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: upgrade\r\n\r\nraw bytes")
		buf.Flush()
		time.Sleep(50 * time.Millisecond)
		c.Close()
	})
	_, srv := newGateway(t, Config{Policy: hedge.Policy{MaxAttempts: 1}}, a)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
	c.SetDeadline(time.Now().Add(2 * time.Second))
	b, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(b), "HTTP/1.1 502") || !strings.Contains(string(b), "101") {
		t.Errorf("a stray 101 from the backend reached the client as %q; want 502 naming it", strings.SplitN(string(b), "\r\n", 2)[0])
	}
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(srv.URL + "/y")
	if err == nil {
		resp.Body.Close()
		t.Logf("http.Client: %d", resp.StatusCode)
		if resp.StatusCode < 200 {
			t.Errorf("a GET that asked for no upgrade was answered %d", resp.StatusCode)
		}
	} else {
		t.Logf("http.Client: %v", err)
	}
	cl.CloseIdleConnections()
}

func TestAmbiguousFramingNeverForwarded(t *testing.T) {
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
	_, srv := newGateway(t, Config{}, a)
	for _, raw := range []string{
		"GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nhello",
		"GET /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
		"HEAD /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc",
		"GET http://127.0.0.1:1/x HTTP/1.0\r\n\r\n",
		"GET * HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET x HTTP/1.1\r\nHost: h\r\n\r\n",
	} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		io.WriteString(c, raw)
		buf := make([]byte, 200)
		n, _ := c.Read(buf)
		c.Close()
		t.Logf("%q -> %q", raw[:min(len(raw), 30)], strings.SplitN(string(buf[:n]), "\r\n", 2)[0])
	}
	if n := a.hits.Load(); n != 0 {
		t.Errorf("backend hit %d times", n)
	}
}

func TestHeaderCorners(t *testing.T) {
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
	_, srv := newGateway(t, Config{}, a)
	c, _ := net.Dial("tcp", srv.Listener.Addr().String())
	defer c.Close()
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: front.example\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 2.2.2.2\r\n"+
		"X-Forwarded-Host: spoof\r\nX-Forwarded-Proto: https\r\nConnection: keep-alive, X-A\r\nConnection: x-b\r\nX-A: 1\r\nX-B: 2\r\nUpgrade: websocket\r\n\r\n")
	c.SetDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 500)
	c.Read(buf)
	r := a.last()
	t.Logf("backend headers: %v host %q", r.Header, r.Host)
	if r.Header.Get("X-A") != "" || r.Header.Get("X-B") != "" || r.Header.Get("Upgrade") != "" {
		t.Error("Connection-named headers forwarded")
	}
	if got := r.Header.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.1" { // the client's claims dropped (Config.TrustedHop)
		t.Errorf("XFF %q", got)
	}
	if r.Header.Get("X-Forwarded-Host") != "front.example" || r.Header.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("XFH %q XFP %q", r.Header.Values("X-Forwarded-Host"), r.Header.Values("X-Forwarded-Proto"))
	}
}

func TestPathsOverH2C(t *testing.T) {
	var got atomic.Value
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Store(r.RequestURI) }))
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	defer s.Close()
	g, err := New(Config{Backends: []string{s.URL}, BackendProtocol: ProtocolH2C})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	front := httptest.NewServer(g)
	defer front.Close()
	for _, uri := range []string{"/a%2Fb", "/a%2fb?x=%20y&z=1+2", "/%7euser/./x", "/p;q?a=b#", "/", "/x?", "//double/slash"} {
		got.Store("")
		code := rawRequest(t, front.Listener.Addr().String(), "GET "+uri+" HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
		if code != 200 || got.Load() != uri {
			t.Errorf("sent %q: backend got %q (status %d)", uri, got.Load(), code)
		}
	}
}

// The gateway must not add a User-Agent the client never sent.
func TestNoInjectedUserAgent(t *testing.T) {
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
	_, srv := newGateway(t, Config{}, a)
	rawRequest(t, srv.Listener.Addr().String(), "GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
	if ua, ok := a.last().Header["User-Agent"]; ok {
		t.Errorf("backend got User-Agent %q; the client sent none", ua)
	}
}

// The same replica spelled with another host case or an explicit default
// port is a duplicate: a "hedge to a different replica" would hit it twice.
func TestDuplicateBackendSpellingsRejected(t *testing.T) {
	for _, bs := range [][]string{
		{"http://LOCALHOST:8081", "http://localhost:8081"},
		{"http://127.0.0.1:80", "http://127.0.0.1"},
	} {
		if _, err := New(Config{Backends: bs}); err == nil {
			t.Errorf("New(%q) accepted the same replica twice", bs)
		}
	}
}

// When the request context ends although the client may still be reading
// (here: it half-closed its side after sending the request, as nc -N and
// some HTTP/1.0 clients do), the gateway has nothing to send; it must not
// let net/http answer 200 with an empty body.
func TestUnansweredRequestNeverLooksLikeSuccess(t *testing.T) {
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		io.WriteString(w, "payload")
	})
	_, srv := newGateway(t, Config{Policy: hedge.Policy{MaxAttempts: 1}}, a)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
	c.(*net.TCPConn).CloseWrite()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	b, _ := io.ReadAll(c)
	t.Logf("client got %q", b)
	if strings.HasPrefix(string(b), "HTTP/1.1 200") && !strings.Contains(string(b), "payload") {
		t.Errorf("a request that was not answered reached the client as 200 with an empty body")
	}
}

// serveAbortable calls g.ServeHTTP, which aborts (panics with
// http.ErrAbortHandler, as net/http expects) when it has nothing to answer.
func serveAbortable(t *testing.T, g *Gateway, w http.ResponseWriter, r *http.Request) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil && p != http.ErrAbortHandler {
			panic(p)
		}
	}()
	g.ServeHTTP(w, r)
}
