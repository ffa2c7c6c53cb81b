package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
)

// seenTimeouts returns the Tailgate-Timeout each request to b carried,
// parsed, in arrival order.
func seenTimeouts(t *testing.T, b *backend) []time.Duration {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var ds []time.Duration
	for _, r := range b.seen {
		d, ok, err := deadline.FromHeader(r.Header)
		if !ok || err != nil {
			t.Fatalf("replica got Tailgate-Timeout %q (present %v, %v)", r.Header.Values(deadline.Header), ok, err)
		}
		ds = append(ds, d)
	}
	return ds
}

func answerName(b *backend, w http.ResponseWriter, r *http.Request) { w.Write([]byte(b.name)) }

func TestDeadlineForwardedAsRemainingTime(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	for _, tc := range []struct {
		name     string
		header   []string
		min, max time.Duration // what the replica may see
	}{
		// No client deadline: the replica learns the gateway's own timeout.
		{"gateway timeout", nil, time.Second, 2 * time.Second},
		// A shorter client deadline wins, less the gateway's own time.
		{"client deadline", []string{deadline.Header, "300m"}, 100 * time.Millisecond, 300 * time.Millisecond},
		// A longer one never stretches the gateway's timeout, and the
		// client's value is never passed on as it came.
		{"client asks too much", []string{deadline.Header, "60S"}, time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newBackend(t, "a", answerName)
			_, srv := newGateway(t, Config{Policy: hedge.Policy{MaxAttempts: 1}, Timeout: 2 * time.Second}, a)
			resp, body := get(t, srv.URL+"/x", tc.header...)
			if resp.StatusCode != 200 || body != "a" {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
			ds := seenTimeouts(t, a)
			if len(ds) != 1 || ds[0] < tc.min || ds[0] > tc.max {
				t.Fatalf("replica saw %v, want one value in [%v, %v]", ds, tc.min, tc.max)
			}
		})
	}
}

func TestHedgeCarriesLessTimeThanPrimary(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", straggleUnlessHedge)
	b := newBackend(t, "b", straggleUnlessHedge)
	_, srv := newGateway(t, Config{Policy: fixedPolicy(30 * time.Millisecond)}, a, b)
	resp, _ := get(t, srv.URL+"/x", deadline.Header, "2S")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var primary, hedged time.Duration
	for _, be := range []*backend{a, b} {
		ds := seenTimeouts(t, be)
		if len(ds) != 1 {
			t.Fatalf("%s saw %d requests", be.name, len(ds))
		}
		if be.last().Header.Get(hedge.HedgeHeader) == "" {
			primary = ds[0]
		} else {
			hedged = ds[0]
		}
	}
	// The hedge left at least the hedge delay after the primary.
	if primary > 2*time.Second || hedged > primary-20*time.Millisecond || hedged <= 0 {
		t.Fatalf("primary claimed %v, hedge %v: the hedge must claim less, by about the delay", primary, hedged)
	}
}

func TestClientDeadlineShortensTimeout(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			b.cancelled <- r.RequestURI
		case <-time.After(5 * time.Second):
		}
	})
	g, srv := newGateway(t, Config{Policy: hedge.Policy{MaxAttempts: 1}}, a)
	start := time.Now()
	resp, body := get(t, srv.URL+"/slow", deadline.Header, "100m")
	if resp.StatusCode != 504 || !strings.Contains(body, "within 100ms") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("504 after %v: the client's deadline was not honoured", d)
	}
	select {
	case <-a.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the replica never saw its attempt cancelled")
	}
	if n := counterValue(t, g, "tailgate_rejections_total", "reason", rejectDeadline); n != 0 {
		t.Errorf("a request that was tried counted as %v refusals", n)
	}
}

