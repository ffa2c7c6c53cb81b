package h1server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestKeepAliveAndFraming(t *testing.T) {
	addr := serve(t, &Server{}, hello)
	c, br := dial(t, addr)
	for _, path := range []string{"/a", "/b"} {
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: h\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		if resp.StatusCode != 200 || body != "hello "+path || resp.ContentLength != int64(len(body)) || resp.Close {
			t.Fatalf("%s: %d %q length %d close %v, want 200, a Content-Length, kept", path, resp.StatusCode, body, resp.ContentLength, resp.Close)
		}
		if resp.Header.Get("Date") == "" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("Date %q, Content-Type %q: want a date and the sniffed type", resp.Header.Get("Date"), resp.Header.Get("Content-Type"))
		}
	}
}

func TestPipelinedAnsweredInOrder(t *testing.T) {
	addr := serve(t, &Server{}, hello)
	c, br := dial(t, addr)
	// The last is malformed: refused after the answers to those before it.
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nHEAD /2 HTTP/1.1\r\nHost: h\r\n\r\nGET /3 HTTP/1.1\r\nHost: h\r\n\r\nGET /4 HTTP/1.1\r\n\r\n")
	for _, want := range []struct {
		method, body string
		code         int
	}{{"GET", "hello /1", 200}, {"HEAD", "", 200}, {"GET", "hello /3", 200}, {"GET", "400 Bad Request: missing required Host header", 400}} {
		resp, body := readResponse(t, br, want.method)
		if resp.StatusCode != want.code || body != want.body || resp.ContentLength != int64(len("hello /2")) && want.method == "HEAD" {
			t.Errorf("%s: %d %q (length %d), want %d %q", want.method, resp.StatusCode, body, resp.ContentLength, want.code, want.body)
		}
	}
}

// A byte of the next request read by the background watch (the handler
// ran past WatchAfter while the client pipelined) is not lost.
func TestWatchKeepsTheNextRequestsByte(t *testing.T) {
	addr := serve(t, &Server{WatchAfter: time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(30 * time.Millisecond)
		io.WriteString(w, r.URL.Path)
	}))
	c, br := dial(t, addr)
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n")
	time.Sleep(10 * time.Millisecond) // the watch reads
	io.WriteString(c, "GET /2 HTTP/1.1\r\nHost: h\r\n\r\n")
	for _, want := range []string{"/1", "/2"} {
		if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != want {
			t.Fatalf("%d %q, want %q", resp.StatusCode, body, want)
		}
	}
}

func TestConnectionClose(t *testing.T) {
	addr := serve(t, &Server{}, hello)
	for _, c := range []struct {
		name, req string
		close     bool
		conn      string // the answer's Connection header
	}{
		{"1.1 close", "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", true, ""}, // ReadResponse takes "close" out, into Close
		{"1.0", "GET / HTTP/1.0\r\n\r\n", true, ""},
		{"1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", false, "keep-alive"},
		{"1.1", "GET / HTTP/1.1\r\nHost: h\r\n\r\n", false, ""},
	} {
		conn, br := dial(t, addr)
		io.WriteString(conn, c.req)
		resp, _ := readResponse(t, br, "GET")
		if got := resp.Header.Get("Connection"); got != c.conn || resp.Close != c.close {
			t.Errorf("%s: Connection %q (close %v), want %q (%v)", c.name, got, resp.Close, c.conn, c.close)
		}
		conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := br.ReadByte()
		var ne net.Error
		if closed := err == io.EOF; closed != c.close || !closed && !(errors.As(err, &ne) && ne.Timeout()) {
			t.Errorf("%s: after the answer %v, want closed %v", c.name, err, c.close)
		}
	}
}

func TestChunkedAndFlush(t *testing.T) {
	big := strings.Repeat("x", 3*bufferBeforeChunking)
	flushed := make(chan struct{})
	addr := serve(t, &Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			io.WriteString(w, big)
			return
		}
		io.WriteString(w, "first")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Error(err)
		}
		<-flushed
		io.WriteString(w, " second")
	}))
	c, br := dial(t, addr)
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
	resp, body := readResponse(t, br, "GET")
	if body != big || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("big body: %d bytes, Transfer-Encoding %q, want chunked", len(body), resp.TransferEncoding)
	}
	io.WriteString(c, "GET /flush HTTP/1.1\r\nHost: h\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first" {
		t.Fatalf("before the handler returned: %q %v, want the flushed %q", first, err, "first")
	}
	close(flushed)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != " second" {
		t.Errorf("rest %q", rest)
	}
}

