package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/memnet"
	"github.com/tailgate-dev/tailgate/replica"
)

// memReplicas answers from memory, by host: after the host's latency (in a
// synctest bubble, virtual time), 200 with the host's name, or 500 for
// paths starting /fail on hosts listed in fail. It counts primaries,
// hedges and shadows per host, and keeps the shadows' requests.
type memReplicas struct {
	mu        sync.Mutex
	latency   map[string]time.Duration
	slowPaths map[string]time.Duration // extra latency by path
	slowFirst map[string]time.Duration // extra latency of a primary (neither hedge nor shadow), by path
	fail      map[string]bool
	primaries map[string]int
	hedges    map[string]int
	shadows   map[string]int
	shadowed  []*http.Request
}

func newMemReplicas(latency map[string]time.Duration) *memReplicas {
	return &memReplicas{latency: latency, slowPaths: map[string]time.Duration{}, slowFirst: map[string]time.Duration{}, fail: map[string]bool{},
		primaries: map[string]int{}, hedges: map[string]int{}, shadows: map[string]int{}}
}

func (m *memReplicas) RoundTrip(r *http.Request) (*http.Response, error) {
	host := r.URL.Host
	var d time.Duration
	m.mu.Lock()
	switch {
	case r.Header.Get(ShadowHeader) != "":
		m.shadows[host]++
		m.shadowed = append(m.shadowed, r)
	case r.Header.Get(hedge.HedgeHeader) != "":
		m.hedges[host]++
	default:
		m.primaries[host]++
		d += m.slowFirst[r.URL.Opaque]
	}
	d += m.latency[host] + m.slowPaths[r.URL.Opaque]
	code := 200
	if m.fail[host] && strings.HasPrefix(r.URL.Opaque, "/fail") {
		code = 500
	}
	m.mu.Unlock()
	select {
	case <-time.After(d):
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(host)), Request: r}, nil
}

func (m *memReplicas) set(host string, d time.Duration) {
	m.mu.Lock()
	m.latency[host] = d
	m.mu.Unlock()
}

// counts returns the primaries, hedges and shadows host has seen.
func (m *memReplicas) counts(host string) (primaries, hedges, shadows int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.primaries[host], m.hedges[host], m.shadows[host]
}

// getIn sends one GET for path through g, in memory, and returns the
// status, the body and how long it took.
func getIn(g *Gateway, path string) (int, string, time.Duration) {
	start := time.Now()
	w := httptest.NewRecorder()
	g.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w.Code, w.Body.String(), time.Since(start)
}

func probationOf(g *Gateway, i int) replica.ProbationState {
	return *g.Replicas().Snapshot(time.Now())[i].Probation
}

