package hedge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/internal/memnet"
)

// backend is an in-memory replica: it answers after lat with body, records
// the hedge header of every request, and counts work that finished.
type backend struct {
	lat      time.Duration
	status   int
	body     string
	ignore   bool // keep working after the client cancels
	mu       sync.Mutex
	headers  []string
	marks    []string // X-Attempt, as testHooks.Rewrite writes it
	paths    []string
	hosts    []string
	finished atomic.Int32
}

func (r *backend) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.headers = append(r.headers, req.Header.Get(HedgeHeader))
	r.marks = append(r.marks, req.Header.Get("X-Attempt"))
	r.paths = append(r.paths, req.URL.RawPath+"|"+req.URL.Path+"?"+req.URL.RawQuery)
	r.hosts = append(r.hosts, req.Host)
	r.mu.Unlock()
	if r.ignore {
		time.Sleep(r.lat)
	} else if !memnet.Sleep(req.Context(), r.lat) {
		return
	}
	r.finished.Add(1)
	if r.status != 0 {
		w.WriteHeader(r.status)
	}
	io.WriteString(w, r.body)
}

func (r *backend) attempts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.marks...)
}

func (r *backend) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.headers...)
}

func newMemTransport(t *testing.T, p Policy, cfg TransportConfig, replicas map[string]*backend) (*Transport, *collector) {
	t.Helper()
	net := &memnet.Transport{}
	for host, r := range replicas {
		net.Handle(host, r)
	}
	var c collector
	p.Observer = &c
	cfg.Base = net
	cfg.Policy = p
	cfg.OnReceipt = func(_ *http.Request, r Receipt) { c.receipt(r) }
	tr, err := NewTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr, &c
}

// inOrder steers attempt i to target i (the primary to the first): tests
// that need to know which replica an attempt goes to use it in place of
// the Transport's latency-aware steering.
type inOrder struct{}

func (inOrder) Pick(a Attempt, _ []int) (int, error) { return a.Index, nil }
func (inOrder) Done(Attempt, Result)                 {}

// ordered is a Transport whose requests are steered inOrder.
type ordered struct{ *Transport }

func (o ordered) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.RoundTripWith(req, nil, inOrder{})
	if resp != nil {
		return resp, nil
	}
	return nil, err
}

// get sends a GET to url through rt; a *Transport steers it inOrder.
func get(t *testing.T, rt http.RoundTripper, url string) (int, string, error) {
	t.Helper()
	if tr, ok := rt.(*Transport); ok && tr.Replicas() != nil {
		rt = ordered{tr}
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestTransportHedgesToDifferentTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: 80 * time.Millisecond, body: "a"}
		b := &backend{lat: 5 * time.Millisecond, body: "b"}
		tr, c := newMemTransport(t, Policy{Delay: 10 * time.Millisecond}, TransportConfig{Targets: []string{"http://a", "http://b/"}},
			map[string]*backend{"a": a, "b": b})
		start := time.Now()
		code, body, err := get(t, tr, "http://placeholder/x?q=1")
		if err != nil || code != 200 || body != "b" {
			t.Fatalf("got %d %q %v", code, body, err)
		}
		if d := time.Since(start); d != 15*time.Millisecond {
			t.Errorf("latency %v, want 15ms", d)
		}
		synctest.Wait()
		if got := a.seen(); len(got) != 1 || got[0] != "" {
			t.Errorf("primary saw hedge headers %q, want one unmarked request", got)
		}
		if got := b.seen(); len(got) != 1 || got[0] != "1" {
			t.Errorf("alternate saw hedge headers %q, want [1]", got)
		}
		if a.finished.Load() != 0 {
			t.Error("cancelled primary finished its work")
		}
		if b.hosts[0] != "b" || b.paths[0] != "|/x?q=1" {
			t.Errorf("alternate got host %q path %q", b.hosts[0], b.paths[0])
		}
		r := c.last(t)
		checkInvariant(t, r)
		if r.WinnerTargetName != "http://b" || r.CancellationsObserved != 1 {
			t.Errorf("receipt %+v", r)
		}
	})
}

