package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/discovery"
	"github.com/tailgate-dev/tailgate/replica"
)

// SetBackends changes the backends only: what the last Reload set stays,
// the Hedger and its budget credits stay, the replica kept keeps its
// counts and latency, the new one starts cold; backends the gateway would
// refuse change nothing.
func TestSetBackendsKeepsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 5 * time.Millisecond, "b.test": 5 * time.Millisecond, "c.test": 5 * time.Millisecond})
		budget, _ := hedge.NewBudget(0.5, 20)
		cfg := Config{Backends: memBackends[:2], Base: m, Policy: hedge.Policy{Delay: 2 * time.Millisecond, Budget: budget}, Replica: replica.Config{Seed: 1}}
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		cfg.Timeout, cfg.MaxInFlightRequests = 3*time.Second, 7
		if _, err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		for range 30 {
			getIn(g, "/item")
		}
		classes, credits := g.Classes(), g.Classes().Budget().Credits()
		before := g.Replicas().Snapshot(time.Now())

		res, err := g.SetBackends([]string{"http://b.test", "http://c.test"})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(res.Added, res.Removed) != "[http://c.test] [http://a.test]" {
			t.Errorf("result %+v", res)
		}
		v := g.view.Load()
		if v.cfg.Timeout != 3*time.Second || g.requests.max.Load() != 7 || v.cfg.Policy.Delay != 2*time.Millisecond {
			t.Errorf("the last reload's settings lost: timeout %v, max requests %d, delay %v", v.cfg.Timeout, g.requests.max.Load(), v.cfg.Policy.Delay)
		}
		b := g.Classes().Budget()
		if g.Classes() != classes || b.Credits() != credits || b.Fraction() != 0.5 || b.Burst() != 20 {
			t.Errorf("classes or budget changed: credits %v -> %v, rates %v/%v", credits, b.Credits(), b.Fraction(), b.Burst())
		}
		now := time.Now()
		after := g.Replicas().Snapshot(now)
		if after[0].Name != "http://b.test" || after[0].Picks != before[1].Picks || after[0].EWMA != before[1].EWMA {
			t.Errorf("kept replica %+v, want the state of %+v", after[0], before[1])
		}
		if after[1].Picks != 0 || after[1].EWMA != 0 {
			t.Errorf("new replica not cold: %+v", after[1])
		}

		set := g.Replicas()
		for _, bad := range [][]string{nil, {"http://b.test", "http://b.test"}, {"dns+http://b.test:80"}} {
			if _, err := g.SetBackends(bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("SetBackends(%v): %v, want ErrInvalid", bad, err)
			}
		}
		if g.Replicas() != set {
			t.Error("a refused SetBackends changed the replicas")
		}
	})
}

// A stale name shows in /readyz's body (readiness unchanged: the kept
// replicas serve), in /debug/replicas and in the series; without
// discovery, nothing of it shows.
func TestDiscoveryStatusShown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": time.Millisecond})
		g, err := New(Config{Backends: memBackends[:1], Base: m})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if code, body := adminGet(g, "/readyz"); code != 200 || body != "ready\n" {
			t.Errorf("readyz without discovery: %d %q", code, body)
		}
		if _, body := adminGet(g, "/metrics"); strings.Contains(body, "tailgate_discovery_") {
			t.Error("discovery series without discovery")
		}

		since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		g.SetDiscovery(func() []discovery.State {
			return []discovery.State{
				{Name: "dns+http://fresh.test:80", Backends: []string{"http://a.test"}, Errors: 1},
				{Name: "dns+http://stale.test:80", Backends: []string{"http://x.test", "http://y.test"}, Stale: true,
					Problem: "lookup stale.test: server misbehaving", Since: since, Errors: 4},
			}
		})
		want := "ready\ndiscovery stale: dns+http://stale.test:80: lookup stale.test: server misbehaving (since 2026-01-02T03:04:05Z; keeping 2 replicas)\n"
		if code, body := adminGet(g, "/readyz"); code != 200 || body != want {
			t.Errorf("readyz: %d %q, want 200 %q", code, body, want)
		}
		_, body := adminGet(g, "/debug/replicas")
		var d replicasView
		if err := json.Unmarshal([]byte(body), &d); err != nil {
			t.Fatal(err)
		}
		if len(d.Discovery) != 2 || !d.Discovery[1].Stale || d.Discovery[1].Errors != 4 || !strings.Contains(body, `"problem": "lookup stale.test`) {
			t.Errorf("debug: %+v", d.Discovery)
		}
		if n := sumCounter(t, g, "tailgate_discovery_errors_total"); n != 5 {
			t.Errorf("tailgate_discovery_errors_total sums to %v, want 5", n)
		}
		_, metrics := adminGet(g, "/metrics")
		for _, line := range []string{
			`tailgate_discovery_errors_total{name="dns+http://stale.test:80"} 4`,
			`tailgate_discovery_stale{name="dns+http://stale.test:80"} 1`,
			`tailgate_discovery_stale{name="dns+http://fresh.test:80"} 0`,
			`tailgate_discovery_replicas{name="dns+http://stale.test:80"} 2`,
		} {
			if !strings.Contains(metrics, line) {
				t.Errorf("metrics lack %s", line)
			}
		}

		// No replica at all: 503, and the stale name is still said.
		m.mu.Lock()
		m.fail["a.test"] = true
		m.mu.Unlock()
		for range 10 {
			if code, _, _ := getIn(g, "/fail"); code == http.StatusOK {
				t.Fatal("a read succeeded on a failing replica")
			}
		}
		if code, body := adminGet(g, "/readyz"); code != 503 || !strings.HasPrefix(body, "no replica available\ndiscovery stale: dns+http://stale.test:80") {
			t.Errorf("readyz, every breaker open: %d %q", code, body)
		}
	})
}
