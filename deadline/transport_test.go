package deadline_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
)

// capture is an in-memory RoundTripper that keeps the request it was sent
// and answers 200.
type capture struct {
	calls atomic.Int32
	req   *http.Request
}

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	c.req = req
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK, Header: http.Header{},
		Body: http.NoBody, Request: req,
	}, nil
}

func newRequest(t *testing.T, ctx context.Context, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/item", body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func roundTrip(t *testing.T, rt http.RoundTripper, req *http.Request) {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	resp.Body.Close()
}

func TestTransportWritesRemainingTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &capture{}
		tr := &deadline.Transport{Base: base}
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		defer cancel()

		roundTrip(t, tr, newRequest(t, ctx, nil))
		if got := base.req.Header.Get(deadline.Header); got != "250000u" {
			t.Errorf("with 250ms left: header %q, want 250000u", got)
		}

		// Remaining at send time, not at context creation.
		time.Sleep(150*time.Millisecond + 999)
		roundTrip(t, tr, newRequest(t, ctx, nil))
		if got := base.req.Header.Get(deadline.Header); got != "99999001n" {
			t.Errorf("with 99.999001ms left: header %q, want 99999001n", got)
		}
		time.Sleep(99_999_000)
		roundTrip(t, tr, newRequest(t, ctx, nil))
		if got := base.req.Header.Get(deadline.Header); got != "1n" {
			t.Errorf("with 1ns left: header %q, want 1n", got)
		}
	})
}

func TestTransportTruncates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &capture{}
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond+999)
		defer cancel()
		roundTrip(t, &deadline.Transport{Base: base}, newRequest(t, ctx, nil))
		if got := base.req.Header.Get(deadline.Header); got != "1500000u" {
			t.Errorf("header %q, want 1500000u (truncated)", got)
		}
	})
}

func TestTransportReplacesUpstreamValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &capture{}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req := newRequest(t, ctx, nil)
		req.Header.Set(deadline.Header, "99S")
		roundTrip(t, &deadline.Transport{Base: base}, req)
		if got := base.req.Header.Values(deadline.Header); !reflect.DeepEqual(got, []string{"2000000u"}) {
			t.Errorf("sent %q, want [2000000u]", got)
		}
		if got := req.Header.Get(deadline.Header); got != "99S" {
			t.Errorf("caller's header changed to %q", got)
		}
	})
}

func TestTransportRemovesStaleHeaderWithoutDeadline(t *testing.T) {
	base := &capture{}
	req := newRequest(t, context.Background(), nil)
	req.Header.Set(deadline.Header, "5S")
	req.Header.Set("Accept", "application/json")
	roundTrip(t, &deadline.Transport{Base: base}, req)
	if _, ok := base.req.Header[deadline.Header]; ok {
		t.Errorf("stale %s forwarded: %q", deadline.Header, base.req.Header.Get(deadline.Header))
	}
	if got := base.req.Header.Get("Accept"); got != "application/json" {
		t.Errorf("other headers lost: Accept %q", got)
	}
	if base.req == req {
		t.Error("the caller's request was sent after its header was removed")
	}
	if got := req.Header.Get(deadline.Header); got != "5S" {
		t.Errorf("caller's header changed to %q", got)
	}
}

func TestTransportPassesThroughWithoutDeadline(t *testing.T) {
	base := &capture{}
	req := newRequest(t, context.Background(), nil)
	roundTrip(t, &deadline.Transport{Base: base}, req)
	if base.req != req {
		t.Error("a request with nothing to change was copied")
	}
	if _, ok := base.req.Header[deadline.Header]; ok {
		t.Errorf("header added without a deadline")
	}
}

// closeTracker is a request body that records Close.
type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeTracker) Close() error { c.closed.Store(true); return nil }

func TestTransportDoesNotSendExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &capture{}
		tr := &deadline.Transport{Base: base}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		time.Sleep(15 * time.Millisecond)

		body := &closeTracker{Reader: strings.NewReader("payload")}
		req := newRequest(t, ctx, body)
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			t.Errorf("response %v for an expired request", resp.Status)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want one wrapping context.DeadlineExceeded", err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "deadline: ") || !strings.Contains(msg, "5ms ago") {
			t.Errorf("error %q: want the deadline: prefix and how late", msg)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !err.(interface{ Temporary() bool }).Temporary() {
			t.Errorf("error %v is not a net.Error timeout", err)
		}
		if base.calls.Load() != 0 {
			t.Error("base called for an expired request")
		}
		if !body.closed.Load() {
			t.Error("request body not closed")
		}

		// Through an http.Client the error still reads as a timeout.
		client := &http.Client{Transport: tr}
		_, err = client.Do(newRequest(t, ctx, nil))
		var ue *url.Error
		if !errors.As(err, &ue) || !ue.Timeout() || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("client.Do: %v, want a timeout url.Error", err)
		}
		if base.calls.Load() != 0 {
			t.Error("base called for an expired request")
		}
	})
}

func TestTransportDeadlineExactlyNowIsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &capture{}
		ctx, cancel := context.WithDeadline(context.Background(), time.Now())
		defer cancel()
		_, err := (&deadline.Transport{Base: base}).RoundTrip(newRequest(t, ctx, nil))
		if !errors.Is(err, context.DeadlineExceeded) || base.calls.Load() != 0 {
			t.Fatalf("error %v, base calls %d; want not sent", err, base.calls.Load())
		}
	})
}

func TestTransportDoesNotMutateRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for _, name := range []string{"deadline", "no deadline"} {
			base := &capture{}
			rctx := ctx
			if name == "no deadline" {
				rctx = context.Background()
			}
			req := newRequest(t, rctx, nil)
			req.Header.Set("Accept", "text/plain")
			req.Header.Set(deadline.Header, "1H")
			before := req.Header.Clone()
			headerMap := reflect.ValueOf(req.Header).UnsafePointer()
			urlBefore := *req.URL

			roundTrip(t, &deadline.Transport{Base: base}, req)
			if !reflect.DeepEqual(req.Header, before) {
				t.Errorf("%s: caller's header changed: %v, was %v", name, req.Header, before)
			}
			if reflect.ValueOf(base.req.Header).UnsafePointer() == headerMap {
				t.Errorf("%s: sent the caller's header map", name)
			}
			if *req.URL != urlBefore || req.Context() != rctx {
				t.Errorf("%s: caller's request changed", name)
			}
		}

		// A request built without a header map keeps none.
		base := &capture{}
		req := &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "http", Host: "127.0.0.1:1", Path: "/"}}
		req = req.WithContext(ctx)
		roundTrip(t, &deadline.Transport{Base: base}, req)
		if req.Header != nil {
			t.Errorf("caller's nil header became %v", req.Header)
		}
		if got := base.req.Header.Get(deadline.Header); got != "1000000u" {
			t.Errorf("sent %q, want 1000000u", got)
		}
	})
}

func TestTransportCloseIdleConnectionsWithoutSupport(t *testing.T) {
	(&deadline.Transport{Base: &capture{}}).CloseIdleConnections() // no-op, no panic
}

// seen is what a loopback handler observed.
type seen struct {
	remaining time.Duration
	has       bool
	header    string
}

func loopbackServer(t *testing.T, opts deadline.Options) (*httptest.Server, <-chan seen) {
	t.Helper()
	ch := make(chan seen, 1)
	srv := httptest.NewServer(deadline.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		left, ok := deadline.Remaining(r.Context())
		ch <- seen{left, ok, r.Header.Get(deadline.Header)}
		w.Write([]byte("ok"))
	}), opts))
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("server at %s, want 127.0.0.1", srv.URL)
	}
	return srv, ch
}

func TestLoopbackEndToEnd(t *testing.T) {
	srv, ch := loopbackServer(t, deadline.Options{})
	client := &http.Client{Transport: &deadline.Transport{Base: &http.Transport{}}}
	defer client.CloseIdleConnections()

	const timeout = 5 * time.Second
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/item", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	elapsed := time.Since(start)
	got := <-ch

	if resp.StatusCode != http.StatusOK || !got.has {
		t.Fatalf("status %d, server deadline %v", resp.StatusCode, got.has)
	}
	// The server cannot have more time than the client gave, nor less than
	// what was left when the client got its answer (minus the microsecond
	// that Format may truncate).
	lo := timeout - elapsed - time.Microsecond
	if got.remaining > timeout || got.remaining < lo {
		t.Errorf("server saw %v left (header %q), want within [%v, %v]", got.remaining, got.header, lo, timeout)
	}
}

func TestLoopbackMaxCapsTheServerDeadline(t *testing.T) {
	srv, ch := loopbackServer(t, deadline.Options{Max: time.Second})
	client := &http.Client{Transport: &deadline.Transport{Base: &http.Transport{}}}
	defer client.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-ch; !got.has || got.remaining > time.Second || got.remaining <= 0 {
		t.Errorf("server saw %v, %v left; want at most the 1s cap", got.remaining, got.has)
	}
}

func TestLoopbackRefusal(t *testing.T) {
	srv, ch := loopbackServer(t, deadline.Options{MinRemaining: time.Hour})
	// The default base (http.DefaultTransport) once, so its idle
	// connections must be closed through the Transport.
	tr := &deadline.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Error string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body.Error, "need at least 1h0m0s") {
		t.Errorf("status %d, error %q; want 504 saying what is needed", resp.StatusCode, body.Error)
	}
	select {
	case s := <-ch:
		t.Errorf("handler reached with %v left", s.remaining)
	default:
	}
}

func TestTransportSlackKeepsCurrentValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &capture{}
		tr := &deadline.Transport{Base: base, Slack: time.Millisecond}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for _, tc := range []struct {
			sent []string
			same bool // the caller's request goes as it is
			want string
		}{
			{[]string{"1S"}, true, "1S"},              // exactly the time left
			{[]string{"999500u"}, true, "999500u"},    // less than the slack short
			{[]string{"999m"}, true, "999m"},          // exactly the slack short
			{[]string{"998m"}, false, "1000000u"},     // stale by more than the slack
			{[]string{"1000001u"}, false, "1000000u"}, // more than is left, however little
			{[]string{"1000900u"}, false, "1000000u"},
			{[]string{"1002m"}, false, "1000000u"},
			{[]string{"junk"}, false, "1000000u"},
			{[]string{"1S", "1S"}, false, "1000000u"},
			{nil, false, "1000000u"},
		} {
			req := newRequest(t, ctx, nil)
			req.Header[deadline.Header] = tc.sent
			roundTrip(t, tr, req)
			if (base.req == req) != tc.same || !reflect.DeepEqual(base.req.Header[deadline.Header], []string{tc.want}) {
				t.Errorf("sent %q: went as is %v, header %q; want %v, %q", tc.sent, base.req == req, base.req.Header[deadline.Header], tc.same, tc.want)
			}
			if !reflect.DeepEqual(req.Header[deadline.Header], tc.sent) {
				t.Errorf("caller's header changed from %q to %q", tc.sent, req.Header[deadline.Header])
			}
		}
	})
}

// Slack only ever keeps a value at or below the time left: a receiver is
// never told more time than the sender has, even by less than the slack.
func TestTransportSlackNeverClaimsMoreThanLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &capture{}
		tr := &deadline.Transport{Base: base, Slack: time.Millisecond}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		// Written ahead of time as a proxy would, then sent later: kept
		// while sending took less than the slack, rewritten after.
		req := newRequest(t, ctx, nil)
		req.Header.Set(deadline.Header, deadline.Format(time.Second-time.Millisecond))
		for _, tc := range []struct {
			wait time.Duration // since the previous send
			kept bool
		}{
			{0, true},
			{600 * time.Microsecond, true},
			{400 * time.Microsecond, true}, // sent exactly Slack after it was written
			{time.Microsecond, false},      // later: the value is more than is left
			{5 * time.Millisecond, false},
		} {
			time.Sleep(tc.wait)
			roundTrip(t, tr, req)
			sent, err := deadline.Parse(base.req.Header.Get(deadline.Header))
			if err != nil {
				t.Fatal(err)
			}
			left, _ := deadline.Remaining(ctx)
			if sent > left || left-sent > time.Millisecond || (base.req == req) != tc.kept {
				t.Errorf("sent %v with %v left (kept %v, want %v): want at most the time left, within the slack", sent, left, base.req == req, tc.kept)
			}
		}
		for _, over := range []string{"1000900u", "1000001u", "1001m", "2S"} {
			req := newRequest(t, ctx, nil)
			req.Header.Set(deadline.Header, over)
			roundTrip(t, tr, req)
			sent, err := deadline.Parse(base.req.Header.Get(deadline.Header))
			if err != nil {
				t.Fatal(err)
			}
			if left, _ := deadline.Remaining(ctx); sent > left {
				t.Errorf("%s: sent %v with %v left: the receiver gets more time than the sender has", over, sent, left)
			}
		}
	})
}

func TestTransportHeaderNamesTheHeaderWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &capture{}
		tr := &deadline.Transport{Base: base, Header: "Grpc-Timeout"}
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		defer cancel()
		req := newRequest(t, ctx, nil)
		req.Header.Set("Grpc-Timeout", "5S") // the client's: more than is left
		roundTrip(t, tr, req)
		if got := base.req.Header.Get("Grpc-Timeout"); got != "250000u" {
			t.Errorf("Grpc-Timeout %q, want 250000u", got)
		}
		if got, ok := base.req.Header[deadline.Header]; ok {
			t.Errorf("%s %q written too", deadline.Header, got)
		}
		// Without a deadline, a stale value goes.
		req = newRequest(t, context.Background(), nil)
		req.Header.Set("Grpc-Timeout", "5S")
		roundTrip(t, tr, req)
		if got, ok := base.req.Header["Grpc-Timeout"]; ok {
			t.Errorf("stale Grpc-Timeout %q forwarded without a deadline", got)
		}
	})
}