func TestClientDeadlineRefusals(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		time.Sleep(40 * time.Millisecond)
		w.Write([]byte(b.name))
	})
	g, srv := newGateway(t, Config{Policy: hedge.Policy{MaxAttempts: 1}}, a)

	// Refused before any replica is asked: nothing there is known yet, so
	// only a malformed value or no time at all.
	for _, tc := range []struct{ value, want string }{
		{"soon", "malformed"},
		{"-5m", "malformed"},
		{"0n", "0s left"},
	} {
		resp, body := get(t, srv.URL+"/x", deadline.Header, tc.value)
		want := http.StatusBadRequest
		if tc.value == "0n" {
			want = http.StatusGatewayTimeout
		}
		if resp.StatusCode != want || !strings.Contains(body, tc.want) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%q: %d %q", tc.value, resp.StatusCode, body)
		}
	}
	if n := a.hits.Load(); n != 0 {
		t.Fatalf("refused requests reached the replica %d times", n)
	}

	// Once the replicas are known to take ~40ms, a request with 5ms left
	// cannot finish: refused at once, without an attempt.
	// Latency is learnt per class of read: warm /x's.
	for range 5 {
		if resp, _ := get(t, srv.URL+"/x"); resp.StatusCode != 200 {
			t.Fatalf("warm-up: %d", resp.StatusCode)
		}
	}
	// The class's expected latency, which the check reads.
	for end := time.Now().Add(5 * time.Second); g.Classes().Hedger("GET /x").Expected() < 30*time.Millisecond; {
		if time.Now().After(end) {
			t.Fatalf("expected latency %v after warm-up", g.Classes().Hedger("GET /x").Expected())
		}
		time.Sleep(20 * time.Millisecond)
	}
	hits := a.hits.Load()
	resp, body := get(t, srv.URL+"/x", deadline.Header, "5m")
	if resp.StatusCode != 504 || !strings.Contains(body, "5ms left, replicas need about") {
		t.Errorf("5ms: %d %q", resp.StatusCode, body)
	}
	if a.hits.Load() != hits {
		t.Error("a request that could not finish was sent anyway")
	}
	// Enough time is still served.
	if resp, body := get(t, srv.URL+"/x", deadline.Header, "2S"); resp.StatusCode != 200 || body != "a" {
		t.Errorf("2s: %d %q", resp.StatusCode, body)
	}
	// A malformed header is the client's mistake, counted apart from a
	// deadline too short to meet.
	if n := counterValue(t, g, "tailgate_rejections_total", "reason", rejectDeadline); n != 2 {
		t.Errorf("deadline refusals counted %v, want 2 (0n, 5m)", n)
	}
	if n := counterValue(t, g, "tailgate_rejections_total", "reason", rejectBadDeadline); n != 2 {
		t.Errorf("malformed deadlines counted %v, want 2 (soon, -5m)", n)
	}
}

// recordingBase answers 200 "ok" from memory (after delay, for paths
// starting /slow) and records, for each attempt, the Tailgate-Timeout it
// carries and the time its context has left as the replica would get it.
type recordingBase struct {
	delay time.Duration
	mu    sync.Mutex
	sent  []time.Duration
	left  []time.Duration
}

