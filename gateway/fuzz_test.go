package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
)

// FuzzRequestHygiene feeds the gateway requests as net/http parses them
// from a method, a target and a header block, and checks what it forwards
// or how it refuses against rules written here independently of the
// gateway's own lists:
//
//   - only GET and HEAD with an origin-form target and no body are
//     forwarded; anything else is refused (405 or 400) with "Connection:
//     close", and nothing is sent;
//   - a forwarded request goes to a configured backend, as that backend's
//     Host, with the method and the target's bytes unchanged;
//   - no hop-by-hop header (RFC 9110 §7.6.1), nor one the client named in
//     Connection, is forwarded; nor, unless the gateway trusts its hop,
//     any Tailgate-* header but the gateway's own Tailgate-Timeout, or a
//     client-address header but the X-Forwarded-For, -Host and -Proto the
//     gateway wrote; ties never;
//   - every other end-to-end header is forwarded as the client sent it.
//
// Each input is checked twice over: handed to the gateway as parsed here,
// and sent as bytes to the gateway served by each server of plain-HTTP
// clients (plainServers), which may also refuse it before the gateway
// sees it (any refusal that closes and sends nothing is safe).
//
// The seed corpus runs as a test; `go test -run '^$' -fuzz
// FuzzRequestHygiene ./gateway/` explores.
func FuzzRequestHygiene(f *testing.F) {
	for _, s := range []struct {
		method, target, headers string
		trusted                 bool
	}{
		{"GET", "/x?q=1", "Host: h\r\n", false},
		{"HEAD", "/", "Host: h\r\nUser-Agent: ua\r\n", false},
		{"GET", "http://evil.example/x", "Host: evil.example\r\n", false},
		{"GET", "//evil.example/x", "Host: h\r\n", false},
		{"GET", "evil.example:443", "Host: h\r\n", false},
		{"CONNECT", "evil.example:443", "Host: evil.example:443\r\n", false},
		{"OPTIONS", "*", "Host: h\r\n", false},
		{"POST", "/x", "Host: h\r\nContent-Length: 4\r\n", false},
		{"GET", "/x", "Host: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n", false},
		{"GET", "/a%2Fb;p?x=%20y&z=1+2#", "Host: h\r\n", false},
		{"GET", "/%zz/%7e/./x?", "Host: h\r\n", false},
		{"GET", "/x", "Host: h\r\nTailgate-Hedge: 1\r\nTailgate-Shadow: 1\r\ntailgate-tie: t\r\nTAILGATE-TIE-PEER: http://evil\r\n", false},
		{"GET", "/x", "Host: h\r\nTailgate-Hedge: 1\r\nTailgate-Shadow: 1\r\ntailgate-tie: t\r\nTAILGATE-TIE-PEER: http://evil\r\n", true},
		{"GET", "/x", "Host: h\r\nTailgate-Timeout: 5m\r\n", false},
		{"GET", "/x", "Host: h\r\nTailgate-Timeout: 1m\r\nTailgate-Timeout: 2m\r\n", true},
		{"GET", "/x", "Host: h\r\nX-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Host: e\r\nX-Forwarded-Proto: https\r\nForwarded: for=1.2.3.4\r\nX-Real-IP: 1\r\n", false},
		{"GET", "/x", "Host: h\r\nX-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Host: e\r\nX-Forwarded-Proto: https\r\nForwarded: for=1.2.3.4\r\n", true},
		{"GET", "/x", "Host: h\r\nConnection: X-Forwarded-For, x-a, Tailgate-Hedge\r\nX-Forwarded-For: 1.2.3.4\r\nX-A: 1\r\nTailgate-Hedge: 1\r\n", true},
		{"GET", "/x", "Host: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\nTe: trailers\r\nProxy-Authorization: x\r\nKeep-Alive: 1\r\nTrailer: X\r\n", false},
	} {
		f.Add(s.method, s.target, s.headers, s.trusted)
	}

	backends := []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}
	rt := &sentRecorder{}
	gateways := map[bool]*Gateway{}
	for _, trusted := range []bool{false, true} {
		g, err := New(Config{Backends: backends, Base: rt, TrustedHop: trusted, Timeout: clientTimeout,
			Policy: hedge.Policy{MaxAttempts: 1}, DisableProbation: true})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(g.Close)
		gateways[trusted] = g
	}
	// served[trusted][i]: the address of gateways[trusted] served by
	// plainServers[i].
	served := map[bool][]string{}
	for _, trusted := range []bool{false, true} {
		for _, plain := range plainServers {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				f.Fatal(err)
			}
			srv := plainServer(gateways[trusted], ServerConfig{}, plain)
			done := make(chan struct{})
			go func() { srv.Serve(ln); close(done) }()
			f.Cleanup(func() { srv.Close(); <-done })
			served[trusted] = append(served[trusted], ln.Addr().String())
		}
	}

	f.Fuzz(func(t *testing.T, method, target, headers string, trusted bool) {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(method + " " + target + " HTTP/1.1\r\n" + headers + "\r\n")))
		if err != nil {
			return // net/http refuses it before any handler
		}
		r.RemoteAddr = "192.0.2.1:1234"
		var sent []*http.Request
		ctx := context.WithValue(r.Context(), recordKey{}, &sent)
		w := httptest.NewRecorder()
		serveAbortable(t, gateways[trusted], w, r.WithContext(ctx))
		if broken := hygiene(r, w.Code, w.Header().Get("Connection"), sent, backends, trusted); len(broken) > 0 {
			t.Fatalf("%q %q %q (trusted %v):\n%s", method, target, headers, trusted, strings.Join(broken, "\n"))
		}
		for i, addr := range served[trusted] {
			if broken := hygieneServed(t, addr, rt, method, target, headers, backends, trusted); len(broken) > 0 {
				t.Fatalf("%q %q %q (trusted %v) through %s:\n%s", method, target, headers, trusted, plainServers[i], strings.Join(broken, "\n"))
			}
		}
	})
}

