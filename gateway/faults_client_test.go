package gateway

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
)

// The client side of the fault matrix (issue 11): what a client on the
// internet may send a read gateway, and what the gateway must answer and
// forward. Each case writes raw bytes on a loopback connection to the
// gateway served as `tailgate serve` serves it (Gateway.Server), so that
// the test controls the framing byte for byte, and checks:
//
//   - the status, within the gateway's timeout;
//   - who answered: net/http itself (the handler never ran), the gateway's
//     refusal (counted under its reason), or the backend;
//   - whether the connection is closed after the answer (where the
//     framing is in doubt, RFC 9112 §6.1) or kept for the next request
//     (then a second request on it must be served);
//   - what the backend saw: nothing, or the request cleaned as the
//     gateway must clean it;
//   - the in-flight gauges back at 0 afterwards; goroutines are checked by
//     TestMain (goleak).

// clientTimeout is the gateway's Timeout in these cases, and how long a
// case waits for each answer.
const clientTimeout = 2 * time.Second

// Who answered a client case.
const (
	byBackend = ""         // forwarded: the backend's answer
	byNetHTTP = "net/http" // refused by the server before the gateway's handler ran
	// Otherwise the gateway refused it, and counted it under that reason
	// (rejectMethod, rejectBody, ...).
)

// smuggled is a request hidden in a body: were it ever parsed as a
// request, the backend would see its path.
const smuggled = "GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n"

type clientCase struct {
	name string
	// raw is what the client writes; "{backend}" stands for the backend's
	// host:port.
	raw string
	// trusted sets Config.TrustedHop.
	trusted bool
	status  int
	by      string // byBackend, byNetHTTP or the gateway's rejection reason
	closed  bool   // the connection must close after the answer; else it must serve another request
	// seen checks the one request the backend saw, beyond what
	// checkForwarded checks of every forwarded request; nil with by ==
	// byBackend checks nothing more. The backend must see nothing when by
	// is not byBackend.
	seen func(t *testing.T, r *http.Request)
}

// req joins a request line and header lines into a request without a body.
func req(lines ...string) string { return strings.Join(lines, "\r\n") + "\r\n\r\n" }

// withBody returns the request head lines with a Content-Length for body,
// and body after them.
func withBody(body string, lines ...string) string {
	return req(append(lines, "Content-Length: "+strconv.Itoa(len(body)))...) + body
}

// header checks that the backend saw header k with exactly the values
// want (none: absent).
func header(k string, want ...string) func(*testing.T, *http.Request) {
	return func(t *testing.T, r *http.Request) {
		t.Helper()
		if got := r.Header.Values(k); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("backend saw %s %q, want %q", k, got, want)
		}
	}
}

func all(checks ...func(*testing.T, *http.Request)) func(*testing.T, *http.Request) {
	return func(t *testing.T, r *http.Request) {
		t.Helper()
		for _, c := range checks {
			c(t, r)
		}
	}
}

func requestURI(want string) func(*testing.T, *http.Request) {
	return func(t *testing.T, r *http.Request) {
		t.Helper()
		if r.RequestURI != want {
			t.Errorf("backend saw target %q, want %q", r.RequestURI, want)
		}
	}
}

// timeoutAtMost checks the Tailgate-Timeout the backend saw: the
// gateway's own value, positive and at most max.
func timeoutAtMost(max time.Duration) func(*testing.T, *http.Request) {
	return func(t *testing.T, r *http.Request) {
		t.Helper()
		d, ok, err := deadline.FromHeader(r.Header)
		if !ok || err != nil || d <= 0 || d > max {
			t.Errorf("backend saw %s %q (%v, %v), want a value in (0, %v]", deadline.Header, r.Header.Values(deadline.Header), d, err, max)
		}
	}
}