func TestRefusedBeforeTheHandler(t *testing.T) {
	ran := false
	addr := serve(t, &Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true }))
	for _, c := range []struct {
		req  string
		code int
	}{
		{"GET / HTTP/1.1\r\n\r\n", 400},                                                                        // no Host
		{"GET / HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n", 400},                                                  // two
		{"GET / HTTP/1.1\r\nHost: h\r\nX-A : 1\r\n\r\n", 400},                                                  // space before the colon
		{"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501},                                  // unknown coding
		{"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501}, // two lines, as net/http
		{"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},                                          // RFC 9112 §6.1 (net/http drops the field)
		{"GET / HTTP/1.1\r\nHost:\r\n\r\n", 400},                                                               // empty (net/http serves it)
		{"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
		{"GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505},
		{"GET / HTTP/1.1\r\nHost: h\r\nExpect: teapot\r\n\r\n", 417}, // the handler does not run for it either
	} {
		conn, br := dial(t, addr)
		io.WriteString(conn, c.req)
		resp, body := readResponse(t, br, "GET")
		if resp.StatusCode != c.code || !resp.Close {
			t.Errorf("%q: %d %q close %v, want %d and close", c.req, resp.StatusCode, body, resp.Close, c.code)
		}
	}
	if ran {
		t.Error("the handler ran")
	}
}

func TestTimeouts(t *testing.T) {
	const d = 100 * time.Millisecond
	addr := serve(t, &Server{ReadHeaderTimeout: d, IdleTimeout: 2 * d}, hello)
	for _, c := range []struct {
		name  string
		write string
		want  time.Duration // closed after about
	}{
		{"nothing sent", "", d},
		{"a header never ended (slowloris)", "GET / HTTP/1.1\r\nHost: h\r\n", d},
		{"idle after an answer", "GET / HTTP/1.1\r\nHost: h\r\n\r\n", 2 * d},
	} {
		// From before the dial: the server's clock starts as it accepts,
		// which may come before the dial returns (it did, by 0.12ms, on a
		// busy machine).
		start := time.Now()
		conn, br := dial(t, addr)
		io.WriteString(conn, c.write)
		if strings.HasSuffix(c.write, "\r\n\r\n") {
			readResponse(t, br, "GET")
		}
		_, err := io.ReadAll(br)
		if took := time.Since(start); err != nil || took < c.want || took > c.want+time.Second {
			t.Errorf("%s: closed after %v (%v), want about %v", c.name, took, err, c.want)
		}
	}
}

// A keep-alive connection's next request whose header is begun and never
// ended is bound by the header's limit from its first byte, not by the
// idle one (h1server moves the deadline only for a header block that is
// not whole in its buffer: see headerBuffered).
func TestNextHeaderBoundByHeaderTimeout(t *testing.T) {
	const d = 100 * time.Millisecond
	addr := serve(t, &Server{ReadHeaderTimeout: d, IdleTimeout: 20 * time.Second}, hello)
	conn, br := dial(t, addr)
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	readResponse(t, br, "GET")
	start := time.Now()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: h\r\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.ReadAll(br)
	if took := time.Since(start); err != nil || took < d || took > d+time.Second {
		t.Errorf("closed after %v (%v), want about %v", took, err, d)
	}
}

func TestWriteDeadlineMovable(t *testing.T) {
	addr := serve(t, &Server{WriteTimeout: 50 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Error(err)
		}
		time.Sleep(100 * time.Millisecond)
		io.WriteString(w, "late")
	}))
	_, br := dial(t, addr)
	c, _ := net.Dial("tcp", addr)
	defer c.Close()
	br.Reset(c)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != "late" {
		t.Errorf("%d %q: want the answer written after the extended deadline", resp.StatusCode, body)
	}
}

func TestClientGoneCancelsContext(t *testing.T) {
	for _, after := range []time.Duration{-1, time.Millisecond, DefaultWatchAfter} {
		cancelled := make(chan error, 1)
		started := make(chan struct{})
		addr := serve(t, &Server{WatchAfter: after}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(started)
			select {
			case <-r.Context().Done():
				cancelled <- r.Context().Err()
			case <-time.After(5 * time.Second):
				cancelled <- nil
			}
		}))
		c, _ := dial(t, addr)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		<-started
		c.Close()
		if err := <-cancelled; !errors.Is(err, context.Canceled) {
			t.Errorf("WatchAfter %v: the client left, the context: %v, want cancelled", after, err)
		}
	}
}

