package gateway

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
)

// The backend fault matrix: a replica misbehaving in one way per case, on
// loopback, behind a gateway with a short timeout, alone and next to a
// healthy replica. Each case checks what the client gets and when, how the
// faulty replica's breaker counted it, the attempt failure counted by
// reason, that every limit and in-flight gauge is back to zero, that the
// gateway holds no connection to a replica that would hold it forever,
// and (goleak, in TestMain) that nothing leaked.

// fault is one way a replica misbehaves.
type fault int

const (
	faultNone         fault = iota // 200 "ok", keep-alive: the replica before it is killed
	faultHang                      // reads the request, never answers
	faultAcceptClose               // closes each connection as it is accepted
	faultResetMidBody              // headers and part of the body, then a reset (SO_LINGER 0)
	faultShortBody                 // Content-Length 100, 10 bytes, then a clean close
	faultTrickle                   // headers at once, then the body at 1 byte a second
	faultGarbage                   // bytes that are not HTTP
	faultBadChunked                // a chunk size that is not hex
	faultOversizeBody              // an unannounced (chunked) body twice MaxResponseBytes
	faultHeaders70K                // a 70 KiB header block
	faultHeaders8M                 // an 8 MiB header block
	faultEarlyHints                // a 103, then nothing
	faultSwitch                    // 101 Switching Protocols, then holds the socket
	fault5xx                       // 503, keep-alive
)

// faultyBackend is a replica on a raw loopback listener, so that it can
// write any bytes at all.
type faultyBackend struct {
	URL  string
	ln   net.Listener
	mode fault

	mu     sync.Mutex
	conns  map[net.Conn]bool // open connections: true once one carried a request
	killed bool
	wg     sync.WaitGroup

	requests atomic.Int32 // requests read
}

func newFaultyBackend(t *testing.T, mode fault) *faultyBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &faultyBackend{URL: "http://" + ln.Addr().String(), ln: ln, mode: mode, conns: map[net.Conn]bool{}}
	b.wg.Go(b.accept)
	t.Cleanup(b.kill)
	return b
}

func (b *faultyBackend) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.killed {
			b.mu.Unlock()
			c.Close()
			return
		}
		b.conns[c] = false
		b.wg.Go(func() { b.serve(c) })
		b.mu.Unlock()
	}
}

// kill stops the replica as a crash would: the listener closed and every
// connection reset. It returns once every goroutine of the replica has
// ended.
func (b *faultyBackend) kill() {
	b.mu.Lock()
	b.killed = true
	b.ln.Close()
	for c := range b.conns {
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// held returns how many connections to the replica are open and have
// carried a request: those a lost or timed-out attempt would hold. An
// idle one (the gateway replaces a connection a cancellation closed) is
// not counted.
func (b *faultyBackend) held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, carried := range b.conns {
		if carried {
			n++
		}
	}
	return n
}

func (b *faultyBackend) serve(c net.Conn) {
	defer func() {
		c.Close()
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
	}()
	if b.mode == faultAcceptClose {
		return
	}
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		b.requests.Add(1)
		b.mu.Lock()
		b.conns[c] = true
		b.mu.Unlock()
		switch b.mode {
		case faultNone:
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			continue
		case fault5xx:
			io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy")
			continue
		case faultOversizeBody:
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2000\r\n"+strings.Repeat("x", 2*faultBodyLimit)+"\r\n0\r\n\r\n")
			continue
		case faultHang:
		case faultResetMidBody:
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
			// Let the headers and the first bytes reach the gateway before
			// the reset, which would otherwise discard them unread: the
			// fault is a reset mid-body, not before the answer.
			time.Sleep(20 * time.Millisecond)
			c.(*net.TCPConn).SetLinger(0)
			return
		case faultShortBody:
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
			return
		case faultTrickle:
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
			b.trickle(c, br)
			return
		case faultGarbage:
			io.WriteString(c, "\x16\x03\x01\x00\xff not HTTP at all\r\n\r\n")
			return
		case faultBadChunked:
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
		case faultHeaders70K:
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 70<<10)+"\r\nContent-Length: 2\r\n\r\nok")
			return
		case faultHeaders8M:
			io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			line := "X-Big: " + strings.Repeat("a", 8<<10) + "\r\n"
			for range 1024 { // stops early once the gateway hangs up
				if _, err := io.WriteString(c, line); err != nil {
					return
				}
			}
			io.WriteString(c, "Content-Length: 2\r\n\r\nok")
			return
		case faultEarlyHints:
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
		case faultSwitch:
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: evil\r\n\r\nraw bytes")
		}
		// Hold the socket: the gateway's close (or kill) ends this, or
		// holdMax, so that a regression fails the test instead of hanging it.
		c.SetReadDeadline(time.Now().Add(holdMax))
		io.Copy(io.Discard, br)
		return
	}
}

