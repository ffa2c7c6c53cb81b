package deadline_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
)

// probe is a next handler that records what it saw.
type probe struct {
	calls     int
	req       *http.Request
	remaining time.Duration
	has       bool
}

func (p *probe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.calls++
	p.req = r
	p.remaining, p.has = deadline.Remaining(r.Context())
	w.Write([]byte("ok"))
}

// refusal records OnRefuse's calls.
type refusal struct {
	calls     int
	req       *http.Request
	remaining time.Duration
}

func (f *refusal) hook(r *http.Request, remaining time.Duration) {
	f.calls++
	f.req, f.remaining = r, remaining
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func withTimeout(value string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/item", nil)
	r.Header.Set(deadline.Header, value)
	return r
}

// errorBody decodes a refusal's body, checking that it is the JSON
// {"error": "..."} and nothing else.
func errorBody(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	msg, ok := body["error"].(string)
	if !ok || len(body) != 1 {
		t.Fatalf("body %q, want {\"error\": string}", w.Body)
	}
	return msg
}

func TestHandlerSetsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			value string
			max   time.Duration
			want  time.Duration
		}{
			{"250m", 0, 250 * time.Millisecond},
			{"1n", 0, 1},
			{"99999999H", 0, time.Until(time.Now().Add(1<<63 - 1))}, // far future: no overflow
			{"10S", time.Second, time.Second},                       // capped
			{"500m", time.Second, 500 * time.Millisecond},           // under the cap
			{"1S", time.Second, time.Second},                        // at the cap
		} {
			p := &probe{}
			w := serve(deadline.Handler(p, deadline.Options{Max: tc.max}), withTimeout(tc.value))
			if w.Code != http.StatusOK || p.calls != 1 {
				t.Fatalf("%s: status %d, next called %d times", tc.value, w.Code, p.calls)
			}
			if !p.has || p.remaining != tc.want {
				t.Errorf("%s with Max %v: next saw %v, %v left; want %v", tc.value, tc.max, p.remaining, p.has, tc.want)
			}
		}
	})
}

func TestHandlerKeepsAnEarlierDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		p := &probe{}
		serve(deadline.Handler(p, deadline.Options{}), withTimeout("10S").WithContext(ctx))
		if p.remaining != 100*time.Millisecond {
			t.Errorf("next saw %v left, want the server's own 100ms", p.remaining)
		}
	})
}

func TestHandlerDeadlineExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var err error
		h := deadline.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			err = r.Context().Err()
		}), deadline.Options{})
		start := time.Now()
		serve(h, withTimeout("30m"))
		if err != context.DeadlineExceeded || time.Since(start) != 30*time.Millisecond {
			t.Errorf("context ended with %v after %v, want deadline exceeded after 30ms", err, time.Since(start))
		}
	})
}

func TestHandlerRefusesTooLittleTime(t *testing.T) {
	for _, tc := range []struct {
		value string
		min   time.Duration
		left  time.Duration
		msg   string
	}{
		{"4m", 5 * time.Millisecond, 4 * time.Millisecond, "deadline: 4ms left, need at least 5ms"},
		{"4999999n", 5 * time.Millisecond, 4999999, "deadline: 4.999999ms left, need at least 5ms"},
		{"0n", 0, 0, "deadline: 0s left, need more than 0s"},
		{"0H", 0, 0, "deadline: 0s left, need more than 0s"},
		{"0n", -time.Second, 0, "deadline: 0s left, need more than 0s"}, // negative: as 0
		{"0n", 5 * time.Millisecond, 0, "deadline: 0s left, need at least 5ms"},
	} {
		p, f := &probe{}, &refusal{}
		r := withTimeout(tc.value)
		w := serve(deadline.Handler(p, deadline.Options{MinRemaining: tc.min, OnRefuse: f.hook}), r)
		if w.Code != http.StatusGatewayTimeout {
			t.Errorf("%s with MinRemaining %v: status %d, want 504", tc.value, tc.min, w.Code)
		}
		if p.calls != 0 {
			t.Errorf("%s: next called", tc.value)
		}
		if msg := errorBody(t, w); msg != tc.msg {
			t.Errorf("%s: error %q, want %q", tc.value, msg, tc.msg)
		}
		if f.calls != 1 || f.req != r || f.remaining != tc.left {
			t.Errorf("%s: OnRefuse called %d times with %v; want once with the request and %v", tc.value, f.calls, f.remaining, tc.left)
		}
	}
}