// gaugeValue reads one gauge (or counter) from the gateway's registry, by
// its labels.
func gaugeValue(t *testing.T, g *Gateway, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for k := 0; k+1 < len(labels); k += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
					return l.GetName() == labels[k] && l.GetValue() == labels[k+1]
				}) {
					continue metrics
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

var memBackends = []string{"http://a.test", "http://b.test", "http://c.test"}

// quickProbation judges over a second, with ten shadows a second.
var quickProbation = replica.Config{Seed: 1, DecayTime: time.Millisecond,
	Probation: replica.Probation{Window: time.Second, MinSamples: 5, ShadowRate: 10}}

// untilProbation sends a request every 10ms (of virtual time) until
// replica i's probation status satisfies ok, for at most limit; it returns
// how long that took.
func untilProbation(t *testing.T, g *Gateway, i int, limit time.Duration, ok func(replica.ProbationStatus) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok(probationOf(g, i).Status) {
		if time.Since(start) > limit {
			t.Fatalf("replica %d after %v: %+v", i, limit, probationOf(g, i))
		}
		if code, body, _ := getIn(g, "/item?id=1"); code != 200 {
			t.Fatalf("status %d %s", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

func onProbation(s replica.ProbationStatus) bool  { return s.OnProbation() }
func offProbation(s replica.ProbationStatus) bool { return !s.OnProbation() }

// traffic sends a request every 10ms (of virtual time) for d and returns
// how long each took.
func traffic(t *testing.T, g *Gateway, d time.Duration) []time.Duration {
	t.Helper()
	var took []time.Duration
	for start := time.Now(); time.Since(start) < d; {
		code, body, dt := getIn(g, "/item?id=1")
		if code != 200 {
			t.Fatalf("status %d %s", code, body)
		}
		took = append(took, dt)
		time.Sleep(10 * time.Millisecond)
	}
	return took
}

// In virtual time, so every figure is exact: a replica that turns slow
// goes on probation after the window; then no client request goes there
// and every client request takes what the fast replicas take, while
// shadows, marked, measure the slow one at the configured rate; it comes
// back once its shadows show it recovered.
func TestProbationInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 5 * time.Millisecond, "b.test": 5 * time.Millisecond, "c.test": 5 * time.Millisecond})
		g, err := New(Config{Backends: memBackends, Base: m, Policy: hedge.Policy{MaxAttempts: 1}, Replica: quickProbation})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		traffic(t, g, time.Second)
		for i := range 3 {
			if p := probationOf(g, i); p.Status != replica.Serving || p.P50Ms != 5 {
				t.Fatalf("replica %d while all are fast: %+v", i, p)
			}
		}

		m.set("c.test", 100*time.Millisecond)
		took := untilProbation(t, g, 2, 10*time.Second, onProbation)
		if took < time.Second || took > 3*time.Second {
			t.Errorf("on probation %v after turning slow, want the 1s window and a little more", took)
		}
		p := probationOf(g, 2)
		if p.Status != replica.OnProbation || p.Entries != 1 || !strings.HasPrefix(p.Reason, "p50 100ms is 20.0x peers' 5ms for 1") {
			t.Errorf("on probation: %+v", p)
		}

		// On probation for 2s: clients see only the fast replicas, at
		// 5ms each, shadows or not; c sees shadows only, 10 a second.
		primaries, hedges, shadows := m.counts("c.test")
		for _, dt := range traffic(t, g, 2*time.Second) {
			if dt != 5*time.Millisecond {
				t.Fatalf("a client request took %v on probation, want the fast replicas' 5ms", dt)
			}
		}
		time.Sleep(200 * time.Millisecond) // for the last shadow to finish
		p2, h2, s2 := m.counts("c.test")
		if p2 != primaries || h2 != hedges {
			t.Errorf("replica on probation got %d primaries and %d hedges", p2-primaries, h2-hedges)
		}
		if n := s2 - shadows; n < 19 || n > 21 {
			t.Errorf("%d shadows in 2s at 10/s", n)
		}
		m.mu.Lock()
		for _, r := range m.shadowed {
			if r.Header.Get(ShadowHeader) != "1" || r.Method != http.MethodGet || r.URL.Host != "c.test" || r.URL.RequestURI() != "/item?id=1" ||
				r.Header.Get(deadline.Header) == "" || r.Header.Get("X-Forwarded-Host") == "" {
				t.Errorf("shadow %s %s %v", r.Method, r.URL, r.Header)
			}
		}
		m.mu.Unlock()
		if n := gaugeValue(t, g, "tailgate_shadow_requests_total", "outcome", "success"); n != float64(s2) {
			t.Errorf("tailgate_shadow_requests_total{success} = %v, want %d", n, s2)
		}
		if n := gaugeValue(t, g, "tailgate_replica_attempts_total", "replica", "http://c.test", "role", "shadow", "outcome", "answered"); n != float64(s2) {
			t.Errorf("tailgate_replica_attempts_total{c, shadow, answered} = %v, want %d", n, s2)
		}
		if v := gaugeValue(t, g, "tailgate_replica_probation", "replica", "http://c.test"); v != 1 {
			t.Errorf("tailgate_replica_probation{c} = %v", v)
		}
		if v := gaugeValue(t, g, "tailgate_replica_probation", "replica", "http://a.test"); v != 0 {
			t.Errorf("tailgate_replica_probation{a} = %v", v)
		}
		if v := gaugeValue(t, g, "tailgate_probation_transitions_total", "replica", "http://c.test", "to", "probation"); v != 1 {
			t.Errorf("transitions to probation = %v", v)
		}
		if v := gaugeValue(t, g, "tailgate_replica_latency_p50_seconds", "replica", "http://c.test"); v != 0.1 {
			t.Errorf("c's p50 = %v", v)
		}
		d := g.replicasState(time.Now())
		if d.Probation.OnProbation != 1 || d.Probation.MaxOnProbation != 1 || !d.Probation.Enabled || d.Probation.Shadows["success"] != int64(s2) ||
			d.Replicas[2].Probation.Status != replica.OnProbation || d.Replicas[2].Probation.Shadows != uint64(s2) {
			t.Errorf("debug: %+v, c: %+v", d.Probation, d.Replicas[2].Probation)
		}

		// c recovers: its shadows show it, and it comes back.
		m.set("c.test", 5*time.Millisecond)
		took = untilProbation(t, g, 2, 10*time.Second, offProbation)
		if took < time.Second || took > 3*time.Second {
			t.Errorf("back %v after recovering, want the 1s window and a little more", took)
		}
		if p := probationOf(g, 2); p.Exits != 1 || !strings.HasPrefix(p.Reason, "came off probation: p50 5ms is 1.0x") {
			t.Errorf("after recovery: %+v", p)
		}
		traffic(t, g, time.Second)
		if p3, _, _ := m.counts("c.test"); p3 == p2 {
			t.Error("no primaries for the recovered replica in 1s")
		}
		if v := gaugeValue(t, g, "tailgate_probation_transitions_total", "replica", "http://c.test", "to", "serving"); v != 1 {
			t.Errorf("transitions to serving = %v", v)
		}
	})
}

