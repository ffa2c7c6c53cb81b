package gateway

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/memnet"
)

// gRPC through the gateway, without a gRPC library: a call is a POST of
// length-prefixed messages whose status is the trailer grpc-status (see
// grpcproxy.go). The fake servers here answer as grpc-go's do.

// frame returns msg as one gRPC message on the wire: uncompressed, its
// length first.
func frame(msg string) string {
	var b [5]byte
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return string(b[:]) + msg
}

// grpcRoutes: the service catalog.Catalog, whose Get and Search are reads.
var grpcRoutes = []Route{{Name: "catalog", Match: "/catalog.Catalog/", GRPC: []string{"Get", "/catalog.Catalog/Search"}}}

// answerGRPC answers a call as a gRPC server does: the message msg and the
// status code in the trailers, with a trailer of the server's own.
func answerGRPC(w http.ResponseWriter, msg string, code int) {
	w.Header().Set("Content-Type", "application/grpc")
	w.WriteHeader(200)
	io.WriteString(w, frame(msg))
	w.Header().Set(http.TrailerPrefix+"Grpc-Status", strconv.Itoa(code))
	w.Header().Set(http.TrailerPrefix+"X-Served-By", msg)
}

// failGRPC answers as a server that refuses a call: trailers-only, no
// body.
func failGRPC(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Grpc-Status", strconv.Itoa(code))
	w.Header().Set("Grpc-Message", msg)
	w.WriteHeader(200)
}

// grpcStraggler answers a hedge at once and a primary never (until
// cancelled): the backend's name is its message.
func grpcStraggler(b *backend, w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(hedge.HedgeHeader) == "" {
		<-r.Context().Done()
		return
	}
	answerGRPC(w, b.name, 0)
}

// call sends a gRPC call through g in memory.
func call(g http.Handler, method, msg string, hdr ...string) *responseWithTrailers {
	hdr = append([]string{"Content-Type", "application/grpc", "Te", "trailers"}, hdr...)
	w := serveIn(g, http.MethodPost, method, strings.NewReader(frame(msg)), hdr...)
	resp := w.Result()
	body, _ := io.ReadAll(resp.Body)
	return &responseWithTrailers{resp, string(body)}
}

type responseWithTrailers struct {
	*http.Response
	body string
}

// status returns the call's grpc-status, from the trailers or (a
// trailers-only answer) the header; -1 without one.
func (r *responseWithTrailers) status() int {
	v := r.Trailer.Get("Grpc-Status")
	if v == "" {
		v = r.Header.Get("Grpc-Status")
	}
	if v == "" {
		return -1
	}
	n, _ := strconv.Atoi(v)
	return n
}

// A listed method's call is hedged: the hedge's answer goes back with its
// trailers; the hedge carries the hedge mark and
// grpc-previous-rpc-attempts; every attempt sends the same message, with
// te: trailers; the method is a class of its own.
func TestGRPCReadHedged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", grpcStraggler)
		b := newMemBackend(net, "b", grpcStraggler)
		g := newMemGateway(t, net, Config{Policy: fixedPolicy(20 * time.Millisecond), Routes: grpcRoutes}, a, b)
		start := time.Now()
		r := call(g, "/catalog.Catalog/Get", "id=7")
		if took := time.Since(start); r.StatusCode != 200 || r.status() != 0 || took != 20*time.Millisecond {
			t.Fatalf("HTTP %d, grpc-status %d after %v; want OK from the hedge after the 20ms delay", r.StatusCode, r.status(), took)
		}
		winner := r.Trailer.Get("X-Served-By")
		if r.body != frame(winner) || winner == "" {
			t.Errorf("body %q, trailer X-Served-By %q: want the hedge's message and its trailers", r.body, winner)
		}
		if cl := r.Header.Get("Content-Length"); cl != "" {
			t.Errorf("Content-Length %s on a gRPC answer", cl)
		}
		synctest.Wait()
		seen := append(a.requests(), b.requests()...)
		if len(seen) != 2 {
			t.Fatalf("%d attempts, want 2", len(seen))
		}
		for _, s := range seen {
			got, _ := io.ReadAll(s.Body)
			if string(got) != frame("id=7") || s.Header.Get("Te") != "trailers" {
				t.Errorf("attempt sent %q, te %q; want the client's message and te: trailers", got, s.Header.Get("Te"))
			}
			hedged := s.Header.Get(hedge.HedgeHeader) != ""
			if prev := s.Header.Get("Grpc-Previous-Rpc-Attempts"); hedged && prev != "1" || !hedged && prev != "" {
				t.Errorf("hedge %v with grpc-previous-rpc-attempts %q", hedged, prev)
			}
		}
		if h := g.view.Load().routes[0].keep.classes.Hedger("/catalog.Catalog/Get"); h.Stats().Operations != 1 {
			t.Errorf("class /catalog.Catalog/Get saw %d calls, want 1 (a method a class)", h.Stats().Operations)
		}
	})
}