func TestTransportFast500LosesToSlow200(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: time.Millisecond, status: 500, body: "oops"}
		b := &backend{lat: 30 * time.Millisecond, body: "ok"}
		tr, c := newMemTransport(t, Policy{Delay: 50 * time.Millisecond}, TransportConfig{Targets: []string{"http://a", "http://b"}},
			map[string]*backend{"a": a, "b": b})
		code, body, err := get(t, tr, "http://x/")
		if err != nil || code != 200 || body != "ok" {
			t.Fatalf("got %d %q %v", code, body, err)
		}
		synctest.Wait()
		r := c.last(t)
		if r.Attempts[0].Fate != FateRejected || r.Attempts[0].Error != "hedge: status 500" || r.Attempts[1].Trigger != TriggerFailure {
			t.Errorf("receipt %+v", r)
		}
	})
}

func TestTransportAllFailReturnsLastResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: time.Millisecond, status: 503, body: "busy a"}
		b := &backend{lat: 2 * time.Millisecond, status: 502, body: "busy b"}
		tr, _ := newMemTransport(t, Policy{Delay: 50 * time.Millisecond}, TransportConfig{Targets: []string{"http://a", "http://b"}},
			map[string]*backend{"a": a, "b": b})
		code, body, err := get(t, tr, "http://x/")
		if err != nil || code != 502 || body != "busy b" {
			t.Fatalf("got %d %q %v; want the last answer, 502", code, body, err)
		}
		// Unreachable targets give an error.
		tr2, _ := newMemTransport(t, Policy{Delay: 50 * time.Millisecond}, TransportConfig{Targets: []string{"http://nowhere", "http://void"}}, nil)
		if _, _, err := get(t, tr2, "http://x/"); err == nil || !strings.Contains(err.Error(), "no host") {
			t.Errorf("err %v", err)
		}
		synctest.Wait()
	})
}

func TestTransportCustomAccept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: time.Millisecond, body: `{"value":""}`}
		b := &backend{lat: 3 * time.Millisecond, body: `{"value":"x"}`}
		tr, _ := newMemTransport(t, Policy{Delay: 50 * time.Millisecond}, TransportConfig{
			Targets: []string{"http://a", "http://b"},
			Accept: func(r *http.Response) error {
				b, _ := io.ReadAll(r.Body)
				if !strings.Contains(string(b), `"x"`) {
					return errors.New("empty value")
				}
				return nil
			},
		}, map[string]*backend{"a": a, "b": b})
		code, body, err := get(t, tr, "http://x/")
		if err != nil || code != 200 || body != "" {
			// Accept consumed the body: that is the caller's choice.
			t.Fatalf("got %d %q %v", code, body, err)
		}
		synctest.Wait()
	})
}

func TestTransportSingleURLMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		lb := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The first request straggles, the second is quick.
			if n.Add(1) == 1 {
				memnet.Sleep(r.Context(), time.Second)
				return
			}
			io.WriteString(w, r.Header.Get(HedgeHeader))
		})
		net := &memnet.Transport{}
		net.Handle("lb", lb)
		tr, err := NewTransport(TransportConfig{Base: net, Policy: Policy{Delay: 5 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		code, body, err := get(t, tr, "http://lb/")
		if err != nil || code != 200 || body != "1" {
			t.Fatalf("got %d %q %v", code, body, err)
		}
		synctest.Wait()
	})
}

func TestTransportPassThroughAndSafeMethods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bodies []string
		var mu sync.Mutex
		slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, r.Method+":"+string(b)+":"+r.Header.Get(HedgeHeader))
			mu.Unlock()
			if r.Header.Get(HedgeHeader) == "" {
				memnet.Sleep(r.Context(), 50*time.Millisecond)
			}
			io.WriteString(w, "done")
		})
		net := &memnet.Transport{}
		net.Handle("a", slow)
		net.Handle("b", slow)
		tr, err := NewTransport(TransportConfig{Base: net, Policy: Policy{Delay: 5 * time.Millisecond}, Targets: []string{"http://a", "http://b"}, SafeMethods: []string{"SEARCH"}})
		if err != nil {
			t.Fatal(err)
		}
		do := func(method string, withGetBody bool) {
			t.Helper()
			req, _ := http.NewRequest(method, "http://x/", strings.NewReader("q"))
			if !withGetBody {
				req.GetBody = nil
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			synctest.Wait()
		}
		do(http.MethodPost, true) // not safe: one attempt even though slow
		do("SEARCH", false)       // declared safe, but no GetBody: one attempt
		do("SEARCH", true)        // replayed through GetBody to the alternate
		want := "[POST:q: SEARCH:q: SEARCH:q: SEARCH:q:1]"
		if got := fmt.Sprint(bodies); got != want {
			t.Errorf("server saw %s, want %s", got, want)
		}
	})
}

func TestTransportParentCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: time.Second}
		tr, c := newMemTransport(t, Policy{Delay: 5 * time.Millisecond}, TransportConfig{Targets: []string{"http://a", "http://b"}},
			map[string]*backend{"a": a, "b": a})
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/", nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
		synctest.Wait()
		if r := c.last(t); r.Outcome != OutcomeCanceled || r.CancellationsObserved != 2 {
			t.Errorf("receipt %+v", r)
		}
	})
}

func TestWithReceiptContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: time.Millisecond, body: "a"}
		tr, _ := newMemTransport(t, Policy{}, TransportConfig{Targets: []string{"http://a"}}, map[string]*backend{"a": a})
		var got atomic.Pointer[Receipt]
		ctx := WithReceipt(t.Context(), func(r Receipt) { got.Store(&r) })
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		synctest.Wait()
		if r := got.Load(); r == nil || r.WinnerTargetName != "http://a" {
			t.Errorf("receipt %+v", r)
		}
	})
}

func TestNewTransportRejects(t *testing.T) {
	bad := []TransportConfig{
		{Targets: []string{"ftp://a"}},
		{Targets: []string{"http://"}},
		{Targets: []string{"http://a?x=1"}},
		{Targets: []string{"http://a#f"}},
		{Targets: []string{"http://u:p@a"}},
		{Targets: []string{"http://a", "http://a/"}},
		{Targets: []string{"http://a b"}},
		{Targets: []string{"::"}},
		{MaxBodyBytes: -1},
		{SafeMethods: []string{"post"}},
		{SafeMethods: []string{"CONNECT"}},
	}
	for _, cfg := range bad {
		if _, err := NewTransport(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewTransport(%+v): err %v", cfg, err)
		}
	}
	tr, err := NewTransport(TransportConfig{})
	if err != nil || tr.Classes() == nil || tr.Replicas() != nil {
		t.Fatalf("zero config: %v", err)
	}
}

// A target's user information never reaches an error: neither whole, as
// url.Parse quotes it, nor in part; and the target is named once.
func TestParseTargetErrorsHideUserInfo(t *testing.T) {
	for _, s := range []string{
		"http://user:s3cret@127.0.0.1:8081",
		"http://user:s3cret@127.0.0.1:port", // does not parse
		"http://user:s3cret%zz@127.0.0.1",   // a bad escape in the password
		"http://s3cret@127.0.0.1",           // a token as the user name
		"user:s3cret@127.0.0.1:8081",        // the scheme forgotten
	} {
		_, err := parseTarget(s)
		if err == nil {
			t.Fatalf("%q accepted", s)
		}
		if msg := err.Error(); strings.Contains(msg, "s3cret") || strings.Count(msg, "127.0.0.1") != 1 || !strings.Contains(msg, "xxxxx@") {
			t.Errorf("%q: error %q; want the target once, its user information as xxxxx", s, msg)
		}
	}
}

func TestRewriteURL(t *testing.T) {
	cases := []struct{ target, req, want string }{
		{"http://b:81", "http://x/a%2Fb?q=1", "http://b:81/a%2Fb?q=1"},
		{"https://b/api/", "http://x/v1/items", "https://b/api/v1/items"},
		{"http://b/api", "http://x/a%2Fb", "http://b/api/a%2Fb"},
		{"http://b/p%2Fq", "http://x/r", "http://b/p%2Fq/r"},
	}
	for _, c := range cases {
		tu, err := parseTarget(c.target)
		if err != nil {
			t.Fatal(err)
		}
		ru, _ := http.NewRequest("GET", c.req, nil)
		var u = *ru.URL
		rewriteURL(&u, ru.URL, tu)
		if got := u.String(); got != c.want {
			t.Errorf("rewrite(%s, %s) = %s, want %s", c.target, c.req, got, c.want)
		}
	}
}

