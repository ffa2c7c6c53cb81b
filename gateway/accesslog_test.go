package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
)

// accessLines parses the JSON access lines in log, without their time.
func accessLines(t *testing.T, log *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range log.lines() {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		delete(m, "time")
		out = append(out, m)
	}
	return out
}

// jsonLogger is a JSON logger into log whose durations are Go strings, so
// that a test compares them exactly.
func jsonLogger(log *syncBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			return slog.String(a.Key, a.Value.Duration().String())
		}
		return a
	}}))
}

// One line per request, saying what became of it: which replica
// answered, whether a hedge went and won, or why the request was refused
// or failed.
func TestAccessLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": time.Millisecond, "b.test": time.Millisecond})
		m.slowFirst["/straggle"] = 50 * time.Millisecond
		m.fail["a.test"], m.fail["b.test"] = true, true
		var log, access syncBuffer
		g, err := New(Config{Backends: memBackends[:2], Base: m, Logger: slog.New(slog.NewTextHandler(&log, nil)), AccessLog: jsonLogger(&access),
			DisableProbation: true, Replica: replica.Config{Seed: 1, FailureThreshold: 100}, Policy: hedge.Policy{Delay: 10 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		var sent []float64 // body lengths
		send := func(method, path string) {
			r := httptest.NewRequest(method, path, nil)
			r.RemoteAddr = "127.0.0.1:5555"
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			sent = append(sent, float64(w.Body.Len()))
		}
		send(http.MethodGet, "/item?token=secret")
		send(http.MethodGet, "/straggle")
		hedgedTo := ""
		m.mu.Lock()
		for host, n := range m.hedges {
			if n == 1 {
				hedgedTo = "http://" + host
			}
		}
		m.mu.Unlock()
		send(http.MethodHead, "/item")
		send(http.MethodPost, "/item")
		send(http.MethodGet, "/fail")
		got := accessLines(t, &access)
		if len(got) != 5 {
			t.Fatalf("%d access lines for 5 requests:\n%s", len(got), access.b.String())
		}
		base := map[string]any{"level": "INFO", "msg": "access", "client": "127.0.0.1:5555", "route": "default"}
		want := []map[string]any{
			{"method": "GET", "path": "/item", "status": 200.0, "bytes": 6.0, "duration": "1ms", "attempts": 1.0, "hedged": false, "hedgeWon": false, "class": "GET /item"},
			{"method": "GET", "path": "/straggle", "status": 200.0, "bytes": 6.0, "duration": "11ms", "attempts": 2.0, "hedged": true, "hedgeWon": true, "class": "GET /straggle"},
			{"method": "HEAD", "path": "/item", "status": 200.0, "bytes": 0.0, "duration": "1ms", "attempts": 1.0, "hedged": false, "hedgeWon": false, "class": "HEAD /item"},
			{"method": "POST", "path": "/item", "status": 405.0, "duration": "0s", "attempts": 0.0, "hedged": false, "hedgeWon": false, "reason": "method"},
			{"method": "GET", "path": "/fail", "status": 502.0, "duration": "2ms", "attempts": 2.0, "hedged": true, "hedgeWon": false, "reason": "all_failed", "class": "GET /fail"},
		}
		for i, w := range want {
			for k, v := range base {
				w[k] = v
			}
			if i >= 3 {
				w["bytes"] = sent[i] // the JSON error's
			}
			if r, ok := got[i]["replica"].(string); ok && (r == "http://a.test" || r == "http://b.test") {
				w["replica"] = r // whichever answered: the picks are the set's
			}
			if len(got[i]) != len(w) {
				t.Errorf("line %d: %v\nwant %v", i, got[i], w)
				continue
			}
			for k, v := range w {
				if got[i][k] != v {
					t.Errorf("line %d: %s=%v, want %v\n%v", i, k, got[i][k], v, got[i])
				}
			}
		}
		for i, answered := range []bool{true, true, true, false, false} {
			if _, ok := got[i]["replica"]; ok != answered {
				t.Errorf("line %d: replica %v, want one: %v", i, got[i]["replica"], answered)
			}
		}
		if got[1]["replica"] != hedgedTo {
			t.Errorf("the hedge to %s won, but the line names %v", hedgedTo, got[1]["replica"])
		}
	})
}