func TestShutdownDrains(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	s := &Server{}
	addr := serve(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		io.WriteString(w, "done")
	}))
	idle, ibr := dial(t, addr)
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	readResponse(t, ibr, "GET")
	busy, bbr := dial(t, addr)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
	<-entered
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if _, err := io.ReadAll(ibr); err != nil {
		t.Errorf("idle connection: %v, want closed by Shutdown", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	resp, body := readResponse(t, bbr, "GET")
	if body != "done" || !resp.Close {
		t.Errorf("in flight: %q close %v, want answered with Connection: close", body, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("still accepting after Shutdown")
	}
}

func TestPanics(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	s := &Server{ErrorLog: log.New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), "", 0)}
	addr := serve(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		panic("boom")
	}))
	for _, path := range []string{"/abort", "/boom"} {
		c, br := dial(t, addr)
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: h\r\n\r\n")
		if b, err := io.ReadAll(br); len(b) > 0 || err != nil {
			t.Errorf("%s: %q %v, want the connection closed without an answer", path, b, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := logged.String(); strings.Count(got, "panic serving") != 1 || !strings.Contains(got, "boom") {
		t.Errorf("logged %q, want the one panic that is not ErrAbortHandler", got)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestRequestBodies(t *testing.T) {
	addr := serve(t, &Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/read" {
			b, _ := io.ReadAll(r.Body)
			w.Write(b)
			return
		}
		io.WriteString(w, "unread") // the body is left: discarded to keep the connection
	}))
	c, br := dial(t, addr)
	io.WriteString(c, "POST /skip HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n")
	if _, body := readResponse(t, br, "POST"); body != "unread" {
		t.Fatalf("%q", body)
	}
	io.WriteString(c, "POST /read HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 100 {
		t.Fatalf("%v %v, want 100 Continue before the body is sent", resp, err)
	}
	io.WriteString(c, "data")
	if resp, body := readResponse(t, br, "POST"); resp.StatusCode != 200 || body != "data" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	// A smuggling attempt: bad chunking is the handler's read error, and
	// what follows it is never served.
	io.WriteString(c, "POST /read HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n")
	resp, body := readResponse(t, br, "POST")
	if !resp.Close || strings.Contains(body, "smuggled") {
		t.Errorf("bad chunking: %q close %v, want the connection closed", body, resp.Close)
	}
	if rest, _ := io.ReadAll(br); len(rest) > 0 {
		t.Errorf("after bad chunking the server sent %q", rest)
	}
}

func TestConnStates(t *testing.T) {
	var mu sync.Mutex
	var states []http.ConnState
	closed := make(chan struct{})
	s := &Server{ConnState: func(_ net.Conn, st http.ConnState) {
		mu.Lock()
		states = append(states, st)
		mu.Unlock()
		if st == http.StateClosed {
			close(closed)
		}
	}}
	addr := serve(t, s, hello)
	c, br := dial(t, addr)
	for range 2 {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		readResponse(t, br, "GET")
	}
	c.Close()
	<-closed
	mu.Lock()
	defer mu.Unlock()
	want := []http.ConnState{http.StateNew, http.StateActive, http.StateIdle, http.StateActive, http.StateIdle, http.StateClosed}
	if len(states) != len(want) {
		t.Fatalf("states %v, want %v", states, want)
	}
	for i := range want {
		if states[i] != want[i] {
			t.Fatalf("states %v, want %v", states, want)
		}
	}
}

// SetKeepAlivesEnabled(false) closes an idle connection at once, and a
// busy one after its answer, which says so.
func TestKeepAlivesDisabled(t *testing.T) {
	s := &Server{}
	addr := serve(t, s, hello)
	idle, ibr := dial(t, addr)
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	readResponse(t, ibr, "GET")
	s.SetKeepAlivesEnabled(false)
	if b, err := io.ReadAll(ibr); len(b) > 0 || err != nil {
		t.Errorf("idle connection: %q %v, want closed", b, err)
	}
	c, br := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	if resp, _ := readResponse(t, br, "GET"); !resp.Close {
		t.Error("an answer after keep-alives were turned off does not say Connection: close")
	}
	if b, err := io.ReadAll(br); len(b) > 0 || err != nil {
		t.Errorf("after the answer: %q %v, want closed", b, err)
	}
}

// A connection reported idle has sent every answer: a ConnState hook may
// close it then (internal/connlimit closes an idle one to make room),
// and no answer to a request served is lost. Pipelined requests do not
// make it idle in between.
func TestIdleOnlyOnceAnswered(t *testing.T) {
	s := &Server{ConnState: func(nc net.Conn, st http.ConnState) {
		if st == http.StateIdle {
			nc.Close()
		}
	}}
	addr := serve(t, s, hello)
	c, br := dial(t, addr)
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n")
	for _, want := range []string{"hello /1", "hello /2"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("reading the answer %q: %v", want, err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != want {
			t.Fatalf("%q, want %q", b, want)
		}
	}
}

// Close ends the requests in flight as their clients' leaving would: their
// contexts are cancelled, a request with a body (not watched) too, so
// that Close, which waits for the handlers, returns at once and not when
// they time out on their own (the gateway calls Close when a drain's
// Shutdown runs out of time).
func TestCloseCancelsRequests(t *testing.T) {
	entered := make(chan struct{})
	s := &Server{}
	addr := serve(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		close(entered)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	c, _ := dial(t, addr)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody")
	<-entered
	start := time.Now()
	s.Close()
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v with a request in flight, want its context cancelled at once", took)
	}
}

// An answer held to leave with the next pipelined request's leaves before
// the server waits for the rest of that request: a client that sent part
// of it (a split segment, a body it sends later) gets the answer at once,
// as from net/http, and not once the next request is whole.
func TestAnswerNotHeldForAPartialNextRequest(t *testing.T) {
	addr := serve(t, &Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, r.URL.Path)
	}))
	for _, next := range []string{
		"GET /next HTTP/1.1\r\nHost: h\r\n",                           // a header not ended
		"POST /next HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\n", // a body not sent
	} {
		c, br := dial(t, addr)
		c.SetReadDeadline(time.Now().Add(time.Second))
		io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n"+next)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Errorf("the answer to /1 while the next request is partial (%q): %v", next, err)
			continue
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "/1" {
			t.Errorf("%q, want /1", b)
		}
	}
}