// Shadows never outlive Close: one hanging is cancelled and waited for
// (and counted as canceled), and none is sent after. While one hangs and
// holds the only slot, the next ones due are skipped.
func TestCloseCancelsShadows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 5 * time.Millisecond, "b.test": 5 * time.Millisecond, "c.test": 100 * time.Millisecond})
		g, err := New(Config{Backends: memBackends, Base: m, Policy: hedge.Policy{MaxAttempts: 1}, Replica: quickProbation,
			MaxInFlightShadows: 1, ShadowTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		untilProbation(t, g, 2, 10*time.Second, onProbation)
		m.set("c.test", time.Hour)
		traffic(t, g, time.Second)
		if v := gaugeValue(t, g, "tailgate_shadow_requests_total", "outcome", "skipped"); v < 5 {
			t.Errorf("%v shadows skipped while one held the only slot for 1s at 10/s", v)
		}
		if n := g.replicasState(time.Now()).InFlight.Shadows; n != 1 {
			t.Errorf("%d shadows in flight, want the one hanging", n)
		}
		_, _, before := m.counts("c.test")
		g.Close() // returns only once the hanging shadow has ended
		if v := gaugeValue(t, g, "tailgate_shadow_requests_total", "outcome", "canceled"); v != 1 {
			t.Errorf("%v shadows canceled by Close, want 1", v)
		}
		if v := gaugeValue(t, g, "tailgate_replica_attempts_total", "replica", "http://c.test", "role", "shadow", "outcome", "canceled"); v != 1 {
			t.Errorf("tailgate_replica_attempts_total{c, shadow, canceled} = %v, want 1", v)
		}
		if st := g.Replicas().Snapshot(time.Now())[2]; st.InFlight != 0 {
			t.Errorf("replica c: %d in flight after Close", st.InFlight)
		}
		// Requests are still served; no shadow goes out.
		traffic(t, g, time.Second)
		if _, _, after := m.counts("c.test"); after != before {
			t.Errorf("%d shadows sent after Close", after-before)
		}
		if n := g.replicasState(time.Now()).InFlight.Shadows; n != 0 {
			t.Errorf("%d shadow slots held after Close", n)
		}
	})
}

// A hedge never goes to a replica on probation (with two replicas, it is
// not sent: no target); an attempt after a failure does, when nothing else
// is left, since a slow answer beats an error.
func TestProbationHedgesAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 5 * time.Millisecond, "b.test": 100 * time.Millisecond})
		budget, _ := hedge.NewBudget(1, 1000)
		g, err := New(Config{Backends: memBackends[:2], Base: m, Replica: quickProbation,
			Policy: hedge.Policy{Delay: 50 * time.Millisecond, MaxAttempts: 2, Budget: budget, Gate: hedge.Gate{Disabled: true}}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		// b's primaries are hedged at 50ms and lose to a: cancelled after
		// 55ms, a lower bound 11 times a's latency, enough for probation.
		untilProbation(t, g, 1, 10*time.Second, onProbation)

		_, hedges, _ := m.counts("b.test")
		m.mu.Lock()
		m.slowPaths["/slow"] = 200 * time.Millisecond
		m.mu.Unlock()
		code, body, took := getIn(g, "/slow")
		if _, h, _ := m.counts("b.test"); code != 200 || body != "a.test" || took != 205*time.Millisecond || h != hedges {
			t.Errorf("/slow: %d %q in %v, %d hedges to b; want a's answer after 205ms, no hedge to b", code, body, took, h-hedges)
		}
		if v := counterValue(t, g, "tailgate_hedges_suppressed_total", "reason", "noTarget"); v < 1 {
			t.Errorf("hedges suppressed for no target: %v", v)
		}

		m.mu.Lock()
		m.fail["a.test"] = true
		m.mu.Unlock()
		code, body, took = getIn(g, "/fail")
		if code != 200 || body != "b.test" || took != 105*time.Millisecond {
			t.Errorf("/fail: %d %q in %v; want b's answer (the retry) after 105ms", code, body, took)
		}
	})
}

func TestProbationDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 5 * time.Millisecond, "b.test": 5 * time.Millisecond, "c.test": 100 * time.Millisecond})
		g, err := New(Config{Backends: memBackends, Base: m, Policy: hedge.Policy{MaxAttempts: 1}, Replica: quickProbation, DisableProbation: true})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		traffic(t, g, 5*time.Second)
		d := g.replicasState(time.Now())
		if d.Probation.Enabled || d.Probation.OnProbation != 0 || d.Probation.MaxOnProbation != 0 || d.Replicas[2].Probation != nil {
			t.Errorf("probation off: %+v, c: %+v", d.Probation, d.Replicas[2].Probation)
		}
		if _, _, n := m.counts("c.test"); n != 0 {
			t.Errorf("%d shadows with probation off", n)
		}
		mfs, _ := g.Registry().Gather()
		for _, mf := range mfs {
			if mf.GetName() == "tailgate_replica_probation" {
				t.Error("probation gauges with probation off")
			}
		}
	})
}

// Four clients, each a request at a time, with no pause, in virtual time:
// a replica made slow mid-run goes on probation; then no client request
// goes there (every one takes the fast replicas' 1ms, none waits for it)
// while shadows, marked, measure it at the configured rate; /metrics and
// /debug/replicas show it; it comes back when fast again and gets client
// requests.
func TestProbationKeepsConcurrentClientsOffSlowReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		var slow atomic.Int64 // c's extra latency, ns
		var cPrimaries, cShadows atomic.Int32
		var badShadow atomic.Value
		fast := func(b *backend, w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(ShadowHeader) != "" {
				badShadow.Store("shadow to " + b.name)
			}
			if memnet.Sleep(r.Context(), time.Millisecond) {
				io.WriteString(w, b.name)
			}
		}
		a := newMemBackend(net, "a", fast)
		b := newMemBackend(net, "b", fast)
		c := newMemBackend(net, "c", func(b *backend, w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(ShadowHeader) == "1" {
				cShadows.Add(1)
			} else {
				cPrimaries.Add(1)
			}
			if memnet.Sleep(r.Context(), time.Millisecond+time.Duration(slow.Load())) {
				io.WriteString(w, b.name)
			}
		})
		g := newMemGateway(t, net, Config{Policy: hedge.Policy{MaxAttempts: 1}, Replica: replica.Config{DecayTime: time.Millisecond,
			Probation: replica.Probation{Window: 300 * time.Millisecond, MinSamples: 5, ShadowRate: 20}}}, a, b, c)

		// Four clients, each a request at a time, until stop; latencies
		// are kept while record is set.
		var (
			mu     sync.Mutex
			record bool
			took   []time.Duration
			wg     sync.WaitGroup
			stop   atomic.Bool
		)
		defer func() { stop.Store(true); wg.Wait() }()
		for range 4 {
			wg.Go(func() {
				for !stop.Load() {
					start := time.Now()
					w := serveIn(g, http.MethodGet, "/item", nil)
					if w.Code != 200 {
						t.Errorf("client: status %d %q", w.Code, w.Body)
						return
					}
					mu.Lock()
					if record {
						took = append(took, time.Since(start))
					}
					mu.Unlock()
				}
			})
		}
		// waitFor checks every 10ms (of virtual time) for c's status.
		waitFor := func(what string, limit time.Duration, ok func(replica.ProbationStatus) bool) time.Duration {
			t.Helper()
			start := time.Now()
			for !ok(probationOf(g, 2).Status) {
				if time.Since(start) > limit {
					t.Fatalf("replica c not %s after %v: %+v", what, limit, probationOf(g, 2))
				}
				time.Sleep(10 * time.Millisecond)
			}
			return time.Since(start)
		}
		time.Sleep(300 * time.Millisecond)
		if p := probationOf(g, 2); p.Status != replica.Serving || p.Entries != 0 {
			t.Fatalf("c while every replica is fast: %+v", p)
		}
		const slowLatency = 200 * time.Millisecond
		slow.Store(int64(slowLatency))
		entered := waitFor("on probation", 5*time.Second, onProbation)
		if entered < 300*time.Millisecond || entered > 2*time.Second {
			t.Errorf("on probation %v after turning slow, want the 300ms window and a few more (c gets few primaries to judge once slow)", entered)
		}

		// Primaries picked just before probation began may still be running.
		time.Sleep(slowLatency + 50*time.Millisecond)
		primaries, shadows := cPrimaries.Load(), cShadows.Load()
		mu.Lock()
		record = true
		mu.Unlock()
		time.Sleep(time.Second)
		mu.Lock()
		record = false
		lat := slices.Clone(took)
		mu.Unlock()
		if p := probationOf(g, 2); !p.Status.OnProbation() || p.Entries != 1 {
			t.Fatalf("c left probation while still slow: %+v", p)
		}
		if n := cPrimaries.Load() - primaries; n != 0 {
			t.Errorf("c got %d client requests on probation", n)
		}
		nShadows := cShadows.Load() - shadows
		if nShadows < 19 || nShadows > 21 {
			t.Errorf("c got %d shadows in 1s at 20/s", nShadows)
		}
		// Four clients at 1ms a request, for 1s: 1000 each, give or take
		// the one finishing as recording starts and the one as it stops.
		if len(lat) < 3996 || len(lat) > 4004 {
			t.Errorf("%d requests in 1s from four clients at 1ms each", len(lat))
		}
		for _, d := range lat {
			if d != time.Millisecond {
				t.Fatalf("a client request took %v on probation, want the fast replicas' 1ms", d)
			}
		}
		if v, _ := badShadow.Load().(string); v != "" {
			t.Error(v)
		}

		_, body := adminGet(g, "/metrics")
		for _, series := range []string{
			`tailgate_replica_probation{replica="` + c.URL + `"} 1`,
			`tailgate_replica_probation{replica="` + a.URL + `"} 0`,
			`tailgate_probation_transitions_total{replica="` + c.URL + `",to="probation"} 1`,
			`tailgate_shadow_requests_total{outcome="success"}`,
			`tailgate_in_flight{kind="shadows"}`,
		} {
			if !strings.Contains(body, series) {
				t.Errorf("/metrics lacks %s", series)
			}
		}
		_, body = adminGet(g, "/debug/replicas")
		var d struct {
			Replicas []struct {
				Name      string
				Probation struct {
					Status, Reason string
					Since          time.Time
					Shadows        int
				}
			}
			Probation struct {
				OnProbation, MaxOnProbation int
				Shadows                     map[string]int
			}
		}
		if err := json.Unmarshal([]byte(body), &d); err != nil {
			t.Fatal(err)
		}
		cp := d.Replicas[2].Probation
		if cp.Status != "probation" || !strings.Contains(cp.Reason, "x peers' ") || cp.Since.IsZero() || cp.Shadows == 0 ||
			d.Probation.OnProbation != 1 || d.Probation.MaxOnProbation != 1 || d.Probation.Shadows["success"] == 0 {
			t.Errorf("/debug/replicas: %s", body)
		}

		slow.Store(0)
		left := waitFor("back", 5*time.Second, offProbation)
		if left < 300*time.Millisecond || left > 2*time.Second {
			t.Errorf("back %v after recovering, want the 300ms window and a little more", left)
		}
		if p := probationOf(g, 2); p.Exits != 1 {
			t.Errorf("after recovery: %+v", p)
		}
		primaries = cPrimaries.Load()
		time.Sleep(500 * time.Millisecond)
		if cPrimaries.Load() == primaries {
			t.Error("no client requests for c in 500ms after it came back")
		}
		t.Logf("on probation %v after turning slow, back %v after recovering; on probation: %d client requests, %d shadows in 1s",
			entered, left, len(lat), nShadows)
	})
}