// hygieneServed sends the request as bytes to a gateway served at addr
// whose transport is rt, and returns the rules its handling broke.
func hygieneServed(t *testing.T, addr string, rt *sentRecorder, method, target, headers string, backends []string, trusted bool) []string {
	t.Helper()
	raw := method + " " + target + " HTTP/1.1\r\n" + headers + "\r\n"
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err) // parsed before the call
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(clientTimeout))
	r.RemoteAddr = conn.LocalAddr().String()
	rt.takeUnkeyed() // nothing left from an earlier input
	io.WriteString(conn, raw)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		return []string{fmt.Sprintf("no answer: %v", err)}
	}
	resp.Body.Close()
	conn.Close()
	var sent []*http.Request
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusGatewayTimeout {
		sent = rt.takeUnkeyed() // what the gateway sent went before its answer
	} else if sent = rt.takeUnkeyed(); len(sent) == 0 && resp.StatusCode >= 400 && resp.Close {
		return nil // refused, closed, nothing sent: by the server or the gateway, safe
	}
	connection := ""
	if resp.Close {
		connection = "close" // ReadResponse takes it out of the header
	}
	return hygiene(r, resp.StatusCode, connection, sent, backends, trusted)
}

// hygiene returns the rules r's handling broke: the gateway answered it
// code with a Connection header connection, and sent the requests sent.
func hygiene(r *http.Request, code int, connection string, sent []*http.Request, backends []string, trusted bool) []string {
	var broken []string
	fail := func(format string, args ...any) { broken = append(broken, fmt.Sprintf(format, args...)) }
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	origin := strings.HasPrefix(r.RequestURI, "/")
	body := r.ContentLength != 0 || len(r.TransferEncoding) > 0
	if !read || !origin || body {
		want := http.StatusBadRequest
		if !read {
			want = http.StatusMethodNotAllowed
		}
		if code != want || connection != "close" || len(sent) != 0 {
			fail("%s %q (body %v): %d, Connection %q, %d sent; want %d, close, nothing sent", r.Method, r.RequestURI, body, code, connection, len(sent), want)
		}
		return broken
	}
	_, hasDeadline := r.Header[deadline.Header]
	if len(sent) == 0 {
		switch {
		case strings.HasPrefix(r.RequestURI, "//") && code == http.StatusBadRequest && connection == "close":
			// A "//" path net/http's client would re-escape: refused
			// rather than changed.
		case hasDeadline && code != http.StatusOK:
			// Refused for its deadline (a malformed, spent or doubled
			// Tailgate-Timeout): well framed, so the connection may stay.
		default:
			fail("%s %q: %d, nothing sent", r.Method, r.RequestURI, code)
		}
		return broken
	}
	// 200, or 504 when the client's own deadline was too short even for
	// an answer at once.
	if len(sent) != 1 || code != http.StatusOK && !(hasDeadline && code == http.StatusGatewayTimeout) {
		fail("%s %q: %d, %d sent; want 200, one attempt", r.Method, r.RequestURI, code, len(sent))
		return broken
	}
	out := sent[0]
	if !slices.Contains(backends, out.URL.Scheme+"://"+out.URL.Host) || out.Host != "" || out.URL.User != nil {
		fail("%q sent to %q (Host %q), want one of %q as its own Host", r.RequestURI, out.URL.String(), out.Host, backends)
	}
	if out.Method != r.Method || out.URL.RequestURI() != r.RequestURI {
		fail("%s %q sent as %s %q: want the method and target bytes unchanged", r.Method, r.RequestURI, out.Method, out.URL.RequestURI())
	}

	named := map[string]bool{} // lower-case names the client's Connection lists
	for _, v := range r.Header["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			named[strings.ToLower(strings.TrimSpace(tok))] = true
		}
	}
	peer, _, _ := net.SplitHostPort(r.RemoteAddr)
	for k, vs := range out.Header {
		lk := strings.ToLower(k)
		switch {
		case slices.Contains(hopByHop, lk):
			fail("hop-by-hop %s: %q forwarded", k, vs)
		case lk == "tailgate-timeout":
			if d, ok, err := deadline.FromHeader(out.Header); !ok || err != nil || d <= 0 || d > clientTimeout {
				fail("%s %q: want the gateway's own, in (0, %v]", k, vs, clientTimeout)
			}
		case lk == "tailgate-tie" || lk == "tailgate-tie-peer":
			fail("tie header %s: %q forwarded from a client", k, vs)
		case lk == "expect":
			fail("Expect %q forwarded: a read has no body", vs)
		case lk == "x-forwarded-for":
			want := peer
			if prior := r.Header.Values(k); trusted && !named[lk] && len(prior) > 0 {
				want = strings.Join(prior, ", ") + ", " + peer
			}
			if len(vs) != 1 || vs[0] != want {
				fail("%s %q, want %q", k, vs, want)
			}
		case (lk == "x-forwarded-host" || lk == "x-forwarded-proto") && (!trusted || named[lk] || len(r.Header.Values(k)) == 0):
			want := r.Host
			if lk == "x-forwarded-proto" {
				want = "http"
			}
			if len(vs) != 1 || vs[0] != want {
				fail("%s %q, want the gateway's %q", k, vs, want)
			}
		case lk == "user-agent" && len(r.Header.Values(k)) == 0:
			if len(vs) != 1 || vs[0] != "" {
				fail("User-Agent %q added; the client sent none", vs)
			}
		case named[lk]:
			fail("%s: %q forwarded although the client's Connection names it", k, vs)
		case !trusted && (strings.HasPrefix(lk, "tailgate-") || strings.HasPrefix(lk, "x-forwarded-") || slices.Contains(clientAddress, lk)):
			fail("%s: %q forwarded from an untrusted client", k, vs)
		case !slices.Equal(vs, r.Header.Values(k)):
			fail("%s: %q forwarded as %q", k, r.Header.Values(k), vs)
		}
	}
	// And nothing else lost: each end-to-end header the rules above let
	// through arrives as sent.
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		switch {
		case lk == "host", lk == "expect", slices.Contains(hopByHop, lk), named[lk], strings.HasPrefix(lk, "tailgate-"), strings.HasPrefix(lk, "x-forwarded-"),
			!trusted && slices.Contains(clientAddress, lk):
		case !slices.Equal(out.Header.Values(k), vs):
			fail("%s: %q from the client forwarded as %q", k, vs, out.Header.Values(k))
		}
	}
	return broken
}