// A client that leaves is logged, with status 0 as
// tailgate_requests_total counts it, before the handler aborts.
func TestAccessLogClientGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": time.Second})
		var access syncBuffer
		g, err := New(Config{Backends: memBackends[:1], Base: m, AccessLog: jsonLogger(&access), Policy: hedge.Policy{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		func() {
			defer func() {
				if p := recover(); p != http.ErrAbortHandler {
					t.Errorf("recovered %v, want http.ErrAbortHandler", p)
				}
			}()
			g.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, "/x", nil))
		}()
		got := accessLines(t, &access)
		// The replica it waited on, though it did not answer.
		if len(got) != 1 || got[0]["status"] != 0.0 || got[0]["reason"] != "client_gone" || got[0]["attempts"] != 1.0 ||
			got[0]["duration"] != "20ms" || got[0]["replica"] != "http://a.test" {
			t.Errorf("lines %v", got)
		}
	})
}

// A read that times out names the replicas it waited on, primary first.
func TestAccessLogTimeoutNamesReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": time.Second, "b.test": time.Second})
		var access syncBuffer
		g, err := New(Config{Backends: memBackends[:2], Base: m, AccessLog: jsonLogger(&access), Timeout: 50 * time.Millisecond,
			DisableProbation: true, Policy: hedge.Policy{Delay: 10 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		getIn(g, "/x")
		got := accessLines(t, &access)
		if len(got) != 1 || got[0]["reason"] != "timeout" || got[0]["attempts"] != 2.0 {
			t.Fatalf("lines %v", got)
		}
		if r := got[0]["replica"]; r != "http://a.test,http://b.test" && r != "http://b.test,http://a.test" {
			t.Errorf("replica %v, want both, primary first", r)
		}
	})
}

// A sample of 1/4 logs the requests whose random number falls in the
// lowest quarter of the range, and only those.
func TestAccessLogSample(t *testing.T) {
	m := newMemReplicas(map[string]time.Duration{"a.test": 0})
	var access syncBuffer
	g, err := New(Config{Backends: memBackends[:1], Base: m, AccessLog: jsonLogger(&access), AccessLogSample: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	draws := []uint64{0, 1 << 62, 1<<62 - 1, math.MaxUint64, 3 << 61}
	g.accessLog.rand = func() uint64 { d := draws[0]; draws = draws[1:]; return d }
	for i := range 5 {
		getIn(g, "/"+strconv.Itoa(i))
	}
	var paths []string
	for _, l := range accessLines(t, &access) {
		paths = append(paths, l["path"].(string))
	}
	if strings.Join(paths, " ") != "/0 /2" {
		t.Errorf("logged %v, want /0 and /2", paths)
	}
}

// Off, the access log costs a request nothing: not an allocation more
// than a request the sample leaves out, which costs none either.
func TestAccessLogOffAllocatesNothing(t *testing.T) {
	var access syncBuffer
	body := []byte(`{"value":"0123456789abcdef"}`)
	off, err := New(Config{Backends: []string{"http://127.0.0.1:1"}, Base: &cannedBackend{body: body}})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	sampled, err := New(Config{Backends: []string{"http://127.0.0.1:1"}, Base: &cannedBackend{body: body}, AccessLog: jsonLogger(&access), AccessLogSample: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	defer sampled.Close()
	sampled.accessLog.rand = func() uint64 { return math.MaxUint64 } // never in the sample
	req := httptest.NewRequest(http.MethodGet, "/item?id=1", nil)
	w := &discardWriter{h: http.Header{}}
	serve := func(g *Gateway) func() {
		return func() {
			clear(w.h)
			g.ServeHTTP(w, req)
		}
	}
	a, b := testing.AllocsPerRun(200, serve(off)), testing.AllocsPerRun(200, serve(sampled))
	if a != b || access.count("access") != 0 {
		t.Errorf("%v allocations per request with the access log off, %v with it on but not sampled (%d lines)", a, b, access.count("access"))
	}
	if n := testing.AllocsPerRun(200, func() { sampled.logAccess(req, time.Millisecond, served{code: 200}) }); n != 0 {
		t.Errorf("a request left out of the sample: %v allocations", n)
	}
}

func TestNewRejectsAccessLogSample(t *testing.T) {
	for _, f := range []float64{-0.1, 1.5, math.NaN(), math.Inf(1)} {
		if _, err := New(Config{Backends: []string{"http://127.0.0.1:1"}, AccessLogSample: f}); !errors.Is(err, ErrInvalid) {
			t.Errorf("sample %v: %v", f, err)
		}
	}
}