// trickle writes the body a byte a second until the gateway hangs up.
func (b *faultyBackend) trickle(c net.Conn, br *bufio.Reader) {
	c.SetReadDeadline(time.Now().Add(holdMax))
	gone := make(chan struct{})
	b.wg.Go(func() {
		io.Copy(io.Discard, br) // ends when the gateway closes (or kill)
		close(gone)
	})
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range 100 {
		if _, err := c.Write([]byte{'z'}); err != nil {
			return
		}
		select {
		case <-gone:
			return
		case <-tick.C:
		}
	}
}

// The limits of the gateway under test: short, so that the suite is fast.
const (
	faultTimeout    = time.Second
	faultHedgeDelay = 100 * time.Millisecond
	faultBodyLimit  = 4 << 10
	faultThreshold  = 3 // consecutive failures that open a breaker
	holdMax         = 3 * time.Second
)

// How a fault counts for the faulty replica's breaker.
const (
	countsFailure = "failure" // opens the breaker after faultThreshold
	countsNeutral = "neutral" // cut by the timeout (alone) or cancelled for the hedge's answer
	countsSuccess = "success" // the replica answered (a body over the limit)
)

type faultCase struct {
	name string
	mode fault
	// What the client gets from the faulty replica alone: status, a
	// substring of the body, and whether it comes at the timeout (504)
	// rather than well within it. Next to a healthy replica the client
	// gets that one's 200, well within the timeout, every time.
	status  int
	body    string
	atLimit bool
	counts  string // for the breaker
	reason  string // label of tailgate_attempt_failures_total, alone
	holds   bool   // the replica would hold its connection forever
	killed  bool   // run as load, the replica killed halfway
}

var backendFaults = []faultCase{
	{name: "hang: 504 at the timeout, neutral for the breaker, connection closed",
		mode: faultHang, status: 504, body: "timeout", atLimit: true, counts: countsNeutral, reason: failTimeout, holds: true},
	{name: "accept and close: 502 at once, breaker opens",
		mode: faultAcceptClose, status: 502, body: "all attempts failed", counts: countsFailure, reason: failTransport},
	{name: "reset mid-body: 502 at once, breaker opens",
		mode: faultResetMidBody, status: 502, body: "reset", counts: countsFailure, reason: failTransport},
	{name: "short body against Content-Length: 502 at once, breaker opens",
		mode: faultShortBody, status: 502, body: "unexpected EOF", counts: countsFailure, reason: failTransport},
	{name: "1 B/s trickle: 504 at the timeout, neutral for the breaker, connection closed",
		mode: faultTrickle, status: 504, body: "timeout", atLimit: true, counts: countsNeutral, reason: failTimeout, holds: true},
	{name: "garbage bytes: 502 at once, breaker opens",
		mode: faultGarbage, status: 502, body: "malformed HTTP", counts: countsFailure, reason: failTransport},
	{name: "malformed chunked: 502 at once, breaker opens, connection closed",
		mode: faultBadChunked, status: 502, body: "chunk", counts: countsFailure, reason: failTransport, holds: true},
	{name: "oversize body: 502 at once, a success for the breaker",
		mode: faultOversizeBody, status: 502, body: "larger than 4096 bytes", counts: countsSuccess, reason: failBody},
	{name: "70 KiB headers: 502 at once, breaker opens",
		mode: faultHeaders70K, status: 502, body: "headers exceeded 65536 bytes", counts: countsFailure, reason: failHeaders},
	{name: "8 MiB headers: 502 at once, breaker opens",
		mode: faultHeaders8M, status: 502, body: "headers exceeded 65536 bytes", counts: countsFailure, reason: failHeaders},
	{name: "1xx then nothing: 504 at the timeout, neutral for the breaker, connection closed",
		mode: faultEarlyHints, status: 504, body: "timeout", atLimit: true, counts: countsNeutral, reason: failTimeout, holds: true},
	{name: "101 then hold: 502 at once, breaker opens, connection closed",
		mode: faultSwitch, status: 502, body: "101 Switching Protocols", counts: countsFailure, reason: failUpgrade, holds: true},
	{name: "5xx: 502 at once, breaker opens",
		mode: fault5xx, status: 502, body: "replica answered 503", counts: countsFailure, reason: failStatus},
	{name: "killed mid-load: 502 within the timeout once dead, breaker opens",
		mode: faultNone, status: 502, counts: countsFailure, reason: failTransport, killed: true},
}