func (b *recordingBase) RoundTrip(r *http.Request) (*http.Response, error) {
	left, _ := deadline.Remaining(r.Context())
	sent, _, err := deadline.FromHeader(r.Header)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.sent, b.left = append(b.sent, sent), append(b.left, left)
	b.mu.Unlock()
	if strings.HasPrefix(r.URL.Opaque, "/slow") {
		select {
		case <-time.After(b.delay):
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

func (b *recordingBase) last() (sent, left time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent[len(b.sent)-1], b.left[len(b.left)-1]
}

// lagObserver holds up the launch of each primary by lag, so that the
// attempt leaves that long after the gateway wrote its Tailgate-Timeout.
type lagObserver struct{ lag time.Duration }

func (o *lagObserver) Observe(e hedge.Event) {
	if e.Kind == hedge.EventLaunch && e.Attempt.Index == 0 && o.lag > 0 {
		time.Sleep(o.lag)
	}
}

// serveInMemory sends one GET for path through g, with the Tailgate-Timeout
// value if any, and returns the recorder.
func serveInMemory(g *Gateway, path, value string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if value != "" {
		r.Header.Set(deadline.Header, value)
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	return w
}

// The primary is told at most the time the gateway has left when it is
// sent, and no more than a millisecond (the slack that lets the gateway
// write the value as it builds the request) less: whether it leaves at
// once or later, with or without a client deadline. Time only moves in the
// bubble when the launch is held up, so the lag is exact.
func TestPrimaryNeverClaimsMoreThanLeft(t *testing.T) {
	for _, value := range []string{"", "300m", "1500000u", "10S", "60S", "2m", "1m"} {
		for _, lag := range []time.Duration{0, 500 * time.Microsecond, time.Millisecond, 3 * time.Millisecond} {
			synctest.Test(t, func(t *testing.T) {
				base, obs := &recordingBase{}, &lagObserver{lag: lag}
				g, err := New(Config{Backends: []string{"http://127.0.0.1:1"}, Base: base, Timeout: 10 * time.Second,
					Policy: hedge.Policy{MaxAttempts: 1, Observer: obs}})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				budget := 10 * time.Second
				if d, err := deadline.Parse(value); err == nil {
					budget = min(budget, d)
				}
				if w := serveInMemory(g, "/x", value); w.Code != 200 {
					if budget <= lag && w.Code == http.StatusGatewayTimeout {
						return // the deadline passed before the primary was sent
					}
					t.Fatalf("%q, lag %v: status %d %s", value, lag, w.Code, w.Body)
				}
				sent, left := base.last()
				if left != budget-lag {
					t.Errorf("%q, lag %v: the primary had %v left, want %v", value, lag, left, budget-lag)
				}
				if sent > left || left-sent > time.Millisecond {
					t.Errorf("%q, lag %v: the primary was told %v with %v left; want at most the time left, within 1ms", value, lag, sent, left)
				}
			})
		}
	}
}

// A client deadline is refused on the replicas' account only once their
// latency is known (not "replicas need about 0s"), and never when the
// policy ignores deadlines; no time at all is always refused.
func TestDeadlineRefusalNeedsKnownLatency(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			base := &recordingBase{delay: 40 * time.Millisecond}
			g, err := New(Config{Backends: []string{"http://127.0.0.1:1"}, Base: base,
				Policy: hedge.Policy{MaxAttempts: 1, IgnoreDeadline: ignore}})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			// Nothing known yet: a short deadline is tried, none is refused.
			if w := serveInMemory(g, "/x", "2m"); w.Code != 200 {
				t.Fatalf("ignore %v, nothing known: status %d %s", ignore, w.Code, w.Body)
			}
			if w := serveInMemory(g, "/x", "0n"); w.Code != http.StatusGatewayTimeout || !strings.Contains(w.Body.String(), "0s left, need more than 0s") {
				t.Errorf("ignore %v, 0n: status %d %s", ignore, w.Code, w.Body)
			}
			for range 5 {
				if w := serveInMemory(g, "/slow", ""); w.Code != 200 {
					t.Fatalf("warm-up: status %d %s", w.Code, w.Body)
				}
			}
			time.Sleep(time.Second) // past the engine's refresh
			if need := g.Classes().Hedger("GET /slow").Expected(); need < 30*time.Millisecond {
				t.Fatalf("expected latency %v after the warm-up, want about 40ms", need)
			}
			w := serveInMemory(g, "/slow", "5m") // the class whose latency is known
			switch {
			case ignore && w.Code != 200 && w.Code != http.StatusGatewayTimeout:
				t.Errorf("IgnoreDeadline: status %d %s, want the request tried", w.Code, w.Body)
			case !ignore && (w.Code != http.StatusGatewayTimeout || !strings.Contains(w.Body.String(), "5ms left, replicas need about")):
				t.Errorf("status %d %s, want 504 refusal", w.Code, w.Body)
			}
			refused := 2
			if ignore {
				refused = 1
			}
			if n := counterValue(t, g, "tailgate_rejections_total", "reason", rejectDeadline); n != float64(refused) {
				t.Errorf("ignore %v: deadline refusals counted %v, want %d", ignore, n, refused)
			}
		})
	}
}

// The client's deadline counts from the request's arrival: the time
// before the engine runs is not given back.
func TestClientDeadlineAnchoredAtArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &recordingBase{}
		g, err := New(Config{Backends: []string{"http://127.0.0.1:1"}, Base: base, Policy: hedge.Policy{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Header.Set(deadline.Header, "300m")
		start := time.Now()
		time.Sleep(100 * time.Millisecond) // the request waited before serve ran
		w := httptest.NewRecorder()
		if code := g.serve(w, r, start, nil).code; code != 200 {
			t.Fatalf("status %d %s", code, w.Body)
		}
		if sent, left := base.last(); left != 200*time.Millisecond || sent > left {
			t.Errorf("primary told %v with %v left; want 200ms left, counted from arrival", sent, left)
		}
	})
}