func TestBufferedBody(t *testing.T) {
	resp := &http.Response{Body: io.NopCloser(strings.NewReader("hello")), ContentLength: -1}
	var b bufferedBody
	if err := b.fill(resp, 5); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if n, err := io.Copy(&sb, &b); err != nil || n != 5 || sb.String() != "hello" {
		t.Errorf("copy %d %q %v", n, sb.String(), err)
	}
	if n, err := b.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("read past end: %d %v", n, err)
	}
	b.Close()
	b.Close()
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, errBodyClosed) {
		t.Errorf("read after close: %v", err)
	}
	if _, err := b.WriteTo(io.Discard); !errors.Is(err, errBodyClosed) {
		t.Errorf("WriteTo after close: %v", err)
	}
	over := &http.Response{Body: io.NopCloser(strings.NewReader("hello!")), ContentLength: -1}
	if err := b.fill(over, 5); !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("6 bytes with limit 5: %v", err)
	}
	announced := &http.Response{Body: io.NopCloser(strings.NewReader("")), ContentLength: 6}
	if err := b.fill(announced, 5); !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("announced 6 with limit 5: %v", err)
	}
	broken := &http.Response{Body: io.NopCloser(io.MultiReader(strings.NewReader("he"), errReader{})), ContentLength: -1}
	if err := b.fill(broken, 5); err == nil || !strings.Contains(err.Error(), "reset") {
		t.Errorf("broken body: %v", err)
	}
	big := strings.Repeat("x", 300<<10)
	if err := b.fill(&http.Response{Body: io.NopCloser(strings.NewReader(big)), ContentLength: int64(len(big))}, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(&b); len(got) != len(big) {
		t.Errorf("read %d bytes", len(got))
	}
	b.Close()
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// --- loopback tests against real servers ---

func TestLoopbackLoserCancellationObserved(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			select { // never block: a hedge wrongly sent here must fail the test, not hang it
			case cancelled <- struct{}{}:
			default:
			}
		case <-time.After(5 * time.Second):
			io.WriteString(w, "slow")
		}
	}))
	defer slow.Close()
	var hedgeHeader atomic.Value
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hedgeHeader.Store(r.Header.Get(HedgeHeader))
		io.WriteString(w, "fast")
	}))
	defer fast.Close()
	var got atomic.Pointer[Receipt]
	client, err := NewClient(TransportConfig{
		Policy:    Policy{Delay: 20 * time.Millisecond},
		Targets:   []string{slow.URL, fast.URL},
		OnReceipt: func(_ *http.Request, r Receipt) { got.Store(&r) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	// The slow replica first: the primary goes there, the hedge elsewhere.
	client.Transport = ordered{client.Transport.(*Transport)}
	resp, err := client.Get("http://replicas/item")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "fast" || hedgeHeader.Load() != "1" {
		t.Fatalf("body %q, hedge header %v", b, hedgeHeader.Load())
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the slow server never saw the loser's cancellation")
	}
	deadline := time.Now().Add(5 * time.Second)
	for got.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	r := got.Load()
	if r == nil {
		t.Fatal("no receipt")
	}
	checkInvariant(t, *r)
	if r.WinnerAttempt != 1 || r.CancellationsRequested != 1 || r.CancellationsObserved != 1 {
		t.Errorf("receipt %+v", r)
	}
}

func TestLoopbackBodyLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			w.Write([]byte(strings.Repeat("y", 40<<10)))
			w.(http.Flusher).Flush()
			w.Write([]byte(strings.Repeat("y", 40<<10)))
			return
		}
		io.WriteString(w, strings.Repeat("x", 100<<10))
	}))
	defer srv.Close()
	client, err := NewClient(TransportConfig{Targets: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	for _, path := range []string{"/sized", "/chunked"} {
		_, err = client.Get("http://x" + path)
		if !errors.Is(err, ErrResponseTooLarge) {
			t.Errorf("%s: err %v, want ErrResponseTooLarge", path, err)
		}
	}
}

func TestLoopbackRedirectRefused(t *testing.T) {
	var followed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Store(true)
		}
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	client, err := NewClient(TransportConfig{Targets: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	_, err = client.Get("http://x/start")
	if !errors.Is(err, ErrRedirectRefused) || followed.Load() {
		t.Errorf("err %v followed %v", err, followed.Load())
	}
}

func TestLoopbackHEAD(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10000000") // the GET would be 10 MB
		w.WriteHeader(200)
	}))
	defer srv.Close()
	client, err := NewClient(TransportConfig{Targets: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	resp, err := client.Head("http://x/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != 10000000 {
		t.Errorf("HEAD: %d, length %d", resp.StatusCode, resp.ContentLength)
	}
}

func TestNewClientOptions(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	base := NewBaseTransport()
	c, err := NewClient(TransportConfig{Base: base, Targets: []string{srv.URL}, Policy: Policy{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer base.CloseIdleConnections()
	tr := c.Transport.(*Transport)
	if got := tr.Classes().Policy().Timeout; got != time.Second {
		t.Errorf("timeout %v", got)
	}
	resp, err := c.Get("http://x/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The preset's documented defaults: a 2s ceiling and a 64 KiB body limit.
	c2, _ := NewClient(TransportConfig{})
	if got := c2.Transport.(*Transport).Classes().Policy().Timeout; got != 2*time.Second || DefaultClientTimeout != 2*time.Second {
		t.Errorf("default timeout %v", got)
	}
	if got := c2.Transport.(*Transport).limit; got != 64<<10 || DefaultClientMaxBodyBytes != 64<<10 {
		t.Errorf("default body limit %d", got)
	}
	for _, cfg := range []TransportConfig{{Policy: Policy{Timeout: -1}}, {Policy: Policy{MaxAttempts: 9}}, {Targets: []string{"nope"}}} {
		if _, err := NewClient(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewClient(%+v): %v", cfg, err)
		}
	}
}

// testHooks steers a request, stamps each attempt's request with its
// index and target, and records what RoundTripWith reports.
type testHooks struct {
	mu      sync.Mutex
	picks   []string
	admit   bool
	rewrote []string
	done    map[int]string
	elapsed map[int]time.Duration
}

func (h *testHooks) Rewrite(a Attempt, out *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rewrote = append(h.rewrote, fmt.Sprintf("%d %s %s", a.Index, out.URL.Host, out.Header.Get(HedgeHeader)))
	out.Header.Set("X-Attempt", strconv.Itoa(a.Index))
}

func (h *testHooks) Pick(a Attempt, used []int) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.picks = append(h.picks, fmt.Sprint(a.Index, used))
	if a.Index > 0 && !h.admit {
		return -1, ErrNoCapacity
	}
	return 1 - a.Index, nil // primary to target 1, hedge to target 0
}

func (h *testHooks) Done(a Attempt, r Result) {
	resp, verdict, elapsed := r.Response, r.Verdict, r.Elapsed
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done == nil {
		h.done, h.elapsed = map[int]string{}, map[int]time.Duration{}
	}
	if _, dup := h.done[a.Index]; dup {
		panic("Done twice for one attempt")
	}
	switch {
	case resp == nil:
		h.done[a.Index] = verdict.Error()
	case verdict != nil:
		h.done[a.Index] = strconv.Itoa(resp.StatusCode) + " refused: " + verdict.Error()
	default:
		h.done[a.Index] = strconv.Itoa(resp.StatusCode)
	}
	h.elapsed[a.Index] = elapsed
}

func TestRoundTripWithHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: 2 * time.Millisecond, body: "a"}
		b := &backend{lat: 30 * time.Millisecond, body: "b"}
		tr, c := newMemTransport(t, Policy{Delay: 10 * time.Millisecond}, TransportConfig{Targets: []string{"http://a", "http://b"}},
			map[string]*backend{"a": a, "b": b})
		h := &testHooks{admit: true}
		req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		resp, err := tr.RoundTripWith(req, nil, h)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		synctest.Wait()
		if string(body) != "a" || fmt.Sprint(h.picks) != "[0 [] 1 [1]]" {
			t.Errorf("body %q picks %v: the primary goes to b, the hedge to a", body, h.picks)
		}
		if h.done[0] != "context canceled" || h.done[1] != "200" || h.elapsed[1] != 2*time.Millisecond || h.elapsed[0] != 12*time.Millisecond {
			t.Errorf("Done: %v %v", h.done, h.elapsed)
		}
		// Rewrite sees each attempt's request as it leaves: aimed at its
		// target, the hedge marked; what it writes is what is sent.
		if fmt.Sprint(h.rewrote) != "[0 b  1 a 1]" {
			t.Errorf("Rewrite saw %q, want the primary to b unmarked, then the hedge to a marked 1", h.rewrote)
		}
		if got := fmt.Sprint(a.attempts(), b.attempts()); got != "[1] [0]" {
			t.Errorf("X-Attempt as received by a, b: %s, want [1] [0]", got)
		}
		if r := c.last(t); r.WinnerTargetName != "http://a" {
			t.Errorf("receipt %+v", r)
		}
		// Admit refusing the hedge: suppressed for capacity, one Done.
		h2 := &testHooks{admit: false}
		req, _ = http.NewRequest(http.MethodGet, "http://x/", nil)
		resp, err = tr.RoundTripWith(req, nil, h2)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		synctest.Wait()
		if r := c.last(t); r.HedgesSuppressed.Capacity != 1 || len(h2.done) != 1 || h2.done[0] != "200" {
			t.Errorf("receipt %+v, done %v", r, h2.done)
		}
	})
}

