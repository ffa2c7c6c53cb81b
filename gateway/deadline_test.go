package gateway

import (
	"net/http"
	"strings"
	"testing"
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
	for range 5 {
		if resp, _ := get(t, srv.URL+"/warm"); resp.StatusCode != 200 {
			t.Fatalf("warm-up: %d", resp.StatusCode)
		}
	}
	for end := time.Now().Add(5 * time.Second); g.Hedger().Stats().Expected < 30*time.Millisecond; {
		if time.Now().After(end) {
			t.Fatalf("expected latency %v after warm-up", g.Hedger().Stats().Expected)
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
	if n := counterValue(t, g, "tailgate_rejections_total", "reason", rejectDeadline); n != 4 {
		t.Errorf("deadline refusals counted %v, want 4", n)
	}
}