func TestBackendFaults(t *testing.T) {
	for _, fc := range backendFaults {
		t.Run(fc.name, func(t *testing.T) {
			t.Run("alone", func(t *testing.T) { runFault(t, fc, false) })
			t.Run("with a good replica", func(t *testing.T) { runFault(t, fc, true) })
		})
	}
}

// faultClient sends requests to the gateway and checks their answers.
type faultClient struct {
	t   *testing.T
	c   *http.Client
	url string
}

// get sends one GET and checks the status (unless 0), the body (a
// substring) and when it came: at the timeout (atLimit), else well within
// it. It returns the status (0 without an answer) and may run on any
// goroutine.
func (fc *faultClient) get(status int, body string, atLimit bool) int {
	fc.t.Helper()
	start := time.Now()
	resp, err := fc.c.Get(fc.url + "/item")
	took := time.Since(start)
	if err != nil {
		fc.t.Errorf("no answer after %v: %v", took, err)
		return 0
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if status != 0 && resp.StatusCode != status || !strings.Contains(string(b), body) {
		fc.t.Errorf("%d %q after %v; want %d with %q", resp.StatusCode, b, took, status, body)
	}
	// The slack is for a busy machine under -race; either bound is far
	// from the 12-40s a held socket used to cost.
	switch {
	case atLimit && (took < faultTimeout-5*time.Millisecond || took > faultTimeout+500*time.Millisecond):
		fc.t.Errorf("answered after %v; want at the %v timeout", took, faultTimeout)
	case !atLimit && took > faultTimeout/2:
		fc.t.Errorf("answered %d after %v; want well within the %v timeout", resp.StatusCode, took, faultTimeout)
	}
	return resp.StatusCode
}

func runFault(t *testing.T, fc faultCase, withGood bool) {
	bad := newFaultyBackend(t, fc.mode)
	backends := []*backend{{URL: bad.URL}}
	if withGood {
		backends = append(backends, newBackend(t, "good", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "good") }))
	}
	g, srv := newGateway(t, Config{
		Policy:           fixedPolicy(faultHedgeDelay),
		Timeout:          faultTimeout,
		MaxResponseBytes: faultBodyLimit,
		DisableProbation: true,
		Replica:          replica.Config{FailureThreshold: faultThreshold, Cooldown: time.Minute},
	}, backends...)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl := &faultClient{t: t, c: &http.Client{Transport: tr, Timeout: 5 * time.Second}, url: srv.URL}
	faulty := func() replica.State { return g.Replicas().Snapshot(time.Now())[0] }
	failures := func() float64 { return counterValue(t, g, "tailgate_attempt_failures_total", "reason", fc.reason) }

	if fc.killed {
		runKilled(t, cl, g, bad, withGood)
		return
	}
	if withGood {
		// The primary goes to either replica: read until the faulty one
		// has had an attempt. Every answer is the good one's.
		for i := 0; faulty().Picks == 0; i++ {
			if i == 20 {
				t.Fatal("the faulty replica got no attempt in 20 requests")
			}
			cl.get(200, "good", false)
		}
		settle(t, g, bad, fc.holds)
		st := faulty()
		t.Logf("faulty replica: %d picks, %d successes, %d failures, %d canceled; %v attempt failures (%s)", st.Picks, st.Successes, st.Failures, st.Canceled, failures(), fc.reason)
		switch fc.counts {
		case countsFailure:
			// A failure, or a hedge that lost to a primary late on a busy
			// machine: never a success.
			if st.Successes != 0 || st.Failures == 0 || st.Failures+st.Canceled != st.Picks {
				t.Errorf("faulty replica's outcomes: %+v; want failures", st)
			}
			if failures() < 1 {
				t.Errorf("no attempt failure counted as %s", fc.reason)
			}
		case countsNeutral:
			if st.Successes != 0 || st.Failures != 0 {
				t.Errorf("faulty replica's outcomes: %+v; want its attempts cancelled for the hedge's answer", st)
			}
		case countsSuccess:
			if st.Failures != 0 {
				t.Errorf("faulty replica's outcomes: %+v; want no failure", st)
			}
		}
		return
	}

	n := 1
	if fc.counts == countsFailure {
		n = faultThreshold
	}
	for range n {
		cl.get(fc.status, fc.body, fc.atLimit)
	}
	settle(t, g, bad, fc.holds)
	st := faulty()
	if got := failures(); got != float64(n) {
		t.Errorf("tailgate_attempt_failures_total{reason=%q} = %v, want %d", fc.reason, got, n)
	}
	switch fc.counts {
	case countsFailure:
		if st.Breaker != replica.Open || st.Failures != faultThreshold {
			t.Fatalf("after %d failures: %+v; want the breaker open", n, st)
		}
		// Open: refused at once, without a call.
		cl.get(502, "circuit breaker", false)
		if after := faulty(); after.Picks != st.Picks {
			t.Errorf("the open breaker let %d attempts through", after.Picks-st.Picks)
		}
	case countsNeutral:
		if st.Breaker != replica.Closed || st.Failures != 0 || st.Canceled != 1 {
			t.Errorf("%+v; want one neutral outcome and the breaker closed", st)
		}
	case countsSuccess:
		if st.Breaker != replica.Closed || st.Failures != 0 || st.Successes != 1 {
			t.Errorf("%+v; want one success and the breaker closed", st)
		}
	}
}