// With hooks, a request no attempt could answer acceptably comes back as
// the last refused response and an error wrapping ErrNotAccepted, with Done given each
// verdict; plain RoundTrip returns that response as the server's answer.
// A request that is not hedged passes through, once, to the target Pick
// chooses, seen by Rewrite and Done as a primary.
func TestRoundTripWithRefusedAndPassThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: time.Millisecond, status: 503, body: "busy a"}
		b := &backend{lat: time.Millisecond, status: 503, body: "busy b"}
		tr, _ := newMemTransport(t, Policy{Delay: 10 * time.Millisecond}, TransportConfig{Targets: []string{"http://a", "http://b"}},
			map[string]*backend{"a": a, "b": b})
		h := &testHooks{admit: true}
		req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		resp, err := tr.RoundTripWith(req, nil, h)
		if resp == nil || !errors.Is(err, ErrNotAccepted) {
			t.Fatalf("RoundTripWith = %v, %v; want the last response refused and an error wrapping ErrNotAccepted", resp, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		synctest.Wait()
		if resp.StatusCode != 503 || string(body) != "busy a" {
			t.Errorf("refused response %d %q, want the last one, a's 503", resp.StatusCode, body)
		}
		if h.done[0] != "503 refused: hedge: status 503" || h.done[1] != "503 refused: hedge: status 503" {
			t.Errorf("Done verdicts %v", h.done)
		}
		resp, err = tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("RoundTrip = %v, %v; want the 503 and no error", resp, err)
		}
		resp.Body.Close()

		h = &testHooks{admit: true}
		req, _ = http.NewRequest(http.MethodPost, "http://x/p", strings.NewReader("x"))
		if resp, err = tr.RoundTripWith(req, nil, h); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if fmt.Sprint(h.rewrote) != "[0 b ]" || fmt.Sprint(h.picks) != "[0 []]" || fmt.Sprint(h.done) != "map[0:503 refused: hedge: status 503]" {
			t.Errorf("pass-through: rewrote %q picks %v done %v; want the primary's Pick, Rewrite and Done", h.rewrote, h.picks, h.done)
		}
	})
}