var clientCases = []clientCase{
	// Reads, as they should be.
	{name: "GET is proxied", raw: req("GET /x?q=1 HTTP/1.1", "Host: h"), status: 200, by: byBackend, seen: requestURI("/x?q=1")},
	{name: "HEAD is proxied", raw: req("HEAD /x HTTP/1.1", "Host: h"), status: 200, by: byBackend},
	{name: "GET with Content-Length 0 is proxied", raw: req("GET /x HTTP/1.1", "Host: h", "Content-Length: 0"), status: 200, by: byBackend},

	// Methods other than GET and HEAD: 405, Allow, the connection closed
	// (the body, if any, is never read, nor parsed as a request).
	{name: "POST is refused and its body never read", raw: withBody(smuggled, "POST /x HTTP/1.1", "Host: h"), status: 405, by: rejectMethod, closed: true},
	{name: "PUT is refused", raw: withBody("data", "PUT /x HTTP/1.1", "Host: h"), status: 405, by: rejectMethod, closed: true},
	{name: "DELETE is refused", raw: req("DELETE /x HTTP/1.1", "Host: h"), status: 405, by: rejectMethod, closed: true},
	{name: "PATCH is refused", raw: withBody("data", "PATCH /x HTTP/1.1", "Host: h"), status: 405, by: rejectMethod, closed: true},
	{name: "CONNECT is refused", raw: req("CONNECT evil.example:443 HTTP/1.1", "Host: evil.example:443"), status: 405, by: rejectMethod, closed: true},
	{name: "OPTIONS is refused", raw: req("OPTIONS /x HTTP/1.1", "Host: h"), status: 405, by: rejectMethod, closed: true},
	{name: "OPTIONS * is refused like any OPTIONS", raw: req("OPTIONS * HTTP/1.1", "Host: h"), status: 405, by: rejectMethod, closed: true},
	{name: "TRACE is refused", raw: req("TRACE /x HTTP/1.1", "Host: h"), status: 405, by: rejectMethod, closed: true},
	{name: "lower-case get is another method, refused", raw: req("get /x HTTP/1.1", "Host: h"), status: 405, by: rejectMethod, closed: true},

	// Bodies and framing in doubt: refused, the connection closed, the
	// request hidden after the body never served.
	{name: "body on GET is refused", raw: withBody("data", "GET /x HTTP/1.1", "Host: h"), status: 400, by: rejectBody, closed: true},
	{name: "chunked body on GET is refused", raw: req("GET /x HTTP/1.1", "Host: h", "Transfer-Encoding: chunked") + "4\r\ndata\r\n0\r\n\r\n",
		status: 400, by: rejectBody, closed: true},
	{name: "body on HEAD is refused", raw: withBody("abc", "HEAD /x HTTP/1.1", "Host: h"), status: 400, by: rejectBody, closed: true},
	{name: "TE+CL: the request after the chunked end is never served",
		raw:    req("GET /x HTTP/1.1", "Host: h", "Transfer-Encoding: chunked", "Content-Length: "+strconv.Itoa(len("0\r\n\r\n"+smuggled))) + "0\r\n\r\n" + smuggled,
		status: 400, by: rejectBody, closed: true},
	{name: "CL+TE: the request after the chunked end is never served",
		raw:    req("GET /x HTTP/1.1", "Host: h", "Content-Length: "+strconv.Itoa(len("0\r\n\r\n"+smuggled)), "Transfer-Encoding: chunked") + "0\r\n\r\n" + smuggled,
		status: 400, by: rejectBody, closed: true},
	{name: "chunked GET with an empty body still closes", raw: req("GET /x HTTP/1.1", "Host: h", "Transfer-Encoding: chunked") + "0\r\n\r\n" + smuggled,
		status: 400, by: rejectBody, closed: true},
	{name: "conflicting duplicate Content-Length is refused by net/http",
		raw: req("GET /x HTTP/1.1", "Host: h", "Content-Length: 0", "Content-Length: "+strconv.Itoa(len(smuggled))) + smuggled, status: 400, by: byNetHTTP, closed: true},
	{name: "equal duplicate Content-Length is a body, refused",
		raw: req("GET /x HTTP/1.1", "Host: h", "Content-Length: 5", "Content-Length: 5") + "hello", status: 400, by: rejectBody, closed: true},
	{name: "Content-Length with a sign is refused by net/http", raw: req("GET /x HTTP/1.1", "Host: h", "Content-Length: +0"), status: 400, by: byNetHTTP, closed: true},
	{name: "Transfer-Encoding identity is refused by net/http", raw: req("GET /x HTTP/1.1", "Host: h", "Transfer-Encoding: identity"), status: 501, by: byNetHTTP, closed: true},
	{name: "Transfer-Encoding gzip, chunked is refused by net/http", raw: req("GET /x HTTP/1.1", "Host: h", "Transfer-Encoding: gzip, chunked") + "0\r\n\r\n",
		status: 501, by: byNetHTTP, closed: true},

	// Request targets: only the origin form is proxied; no other form
	// may choose where a request goes.
	{name: "absolute-form target is refused", raw: req("GET http://evil.example/steal HTTP/1.1", "Host: evil.example"), status: 400, by: rejectTarget, closed: true},
	{name: "absolute-form naming the backend is refused too", raw: req("GET http://{backend}/x HTTP/1.1", "Host: {backend}"), status: 400, by: rejectTarget, closed: true},
	{name: "absolute-form over HTTP/1.0 is refused", raw: req("GET http://127.0.0.1:1/x HTTP/1.0"), status: 400, by: rejectTarget, closed: true},
	{name: "authority-form target on GET is refused", raw: req("GET evil.example:443 HTTP/1.1", "Host: evil.example:443"), status: 400, by: rejectTarget, closed: true},
	{name: "asterisk-form target on GET is refused", raw: req("GET * HTTP/1.1", "Host: h"), status: 400, by: rejectTarget, closed: true},
	{name: "a //host path stays a path on the backend", raw: req("GET //evil.example/x HTTP/1.1", "Host: h"), status: 200, by: byBackend,
		seen: requestURI("//evil.example/x")},
	{name: "a //host path net/http's client would re-escape is refused", raw: req("GET //evil.example/\"x HTTP/1.1", "Host: h"), status: 400, by: rejectTarget, closed: true},
	{name: "the Host header never chooses the backend", raw: req("GET /x HTTP/1.1", "Host: evil.example"), status: 200, by: byBackend,
		seen: header("X-Forwarded-Host", "evil.example")},
	{name: "HTTP/1.1 without Host is refused by net/http", raw: req("GET /x HTTP/1.1"), status: 400, by: byNetHTTP, closed: true},
	{name: "two Host headers are refused by net/http", raw: req("GET /x HTTP/1.1", "Host: h", "Host: evil.example"), status: 400, by: byNetHTTP, closed: true},

	// Sizes: Gateway.Server's MaxHeaderBytes (64 KiB, and net/http's 4
	// KiB of slack) bounds the request line and the header block.
	{name: "URL over the header limit is refused by net/http", raw: req("GET /"+strings.Repeat("a", 70<<10)+" HTTP/1.1", "Host: h"), status: 431, by: byNetHTTP, closed: true},
	{name: "header block over the limit is refused by net/http", raw: req("GET /x HTTP/1.1", "Host: h", "X-Big: "+strings.Repeat("a", 70<<10)), status: 431, by: byNetHTTP, closed: true},
	{name: "a long URL within the limit is forwarded whole", raw: req("GET /"+strings.Repeat("a", 8<<10)+" HTTP/1.1", "Host: h"), status: 200, by: byBackend,
		seen: requestURI("/" + strings.Repeat("a", 8<<10))},

	// Control bytes: net/http refuses them raw; escaped, they are path
	// bytes like any other, forwarded as they came.
	{name: "NUL in the path is refused by net/http", raw: req("GET /a\x00b HTTP/1.1", "Host: h"), status: 400, by: byNetHTTP, closed: true},
	{name: "CR in the path is refused by net/http", raw: req("GET /a\rb HTTP/1.1", "Host: h"), status: 400, by: byNetHTTP, closed: true},
	{name: "LF in the path is refused by net/http", raw: req("GET /a\nb HTTP/1.1", "Host: h"), status: 400, by: byNetHTTP, closed: true},
	{name: "escaped CR LF NUL in the path are forwarded as sent", raw: req("GET /a%0d%0aSet-Cookie:%20x%00 HTTP/1.1", "Host: h"), status: 200, by: byBackend,
		seen: requestURI("/a%0d%0aSet-Cookie:%20x%00")},
	{name: "NUL in a header value is refused by net/http", raw: req("GET /x HTTP/1.1", "Host: h", "X-A: a\x00b"), status: 400, by: byNetHTTP, closed: true},
	{name: "CR in a header value is refused by net/http", raw: req("GET /x HTTP/1.1", "Host: h", "X-A: a\rX-B: b"), status: 400, by: byNetHTTP, closed: true},
	{name: "NUL in a header name is refused by net/http", raw: req("GET /x HTTP/1.1", "Host: h", "X-\x00A: a"), status: 400, by: byNetHTTP, closed: true},
	{name: "space before the colon is refused by net/http", raw: req("GET /x HTTP/1.1", "Host: h", "X-A : a"), status: 400, by: byNetHTTP, closed: true},
	{name: "a folded header line is unfolded, as RFC 9112 allows", raw: req("GET /x HTTP/1.1", "Host: h", "X-A: a", " folded"), status: 200, by: byBackend,
		seen: header("X-A", "a folded")},
	{name: "a folded Transfer-Encoding is still a body, refused", raw: req("GET /x HTTP/1.1", "Host: h", "Transfer-Encoding:", " chunked") + "0\r\n\r\n" + smuggled,
		status: 400, by: rejectBody, closed: true},
	{name: "bare LF ends a header line, as RFC 9112 allows", raw: "GET /x HTTP/1.1\nHost: h\nX-A: a\n\n", status: 200, by: byBackend,
		seen: header("X-A", "a")},
	{name: "Expect: 100-continue on a read is not forwarded", raw: req("GET /x HTTP/1.1", "Host: h", "Expect: 100-continue"), status: 200, by: byBackend,
		seen: header("Expect")},
	{name: "an Expect other than 100-continue is refused by the server", raw: req("GET /x HTTP/1.1", "Host: h", "Expect: teapot"), status: 417, by: byNetHTTP, closed: true},

	// Tailgate's own headers from a client are removed (Config.TrustedHop
	// false); the client's deadline only shortens the gateway's, which
	// writes its own value.
	{name: "client's Tailgate-Hedge and Tailgate-Shadow are removed", raw: req("GET /x HTTP/1.1", "Host: h", "Tailgate-Hedge: 1", "Tailgate-Shadow: 1"),
		status: 200, by: byBackend, seen: all(header(hedge.HedgeHeader), header(ShadowHeader))},
	{name: "client's tie headers are removed", raw: req("GET /x HTTP/1.1", "Host: h", "Tailgate-Tie: t1", "Tailgate-Tie-Peer: http://127.0.0.1:1"),
		status: 200, by: byBackend, seen: all(header("Tailgate-Tie"), header("Tailgate-Tie-Peer"))},
	{name: "every Tailgate-* header is removed, whatever its case", raw: req("GET /x HTTP/1.1", "Host: h", "tailgate-tie-token: s", "TAILGATE-FUTURE: 1"),
		status: 200, by: byBackend, seen: all(header("Tailgate-Tie-Token"), header("Tailgate-Future"))},
	{name: "client's Tailgate-Timeout shortens the deadline, rewritten", raw: req("GET /x HTTP/1.1", "Host: h", "Tailgate-Timeout: 500m"),
		status: 200, by: byBackend, seen: timeoutAtMost(500 * time.Millisecond)},
	{name: "a longer client Tailgate-Timeout is capped at the gateway's", raw: req("GET /x HTTP/1.1", "Host: h", "Tailgate-Timeout: 1H"),
		status: 200, by: byBackend, seen: timeoutAtMost(clientTimeout)},
	{name: "malformed client Tailgate-Timeout is refused, connection kept", raw: req("GET /x HTTP/1.1", "Host: h", "Tailgate-Timeout: soon"),
		status: 400, by: rejectBadDeadline},

	// Forwarding headers: a client's claims are replaced by what the
	// gateway saw (see hopOnly).
	{name: "spoofed X-Forwarded-For, -Host, -Proto are replaced",
		raw:    req("GET /x HTTP/1.1", "Host: front.example", "X-Forwarded-For: 1.2.3.4", "X-Forwarded-For: 5.6.7.8", "X-Forwarded-Host: evil.example", "X-Forwarded-Proto: https"),
		status: 200, by: byBackend,
		seen: all(header("X-Forwarded-For", "127.0.0.1"), header("X-Forwarded-Host", "front.example"), header("X-Forwarded-Proto", "http"))},
	{name: "spoofed Forwarded, X-Real-Ip, True-Client-Ip, X-Forwarded-Client-Cert are removed",
		raw:    req("GET /x HTTP/1.1", "Host: h", "Forwarded: for=1.2.3.4", "X-Real-IP: 1.2.3.4", "True-Client-IP: 1.2.3.4", "X-Forwarded-Client-Cert: Hash=x"),
		status: 200, by: byBackend,
		seen: all(header("Forwarded"), header("X-Real-Ip"), header("True-Client-Ip"), header("X-Forwarded-Client-Cert"))},
	{name: "Connection-named and hop-by-hop headers are removed",
		raw: req("GET /x HTTP/1.1", "Host: h", "Connection: X-A, keep-alive", "X-A: 1", "Keep-Alive: timeout=5", "Proxy-Authorization: Basic abc",
			"Proxy-Connection: keep-alive", "TE: trailers", "Upgrade: websocket", "X-Kept: 1"),
		status: 200, by: byBackend, seen: all(header("X-A"), header("X-Kept", "1"))},

	// Behind a trusted hop (Config.TrustedHop): its marks and forwarding
	// headers are the truth, but ties stay the gateway's own, and a header
	// the hop names in Connection is still hop-by-hop.
	{name: "trusted hop: hedge and shadow marks are kept", trusted: true, raw: req("GET /x HTTP/1.1", "Host: h", "Tailgate-Hedge: 1", "Tailgate-Shadow: 1"),
		status: 200, by: byBackend, seen: all(header(hedge.HedgeHeader, "1"), header(ShadowHeader, "1"))},
	{name: "trusted hop: ties are still removed", trusted: true, raw: req("GET /x HTTP/1.1", "Host: h", "Tailgate-Tie: t1", "Tailgate-Tie-Peer: http://127.0.0.1:1"),
		status: 200, by: byBackend, seen: all(header("Tailgate-Tie"), header("Tailgate-Tie-Peer"))},
	{name: "trusted hop: a mark named in Connection is removed", trusted: true, raw: req("GET /x HTTP/1.1", "Host: h", "Connection: Tailgate-Hedge", "Tailgate-Hedge: 1"),
		status: 200, by: byBackend, seen: header(hedge.HedgeHeader)},
	{name: "trusted hop: X-Forwarded-For appended to, -Host and -Proto kept", trusted: true,
		raw:    req("GET /x HTTP/1.1", "Host: h", "X-Forwarded-For: 1.2.3.4", "X-Forwarded-Host: front.example", "X-Forwarded-Proto: https"),
		status: 200, by: byBackend,
		seen: all(header("X-Forwarded-For", "1.2.3.4, 127.0.0.1"), header("X-Forwarded-Host", "front.example"), header("X-Forwarded-Proto", "https"))},
	{name: "trusted hop: Connection: X-Forwarded-For drops the hop's", trusted: true,
		raw:    req("GET /x HTTP/1.1", "Host: h", "Connection: X-Forwarded-For", "X-Forwarded-For: 1.2.3.4"),
		status: 200, by: byBackend, seen: header("X-Forwarded-For", "127.0.0.1")},
}