// hopByHop are the hop-by-hop headers of RFC 9110 §7.6.1 and their
// common non-standard kin, in lower case.
var hopByHop = []string{"connection", "proxy-connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade"}

// clientAddress are the client-address headers outside X-Forwarded-*
// that only a trusted hop may send, in lower case.
var clientAddress = []string{"forwarded", "x-real-ip", "true-client-ip"}

// recordKey keys, in a request's context, where sentRecorder appends
// what it is sent.
type recordKey struct{}

// sentRecorder is a backend transport that sends nothing: it records each
// request in the slice its context names (or, from a request through a
// server, whose context the test cannot set, in its own) and answers 200
// "ok".
type sentRecorder struct {
	mu      sync.Mutex
	unkeyed []*http.Request
}

func (b *sentRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	if sent, ok := r.Context().Value(recordKey{}).(*[]*http.Request); ok {
		*sent = append(*sent, r.Clone(context.Background()))
	} else {
		b.unkeyed = append(b.unkeyed, r.Clone(context.Background()))
	}
	b.mu.Unlock()
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Length": {"2"}}, ContentLength: 2,
		Body: io.NopCloser(strings.NewReader("ok")), Request: r,
	}, nil
}

// takeUnkeyed returns and forgets the requests recorded without a slot.
func (b *sentRecorder) takeUnkeyed() []*http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	sent := b.unkeyed
	b.unkeyed = nil
	return sent
}