// A request body read after its handler returned (a Transport may read
// it from its own goroutine after RoundTrip returns) reads nothing, as
// net/http's http.ErrBodyReadAfterClose: not the next request's body on
// the same connection, nor another connection's once the buffers went
// back to the pool.
func TestBodyReadAfterHandler(t *testing.T) {
	stashed := make(chan io.Reader, 1)
	second := make(chan struct{})
	release := make(chan struct{})
	addr := serve(t, &Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/1" {
			stashed <- r.Body
			return
		}
		close(second)
		<-release
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	c, br := dial(t, addr)
	io.WriteString(c, "POST /1 HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody")
	readResponse(t, br, "POST")
	io.WriteString(c, "POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello")
	<-second
	old := <-stashed
	n, err := old.Read(make([]byte, 16))
	close(release)
	if n > 0 || err == nil {
		t.Errorf("a body read after its handler: %d bytes, %v; want none and an error", n, err)
	}
	if _, body := readResponse(t, br, "POST"); body != "hello" {
		t.Errorf("the next request's body: %q, want hello", body)
	}
}

// Like takes the limits of a net/http server built elsewhere, and serves
// the handler given: an over-long header is refused at Like's limit.
func TestLikeTakesTheServersLimits(t *testing.T) {
	hs := &http.Server{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second,
		IdleTimeout: 4 * time.Second, MaxHeaderBytes: 1 << 10, Handler: http.NotFoundHandler()}
	s := Like(hs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "mine") }))
	if s.ReadHeaderTimeout != time.Second || s.ReadTimeout != 2*time.Second || s.WriteTimeout != 3*time.Second ||
		s.IdleTimeout != 4*time.Second || s.MaxHeaderBytes != 1<<10 {
		t.Errorf("settings %+v", s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	defer func() { s.Close(); <-done }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "mine" {
		t.Errorf("served %q, want the handler given", b)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("x", 8<<10))
	resp, err = http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("an 8 KiB header over a 1 KiB limit: %d", resp.StatusCode)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