// Max applies before MinRemaining: the floor is for the time the work
// gets, so a request capped below it is refused rather than admitted with
// less time than MinRemaining says the work needs.
func TestHandlerMaxAppliesBeforeMinRemaining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			value    string
			min, max time.Duration
			want     time.Duration // 0: refused
			msg      string
		}{
			{"1S", 50 * time.Millisecond, 10 * time.Millisecond, 0, "deadline: 1s left, capped at 10ms, need at least 50ms"},
			{"5m", 50 * time.Millisecond, 10 * time.Millisecond, 0, "deadline: 5ms left, need at least 50ms"},
			{"1S", 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, ""}, // capped exactly to the floor
			{"1S", 50 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, ""},
			{"60m", 50 * time.Millisecond, 100 * time.Millisecond, 60 * time.Millisecond, ""},
		} {
			p, f := &probe{}, &refusal{}
			r := withTimeout(tc.value)
			w := serve(deadline.Handler(p, deadline.Options{MinRemaining: tc.min, Max: tc.max, OnRefuse: f.hook}), r)
			if tc.want == 0 {
				if w.Code != http.StatusGatewayTimeout || p.calls != 0 {
					t.Errorf("%s, Max %v, MinRemaining %v: status %d, next called %d times; want 504 and never", tc.value, tc.max, tc.min, w.Code, p.calls)
				}
				if msg := errorBody(t, w); msg != tc.msg {
					t.Errorf("%s: error %q, want %q", tc.value, msg, tc.msg)
				}
				// OnRefuse hears what the client sent, not the cap.
				if sent, _ := deadline.Parse(tc.value); f.calls != 1 || f.remaining != sent {
					t.Errorf("%s: OnRefuse called %d times with %v, want once with %v", tc.value, f.calls, f.remaining, sent)
				}
				continue
			}
			if w.Code != http.StatusOK || p.calls != 1 || f.calls != 0 {
				t.Errorf("%s, Max %v, MinRemaining %v: status %d, next %d, OnRefuse %d; want admitted", tc.value, tc.max, tc.min, w.Code, p.calls, f.calls)
			}
			if !p.has || p.remaining != tc.want {
				t.Errorf("%s, Max %v: next saw %v, %v left; want %v", tc.value, tc.max, p.remaining, p.has, tc.want)
			}
		}
	})
}

func TestHandlerAdmitsAtMinRemaining(t *testing.T) {
	p, f := &probe{}, &refusal{}
	h := deadline.Handler(p, deadline.Options{MinRemaining: 5 * time.Millisecond, OnRefuse: f.hook})
	if w := serve(h, withTimeout("5m")); w.Code != http.StatusOK || p.calls != 1 || f.calls != 0 {
		t.Errorf("exactly MinRemaining: status %d, next %d, OnRefuse %d", w.Code, p.calls, f.calls)
	}
}

func TestHandlerRefusesMalformed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   string
	}{
		{"bad unit", []string{"5x"}, `deadline: malformed timeout "5x"`},
		{"empty", []string{""}, `deadline: malformed timeout ""`},
		{"negative", []string{"-5m"}, `deadline: malformed timeout "-5m"`},
		{"several", []string{"1S", "2S"}, "deadline: malformed timeout: 2 Tailgate-Timeout values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, f := &probe{}, &refusal{}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header[deadline.Header] = tc.values
			w := serve(deadline.Handler(p, deadline.Options{OnRefuse: f.hook}), r)
			if w.Code != http.StatusBadRequest || p.calls != 0 {
				t.Fatalf("status %d, next called %d times; want 400, never", w.Code, p.calls)
			}
			if msg := errorBody(t, w); !strings.HasPrefix(msg, tc.want) {
				t.Errorf("error %q, want it to start %q", msg, tc.want)
			}
			if f.calls != 1 || f.req != r || f.remaining != 0 {
				t.Errorf("OnRefuse called %d times with %v, want once with 0", f.calls, f.remaining)
			}
		})
	}
}

func TestHandlerPassesThroughWithoutHeader(t *testing.T) {
	p, f := &probe{}, &refusal{}
	h := deadline.Handler(p, deadline.Options{Max: time.Second, MinRemaining: time.Hour, OnRefuse: f.hook})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	w := serve(h, r)
	if w.Code != http.StatusOK || p.calls != 1 || f.calls != 0 {
		t.Fatalf("status %d, next %d, OnRefuse %d", w.Code, p.calls, f.calls)
	}
	if p.req != r {
		t.Error("next got a different request")
	}
	if p.has {
		t.Errorf("next got a deadline (%v) without the header", p.remaining)
	}
}

func TestHandlerNegativeMaxIsNoCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &probe{}
		serve(deadline.Handler(p, deadline.Options{Max: -time.Second}), withTimeout("10S"))
		if p.remaining != 10*time.Second {
			t.Errorf("next saw %v left, want 10s uncapped", p.remaining)
		}
	})
}

func TestHandlerCopiesOptions(t *testing.T) {
	p := &probe{}
	opts := deadline.Options{MinRemaining: time.Hour}
	h := deadline.Handler(p, opts)
	opts.MinRemaining = 0
	if w := serve(h, withTimeout("1S")); w.Code != http.StatusGatewayTimeout {
		t.Errorf("status %d after the caller changed its Options, want 504", w.Code)
	}
}

func TestRemaining(t *testing.T) {
	if d, ok := deadline.Remaining(context.Background()); ok || d != 0 {
		t.Errorf("Remaining(Background) = %v, %v", d, ok)
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if d, ok := deadline.Remaining(ctx); !ok || d != time.Second {
			t.Errorf("Remaining = %v, %v; want 1s", d, ok)
		}
		time.Sleep(1500 * time.Millisecond)
		if d, ok := deadline.Remaining(ctx); !ok || d != -500*time.Millisecond {
			t.Errorf("Remaining after the deadline = %v, %v; want -500ms", d, ok)
		}
	})
	dl := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	if d, ok := deadline.RemainingAt(ctx, dl.Add(-time.Minute)); !ok || d != time.Minute {
		t.Errorf("RemainingAt = %v, %v; want 1m", d, ok)
	}
	if d, ok := deadline.RemainingAt(context.Background(), dl); ok || d != 0 {
		t.Errorf("RemainingAt(Background) = %v, %v", d, ok)
	}
}

func BenchmarkHandler(b *testing.B) {
	h := deadline.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), deadline.Options{Max: time.Minute})
	r := withTimeout("250m")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}