// hygiene's rules catch what they should: each way a forwarded request
// could go wrong breaks one, and the request as the gateway should send it
// breaks none. Without this a rule that never fires would pass the fuzzer
// off as a test.
func TestHygieneRulesCatchLeaks(t *testing.T) {
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET /a%2Fb HTTP/1.1\r\nHost: h\r\nConnection: x-a\r\nX-A: 1\r\nTailgate-Hedge: 1\r\nX-Kept: 1\r\n\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	r.RemoteAddr = "192.0.2.1:1234"
	backends := []string{"http://127.0.0.1:1"}
	good := func() *http.Request {
		return &http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: "127.0.0.1:1", Opaque: "/a%2Fb"}, Header: http.Header{
			"X-Forwarded-For": {"192.0.2.1"}, "X-Forwarded-Host": {"h"}, "X-Forwarded-Proto": {"http"}, "User-Agent": {""}, "X-Kept": {"1"},
			"Tailgate-Timeout": {"1S"}}}
	}
	if broken := hygiene(r, 200, "", []*http.Request{good()}, backends, false); len(broken) > 0 {
		t.Fatalf("the request as it should be sent breaks rules: %q", broken)
	}
	for name, spoil := range map[string]func(*http.Request){
		"sent elsewhere":           func(o *http.Request) { o.URL.Host = "127.0.0.1:3" },
		"path bytes changed":       func(o *http.Request) { o.URL.Opaque = "/a/b" },
		"method changed":           func(o *http.Request) { o.Method = "HEAD" },
		"Host header chosen":       func(o *http.Request) { o.Host = "evil.example" },
		"header named in Conn":     func(o *http.Request) { o.Header["X-A"] = []string{"1"} },
		"hedge mark forwarded":     func(o *http.Request) { o.Header["Tailgate-Hedge"] = []string{"1"} },
		"tie forwarded":            func(o *http.Request) { o.Header["Tailgate-Tie"] = []string{"t"} },
		"timeout beyond the limit": func(o *http.Request) { o.Header["Tailgate-Timeout"] = []string{"1H"} },
		"client's XFF kept":        func(o *http.Request) { o.Header["X-Forwarded-For"] = []string{"1.2.3.4, 192.0.2.1"} },
		"XFH spoofed":              func(o *http.Request) { o.Header["X-Forwarded-Host"] = []string{"evil"} },
		"Forwarded forwarded":      func(o *http.Request) { o.Header["Forwarded"] = []string{"for=1.2.3.4"} },
		"hop-by-hop forwarded":     func(o *http.Request) { o.Header["Keep-Alive"] = []string{"1"} },
		"User-Agent added":         func(o *http.Request) { o.Header["User-Agent"] = []string{"Go-http-client/1.1"} },
		"Expect forwarded":         func(o *http.Request) { o.Header["Expect"] = []string{"100-continue"} },
		"header lost":              func(o *http.Request) { delete(o.Header, "X-Kept") },
	} {
		out := good()
		spoil(out)
		if broken := hygiene(r, 200, "", []*http.Request{out}, backends, false); len(broken) == 0 {
			t.Errorf("%s: no rule broken", name)
		}
	}
	// Refusals: a read refused, or refused without closing, breaks a rule.
	post, _ := http.ReadRequest(bufio.NewReader(strings.NewReader("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")))
	if len(hygiene(post, 405, "close", nil, backends, false)) != 0 || len(hygiene(post, 405, "", nil, backends, false)) == 0 ||
		len(hygiene(post, 200, "", []*http.Request{good()}, backends, false)) == 0 {
		t.Error("the refusal rules do not tell a closed 405 from an open one, or from a forwarded POST")
	}
}