// runKilled loads the gateway from four clients, kills the faulty replica
// (listener and connections) once 40 answers are in, and goes on to 100.
// Alone, every answer is its 200 until the kill and 502 after (in flight
// or refused, then the open breaker); next to a good replica every answer
// is 200. None waits for the timeout.
func runKilled(t *testing.T, cl *faultClient, g *Gateway, bad *faultyBackend, withGood bool) {
	const before, total = 40, 100
	var (
		mu    sync.Mutex
		codes = map[int]int{}
		n     atomic.Int32
		half  = make(chan struct{})
		wg    sync.WaitGroup
	)
	var dead atomic.Bool
	for range 4 {
		wg.Go(func() {
			for {
				i := n.Add(1)
				if i > total {
					return
				}
				wasDead := dead.Load()
				var code int
				switch {
				case withGood:
					code = cl.get(200, "", false)
				case wasDead:
					code = cl.get(502, "", false)
				default:
					code = cl.get(0, "", false) // 200 or, if the kill comes meanwhile, 502: checked below
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
				if i == before {
					close(half)
				}
			}
		})
	}
	<-half
	bad.kill()
	dead.Store(true)
	wg.Wait()
	settle(t, g, bad, false)
	st := g.Replicas().Snapshot(time.Now())[0]
	t.Logf("answers by status %v; killed replica: %d picks, %d successes, %d failures, %d canceled, breaker %v", codes, st.Picks, st.Successes, st.Failures, st.Canceled, st.Breaker)
	if withGood {
		if codes[200] != total {
			t.Errorf("answers by status %v; want all %d 200", codes, total)
		}
		if st.Failures == 0 {
			t.Error("the killed replica's breaker counted no failure")
		}
		return
	}
	if codes[200] < before-3 || codes[200]+codes[502] != total || codes[502] == 0 {
		t.Errorf("answers by status %v; want 200 until the kill, 502 after", codes)
	}
	if st.Breaker != replica.Open {
		t.Errorf("breaker %v after the replica died under load; want open", st.Breaker)
	}
}

// settle waits (bounded) for every request, attempt and shadow to end,
// each replica's in-flight count to reach zero and, if the faulty replica
// would hold its connections forever, for the gateway to have closed them.
func settle(t *testing.T, g *Gateway, bad *faultyBackend, holds bool) {
	t.Helper()
	var d DebugState
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		d = g.Debug(time.Now())
		busy := d.InFlight.Requests + d.InFlight.Attempts + d.InFlight.Shadows
		for _, r := range d.Replicas {
			busy += r.InFlight
		}
		open := 0
		if holds {
			open = bad.held()
		}
		if busy == 0 && open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("2s after the last answer: in flight %+v, replicas %+v, %d connections to the faulty replica open that carried a request", d.InFlight, d.Replicas, open)
		}
	}
}

// heldConn stands for the raw connection net/http hands over as the body
// of a 101: reads block until it is closed.
type heldConn struct {
	once   sync.Once
	closed chan struct{}
}

func (h *heldConn) Read([]byte) (int, error) { <-h.closed; return 0, net.ErrClosed }
func (h *heldConn) Close() error             { h.once.Do(func() { close(h.closed) }); return nil }