// Unavailable sends the next attempt at once, without waiting for the
// delay; any other status is the call's answer, and no hedge follows it;
// Unavailable from every replica goes back as the servers sent it.
func TestGRPCStatusDecides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		var mu sync.Mutex
		primary, hedges := 0, 0 // the status each kind of attempt gets
		handle := func(b *backend, w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			code := primary
			if r.Header.Get(hedge.HedgeHeader) != "" {
				code = hedges
			}
			mu.Unlock()
			if code != 0 {
				failGRPC(w, code, "from "+b.name)
				return
			}
			answerGRPC(w, b.name, 0)
		}
		a, b := newMemBackend(net, "a", handle), newMemBackend(net, "b", handle)
		g := newMemGateway(t, net, Config{Policy: fixedPolicy(time.Second), Routes: grpcRoutes, DisableProbation: true}, a, b)
		set := func(p, h int) {
			mu.Lock()
			primary, hedges = p, h
			mu.Unlock()
			a.hits.Store(0)
			b.hits.Store(0)
		}
		attempts := func() int32 { synctest.Wait(); return a.hits.Load() + b.hits.Load() }

		set(codeUnavailable, 0)
		start := time.Now()
		r := call(g, "/catalog.Catalog/Get", "x")
		if took := time.Since(start); r.status() != 0 || took != 0 || attempts() != 2 {
			t.Errorf("after UNAVAILABLE: grpc-status %d after %v, %d attempts; want OK at once from a second attempt, not after the 1s delay", r.status(), took, attempts())
		}

		set(5, 0) // NotFound: an answer
		r = call(g, "/catalog.Catalog/Get", "x")
		if r.status() != 5 || attempts() != 1 || !strings.HasPrefix(r.Header.Get("Grpc-Message"), "from ") {
			t.Errorf("NOT_FOUND: grpc-status %d (%q) after %d attempts; want NOT_FOUND as the server sent it, no hedge",
				r.status(), r.Header.Get("Grpc-Message"), attempts())
		}

		set(codeUnavailable, codeUnavailable)
		r = call(g, "/catalog.Catalog/Get", "x")
		if r.StatusCode != 200 || r.status() != codeUnavailable || !strings.HasPrefix(r.Header.Get("Grpc-Message"), "from ") {
			t.Errorf("every replica UNAVAILABLE: HTTP %d, grpc-status %d (%q); want the servers' UNAVAILABLE", r.StatusCode, r.status(), r.Header.Get("Grpc-Message"))
		}
	})
}

// grpc-timeout bounds the call, and each attempt is told what remains;
// when it runs out the client gets DEADLINE_EXCEEDED, as a gRPC status.
func TestGRPCTimeoutHonouredAndForwarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		slow := func(b *backend, w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
		a, b := newMemBackend(net, "a", slow), newMemBackend(net, "b", slow)
		g := newMemGateway(t, net, Config{Policy: fixedPolicy(20 * time.Millisecond), Routes: grpcRoutes, DisableProbation: true}, a, b)
		start := time.Now()
		r := call(g, "/catalog.Catalog/Search", "q", "Grpc-Timeout", "50m")
		if took := time.Since(start); r.StatusCode != 200 || r.status() != codeDeadlineExceeded || took != 50*time.Millisecond {
			t.Errorf("HTTP %d, grpc-status %d after %v; want DEADLINE_EXCEEDED after the call's 50ms", r.StatusCode, r.status(), took)
		}
		synctest.Wait()
		for _, s := range append(a.requests(), b.requests()...) {
			d, err := deadline.Parse(s.Header.Get("Grpc-Timeout"))
			want := 50 * time.Millisecond
			if s.Header.Get(hedge.HedgeHeader) != "" {
				want = 30 * time.Millisecond // sent 20ms in
			}
			if err != nil || d > want || d < want-2*time.Millisecond {
				t.Errorf("attempt (hedge %q) told grpc-timeout %q, want about %v", s.Header.Get(hedge.HedgeHeader), s.Header.Get("Grpc-Timeout"), want)
			}
			if s.Header.Get(deadline.Header) != "" {
				t.Errorf("a gRPC attempt carries %s", deadline.Header)
			}
		}
		if r := call(g, "/catalog.Catalog/Search", "q", "Grpc-Timeout", "soon"); r.status() != codeInternal {
			t.Errorf("malformed grpc-timeout: grpc-status %d, want INTERNAL", r.status())
		}
	})
}