// plainServers are the servers of plain-HTTP clients every client case
// runs against: tailgate serve's choice (-client-server).
var plainServers = []string{PlainH1, PlainNetHTTP}

func TestClientFaults(t *testing.T) {
	for _, plain := range plainServers {
		t.Run(plain, func(t *testing.T) {
			for _, c := range clientCases {
				t.Run(c.name, func(t *testing.T) { runClientCase(t, c, plain) })
			}
		})
	}
}

// servePlain serves g to plain-HTTP clients on a loopback listener with
// the server plain names, until the test ends; it returns the address.
func servePlain(t *testing.T, g *Gateway, plain string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := g.PlainServer(ServerConfig{Plain: plain})
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// runClientCase runs c against a fresh gateway over one backend that
// answers "a" to everything, served by the server plain names.
func runClientCase(t *testing.T, c clientCase, plain string) {
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
	g, err := New(Config{Backends: []string{a.URL}, Timeout: clientTimeout, TrustedHop: c.trusted,
		Policy: hedge.Policy{MaxAttempts: 1}, DisableProbation: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close) // after the server's Close, registered next
	addr := servePlain(t, g, plain)
	backendAddr := strings.TrimPrefix(a.URL, "http://")

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	conn.SetDeadline(start.Add(clientTimeout))
	// A write cut short by the gateway closing (a refused header block)
	// still leaves its answer to read.
	io.WriteString(conn, strings.ReplaceAll(c.raw, "{backend}", backendAddr))
	br := bufio.NewReader(conn)
	method, _, _ := strings.Cut(c.raw, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("no answer within %v: %v", clientTimeout, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	if elapsed := time.Since(start); elapsed >= clientTimeout {
		t.Errorf("answered after %v, want within the timeout %v", elapsed, clientTimeout)
	}
	if resp.StatusCode != c.status {
		t.Errorf("status %d %q, want %d", resp.StatusCode, body, c.status)
	}
	if resp.StatusCode == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("405 with Allow %q, want \"GET, HEAD\"", resp.Header.Get("Allow"))
	}

	if c.closed {
		// Closed: the next read ends (EOF, or a reset where the gateway
		// left bytes unread) rather than waiting or finding an answer to a
		// request it should never have parsed.
		n, err := br.Read(make([]byte, 512))
		var ne net.Error
		switch {
		case n > 0:
			t.Errorf("after the answer, the gateway sent more: a request after it was served")
		case errors.As(err, &ne) && ne.Timeout():
			t.Errorf("connection left open after the answer, want it closed")
		case err != io.EOF && !errors.Is(err, syscall.ECONNRESET):
			t.Errorf("after the answer: %v, want EOF", err)
		}
	}
	seen := a.requests()
	if !c.closed {
		// Kept: it serves the next request.
		io.WriteString(conn, req("GET /next HTTP/1.1", "Host: h"))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("connection not kept for the next request: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("next request on the connection: %d", resp.StatusCode)
		}
	}

	switch c.by {
	case byBackend:
		if len(seen) != 1 {
			t.Fatalf("backend saw %d requests, want 1", len(seen))
		}
		checkForwarded(t, seen[0], backendAddr, c.trusted)
		if c.seen != nil {
			c.seen(t, seen[0])
		}
	case byNetHTTP:
		if n := sumCounter(t, g, "tailgate_requests_total"); n != 0 {
			t.Errorf("the gateway's handler answered %v requests, want net/http to refuse this one itself", n)
		}
	default:
		if n := counterValue(t, g, "tailgate_rejections_total", "reason", c.by); n != 1 {
			t.Errorf("rejections{reason=%q} = %v, want 1", c.by, n)
		}
	}
	if c.by != byBackend && len(seen) != 0 {
		t.Errorf("backend saw %d requests (first %s %q), want none", len(seen), seen[0].Method, seen[0].RequestURI)
	}
	waitIdle(t, g)
}

// checkForwarded checks what every forwarded request must be: sent to the
// backend as its Host, without hop-by-hop headers, with no Tailgate-*
// header the client could have set (from a trusted hop, no tie), and
// with X-Forwarded-For ending in the peer's address.
func checkForwarded(t *testing.T, r *http.Request, backendAddr string, trusted bool) {
	t.Helper()
	if r.Host != backendAddr {
		t.Errorf("backend saw Host %q, want its own address %q", r.Host, backendAddr)
	}
	for k := range r.Header {
		switch {
		case isHop(k, nil):
			t.Errorf("backend saw hop-by-hop header %s", k)
		case k == deadline.Header:
		case k == "Tailgate-Tie" || k == "Tailgate-Tie-Peer":
			t.Errorf("backend saw %s from a client", k)
		case hasPrefixFold(k, "Tailgate-") && !trusted:
			t.Errorf("backend saw %s: %q from a client", k, r.Header[k])
		}
	}
	if xff := r.Header.Get("X-Forwarded-For"); !strings.HasSuffix(xff, "127.0.0.1") {
		t.Errorf("backend saw X-Forwarded-For %q, want the peer's address last", xff)
	}
}

// requests returns the requests the backend has seen so far.
func (b *backend) requests() []*http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*http.Request(nil), b.seen...)
}

// sumCounter sums a counter over all its labels.
func sumCounter(t *testing.T, g *Gateway, name string) float64 {
	t.Helper()
	mfs, err := g.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// waitIdle waits for g's in-flight gauges to return to 0: a request's
// slots are given back as its handler returns, which may be just after
// the client has its answer.
func waitIdle(t *testing.T, g *Gateway) {
	t.Helper()
	deadline := time.Now().Add(clientTimeout)
	for {
		f := g.Debug(time.Now()).InFlight
		if f.Requests == 0 && f.Attempts == 0 && f.Shadows == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("in flight after the case: %d requests, %d attempts, %d shadows; want 0", f.Requests, f.Attempts, f.Shadows)
			return
		}
		time.Sleep(time.Millisecond)
	}
}