// switchingShadows answers as memReplicas, except that once on, shadows
// to c.test get a 101 with a held connection as the body.
type switchingShadows struct {
	*memReplicas
	on    atomic.Bool
	mu    sync.Mutex
	conns []*heldConn
}

func (s *switchingShadows) RoundTrip(r *http.Request) (*http.Response, error) {
	if !s.on.Load() || r.Header.Get(ShadowHeader) == "" || r.URL.Host != "c.test" {
		return s.memReplicas.RoundTrip(r)
	}
	h := &heldConn{closed: make(chan struct{})}
	s.mu.Lock()
	s.conns = append(s.conns, h)
	s.mu.Unlock()
	return &http.Response{StatusCode: http.StatusSwitchingProtocols, Body: h, Request: r,
		Header: http.Header{"Connection": {"Upgrade"}, "Upgrade": {"evil"}}}, nil
}

// A replica on probation that answers its shadows with 101 and holds the
// socket: each shadow fails at once (counted as a failure), its connection
// closed, and no shadow slot is held, although ShadowTimeout is an hour.
// Shadows use the gateway's base directly, not the engine, so they need
// the check of their own (internal/upgrade).
func TestShadowGetting101FailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &switchingShadows{memReplicas: newMemReplicas(map[string]time.Duration{
			"a.test": 5 * time.Millisecond, "b.test": 5 * time.Millisecond, "c.test": 100 * time.Millisecond})}
		g, err := New(Config{Backends: memBackends, Base: m, Policy: hedge.Policy{MaxAttempts: 1}, Replica: quickProbation,
			ShadowTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		untilProbation(t, g, 2, 10*time.Second, onProbation)
		before := gaugeValue(t, g, "tailgate_shadow_requests_total", "outcome", "failure")
		m.on.Store(true)
		traffic(t, g, time.Second) // 10 shadows due at 10/s
		synctest.Wait()
		m.mu.Lock()
		conns := m.conns
		m.mu.Unlock()
		if len(conns) < 5 {
			t.Fatalf("%d shadows answered 101 in 1s at 10/s", len(conns))
		}
		for i, h := range conns {
			select {
			case <-h.closed:
			default:
				t.Errorf("the connection of shadow %d was never closed", i)
			}
		}
		if n := g.Debug(time.Now()).InFlight.Shadows; n != 0 {
			t.Errorf("%d shadow slots held by 101s", n)
		}
		if got := gaugeValue(t, g, "tailgate_shadow_requests_total", "outcome", "failure") - before; got != float64(len(conns)) {
			t.Errorf("%v shadow failures counted for %d 101s", got, len(conns))
		}
	})
}

// Over h2c the header bound holds too, as HTTP/2's header list size: a
// 70 KiB block fails the attempt and the client gets 502. net/http names
// the cause for a block of many fields (counted as headers); one field
// larger than the bound fails the HPACK decoder first, and the whole
// connection with it (COMPRESSION_ERROR, counted as transport).
func TestH2CResponseHeaderBound(t *testing.T) {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/one-field":
			w.Header().Set("X-Big", strings.Repeat("a", 70<<10))
		case "/many-fields":
			for i := range 35 {
				w.Header().Set("X-Big-"+strconv.Itoa(i), strings.Repeat("a", 2<<10))
			}
		}
		io.WriteString(w, "ok")
	}))
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the GOAWAY of the connection torn down
	s.Start()
	defer s.Close()
	g, err := New(Config{Backends: []string{s.URL}, BackendProtocol: ProtocolH2C, Policy: hedge.Policy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if w := serveIn(g, http.MethodGet, "/small", nil); w.Code != 200 {
		t.Fatalf("small headers: %d %q", w.Code, w.Body)
	}
	for _, c := range []struct{ path, reason string }{{"/many-fields", failHeaders}, {"/one-field", failTransport}} {
		before := counterValue(t, g, "tailgate_attempt_failures_total", "reason", c.reason)
		w := serveIn(g, http.MethodGet, c.path, nil)
		if w.Code != 502 || w.Header().Get("X-Big") != "" || w.Header().Get("X-Big-0") != "" {
			t.Errorf("%s, 70 KiB of headers over h2c: %d %q; want 502", c.path, w.Code, w.Body)
		}
		if n := counterValue(t, g, "tailgate_attempt_failures_total", "reason", c.reason) - before; n != 1 {
			t.Errorf("%s: attempt failures counted as %s: %v, want 1 (%s)", c.path, c.reason, n, w.Body)
		}
	}
}