// endless is a response body that never ends and counts what was read.
type endless struct{ n atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'z'
	}
	e.n.Add(int64(len(p)))
	return len(p), nil
}

func (e *endless) Close() error { return nil }

// TestBodyLimitReadsOnePastLimit checks that an unannounced body over the
// limit is read no further than limit+1 bytes, whatever the buffer sizes.
func TestBodyLimitReadsOnePastLimit(t *testing.T) {
	for _, limit := range []int64{1, 5, 4095, 4096, 64 << 10, 100000} {
		body := &endless{}
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: body, ContentLength: -1, Header: http.Header{}, Request: r}, nil
		})
		tr, err := NewTransport(TransportConfig{Policy: Policy{MaxAttempts: 1}, Base: base, MaxBodyBytes: limit})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", "http://x/", nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, ErrResponseTooLarge) {
			t.Errorf("limit %d: err %v, want ErrResponseTooLarge", limit, err)
		}
		if got := body.n.Load(); got != limit+1 {
			t.Errorf("limit %d: read %d bytes, want %d", limit, got, limit+1)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A primary whose body cannot be had from GetBody fails without being
// sent, and says why; with no other attempt, so does the request.
func TestTransportPrimaryGetBodyFails(t *testing.T) {
	var sent atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("x")), Request: req}, nil
	})
	for _, targets := range [][]string{nil, {"http://a"}} {
		tr, err := NewTransport(TransportConfig{Base: base, Targets: targets, SafeMethods: []string{"SEARCH"}, Policy: Policy{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("SEARCH", "http://x/", strings.NewReader("q"))
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("no body today") }
		resp, err := tr.RoundTrip(req)
		if err == nil || !strings.Contains(err.Error(), "GetBody: no body today") {
			t.Errorf("targets %v: got %v, %v; want the GetBody error", targets, resp, err)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d attempts sent, want none", n)
	}
}