// A call of a method the route does not list (a write, a stream) is
// proxied once, however late, its answer and trailers streamed back; a
// call no gRPC route takes is UNIMPLEMENTED; a listed call's message over
// the body limit is RESOURCE_EXHAUSTED, nothing forwarded.
func TestGRPCUnlistedUnroutedAndTooLarge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		handle := func(b *backend, w http.ResponseWriter, r *http.Request) {
			time.Sleep(100 * time.Millisecond)
			answerGRPC(w, "put", 0)
		}
		a, b := newMemBackend(net, "a", handle), newMemBackend(net, "b", handle)
		g := newMemGateway(t, net, Config{Policy: fixedPolicy(20 * time.Millisecond), Routes: grpcRoutes, MaxRequestBodyBytes: 64}, a, b)
		r := call(g, "/catalog.Catalog/Put", "item")
		if r.status() != 0 || r.body != frame("put") || r.Trailer.Get("X-Served-By") != "put" {
			t.Errorf("unlisted method: grpc-status %d, body %q, trailers %v; want the answer and its trailers", r.status(), r.body, r.Trailer)
		}
		synctest.Wait()
		if n := a.hits.Load() + b.hits.Load(); n != 1 {
			t.Errorf("unlisted method: %d attempts, want 1 (never hedged)", n)
		}
		if s := append(a.requests(), b.requests()...); len(s) == 1 {
			if got, _ := io.ReadAll(s[0].Body); string(got) != frame("item") || s[0].Header.Get("Te") != "trailers" {
				t.Errorf("unlisted method forwarded %q, te %q", got, s[0].Header.Get("Te"))
			}
		}

		if r := call(g, "/other.Service/Get", "x"); r.StatusCode != 200 || r.status() != codeUnimplemented {
			t.Errorf("no gRPC route: HTTP %d, grpc-status %d; want UNIMPLEMENTED", r.StatusCode, r.status())
		}
		if r := call(g, "/catalog.Catalog/Get", strings.Repeat("x", 100)); r.status() != codeResourceExhausted || r.Header.Get("Connection") != "" {
			t.Errorf("over the body limit: grpc-status %d, Connection %q; want RESOURCE_EXHAUSTED, the connection kept", r.status(), r.Header.Get("Connection"))
		}
		if n := a.hits.Load() + b.hits.Load(); n != 1 {
			t.Errorf("%d attempts after the refusals, want none more", n-1)
		}
	})
}

// Over loopback: a client speaking h2c with prior knowledge (as a gRPC
// client on an insecure channel) reaches the gateway's listener beside
// HTTP/1.1 clients; a listed call is hedged to h2c backends (the backend
// protocol left at its default: gRPC routes reach http:// backends over
// h2c) and its trailers arrive; an unlisted call streams, its first
// message reaching the client before the backend has ended it.
func TestLoopbackGRPCOverH2C(t *testing.T) {
	next := make(chan struct{})
	handle := func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "not HTTP/2", 505)
			return
		}
		io.Copy(io.Discard, r.Body)
		switch {
		case r.URL.Path == "/catalog.Catalog/Watch":
			w.Header().Set("Content-Type", "application/grpc")
			io.WriteString(w, frame("first"))
			w.(http.Flusher).Flush()
			<-next
			io.WriteString(w, frame("second"))
			w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
		case r.Header.Get(hedge.HedgeHeader) == "":
			select { // the primary straggles
			case <-r.Context().Done():
				return
			case <-time.After(2 * time.Second):
			}
			answerGRPC(w, "primary", 0)
		default:
			answerGRPC(w, "hedge", 0)
		}
	}
	var backends []string
	for range 2 {
		backends = append(backends, serveH2C(t, http.HandlerFunc(handle)))
	}
	g, err := New(Config{Backends: backends, Policy: fixedPolicy(20 * time.Millisecond), Routes: grpcRoutes, DisableProbation: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close) // after the server's Close, registered next
	base := "http://" + servePlainWith(t, g, ServerConfig{H2C: true}, plainNetHTTP)

	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &p}, Timeout: 5 * time.Second}
	defer h2c.CloseIdleConnections()
	post := func(method, msg string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+method, strings.NewReader(frame(msg)))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		resp, err := h2c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	resp := post("/catalog.Catalog/Get", "x")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || string(body) != frame("hedge") || resp.Trailer.Get("Grpc-Status") != "0" || resp.Trailer.Get("X-Served-By") != "hedge" {
		t.Errorf("listed call: %s, body %q, trailers %v; want the hedge's answer over HTTP/2 with its trailers", resp.Proto, body, resp.Trailer)
	}

	resp = post("/catalog.Catalog/Watch", "w")
	first := make([]byte, len(frame("first")))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != frame("first") {
		t.Errorf("stream: first message %q, %v; want it before the backend ends the stream", first, err)
	}
	close(next)
	rest, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(rest) != frame("second") || resp.Trailer.Get("Grpc-Status") != "0" {
		t.Errorf("stream: then %q, trailers %v", rest, resp.Trailer)
	}

	// HTTP/1.1 on the same listener (its backends speak h2c only, and the
	// default route HTTP/1.1: the gateway's 502 is the point, not a
	// connection refused).
	h1 := &http.Client{Timeout: 5 * time.Second}
	defer h1.CloseIdleConnections()
	r1, err := h1.Get(base + "/x")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r1.Body)
	r1.Body.Close()
	if r1.ProtoMajor != 1 || r1.StatusCode != http.StatusBadGateway {
		t.Errorf("HTTP/1.1 GET: %s %d", r1.Proto, r1.StatusCode)
	}
}

// serveH2C serves h over h2c (prior knowledge) on loopback until the test
// ends, and returns its URL.
func serveH2C(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		srv.Close()
	})
	return "http://" + ln.Addr().String()
}
