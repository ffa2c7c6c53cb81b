package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
)

// hostOf returns the host in a backend URL.
func hostOf(backend string) string { return strings.TrimPrefix(backend, "http://") }

// A reload that adds a replica and removes another, while a slow read is
// in flight to the one removed: the read completes under the configuration
// it began with (its hedge, too, goes to a replica of that configuration,
// not to the newcomer); no read that arrives after the reload goes to the
// removed replica; the newcomer starts cold and is tried; the replica kept
// keeps its state; the removed replica's series go.
func TestReloadAddsAndDrainsReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 5 * time.Millisecond, "b.test": 5 * time.Millisecond, "c.test": 5 * time.Millisecond})
		cfg := Config{Backends: memBackends[:2], Base: m, Policy: fixedPolicy(50 * time.Millisecond), Replica: replica.Config{Seed: 1}}
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for range 20 {
			getIn(g, "/item")
		}
		m.mu.Lock()
		m.slowPaths["/slow"] = time.Second
		m.mu.Unlock()
		type answer struct {
			code int
			body string
		}
		slow := make(chan answer, 1)
		aBefore, _, _ := m.counts("a.test")
		go func() {
			code, body, _ := getIn(g, "/slow")
			slow <- answer{code, body}
		}()
		time.Sleep(10 * time.Millisecond) // the primary is out, its hedge due at 50ms
		synctest.Wait()
		primary, kept := "a.test", "http://b.test"
		if a, _, _ := m.counts("a.test"); a == aBefore {
			primary, kept = "b.test", "http://a.test"
		}
		old := g.Replicas()
		keptBefore := old.Snapshot(time.Now())
		hedgesBefore := map[string]int{}
		for _, h := range []string{"a.test", "b.test", "c.test"} {
			_, hedgesBefore[h], _ = m.counts(h)
		}

		cfg.Backends = []string{kept, "http://c.test"}
		res, err := g.Reload(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(res.Added, res.Removed) != fmt.Sprint([]string{"http://c.test"}, []string{"http://" + primary}) {
			t.Errorf("reload result %+v, want c added and %s removed", res, primary)
		}
		// The admin view shows the replica removed as draining while its
		// read is in flight, not only the new set.
		if d := g.Debug(time.Now()).Draining; len(d) != 1 || d[0].Name != "http://"+primary || d[0].InFlight != 1 {
			t.Errorf("draining while the read is in flight: %+v", d)
		}
		if _, body := adminGet(g, "/debug/replicas"); !strings.Contains(body, `"draining": [`) {
			t.Errorf("/debug/replicas without the draining replica:\n%s", body)
		}
		if ans := <-slow; ans.code != 200 {
			t.Errorf("read in flight across the reload: %d %q", ans.code, ans.body)
		}
		synctest.Wait() // the losing attempt's end
		if d := g.Debug(time.Now()).Draining; len(d) != 0 {
			t.Errorf("draining once its reads ended: %+v", d)
		}
		if _, h, _ := m.counts("c.test"); h != hedgesBefore["c.test"] {
			t.Error("a read that began before the reload sent its hedge to a replica added by it")
		}
		if st := old.Snapshot(time.Now()); st[0].InFlight+st[1].InFlight != 0 {
			t.Errorf("attempts still in flight on the old generation: %+v", st)
		}

		before, _, _ := m.counts(primary)
		for range 40 {
			if code, body, _ := getIn(g, "/item"); code != 200 || body == primary {
				t.Fatalf("read after the reload: %d from %q, the removed replica", code, body)
			}
		}
		if p, _, _ := m.counts(primary); p != before {
			t.Errorf("the removed replica got %d primaries after the reload", p-before)
		}
		if p, _, _ := m.counts("c.test"); p == 0 {
			t.Error("the added replica got no read of 40")
		}
		now := time.Now()
		set := g.Replicas()
		if set.Len() != 2 || set.Name(0) != kept || set.Name(1) != "http://c.test" {
			t.Fatalf("members after the reload: %v", set.Snapshot(now))
		}
		keptIdx := 1
		if old.Name(0) == kept {
			keptIdx = 0
		}
		if st := set.Snapshot(now)[0]; st.Picks <= keptBefore[keptIdx].Picks || st.Successes < keptBefore[keptIdx].Successes {
			t.Errorf("kept replica %+v, want its counts carried over from %+v", st, keptBefore[keptIdx])
		}
		got := replicaCounts(t, g)
		for k := range got {
			if strings.HasPrefix(k, primary+" ") {
				t.Errorf("series of the removed replica still exported: %s", k)
			}
		}
		if got["c.test primary won"] == 0 {
			t.Errorf("no series for the added replica: %v", got)
		}
	})
}

// Limits, timeout, budget and probation change with a reload; the
// engine and its budget stay the same objects, so their state carries
// over.
func TestReloadPolicyAndLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 5 * time.Millisecond, "b.test": 5 * time.Millisecond, "c.test": 5 * time.Millisecond})
		cfg := Config{Backends: memBackends, Base: m, Policy: hedge.Policy{Delay: 20 * time.Millisecond}}
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		h, b := g.Classes(), g.Classes().Budget()
		b.TrySpend()
		b.TrySpend()

		budget, _ := hedge.NewBudget(0.5, 5)
		cfg.Policy = hedge.Policy{Delay: 30 * time.Millisecond, MaxAttempts: 3, Budget: budget}
		cfg.MaxInFlightRequests, cfg.MaxInFlightAttempts, cfg.MaxInFlightShadows = 7, 9, 3
		cfg.Timeout = 40 * time.Millisecond
		cfg.Replica.Probation = replica.Probation{Factor: 5}
		if _, err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		p := h.Policy()
		if g.Classes() != h || p.Budget != b || p.Delay != 30*time.Millisecond || p.MaxAttempts != 3 || p.Timeout != 40*time.Millisecond {
			t.Errorf("engine after the reload: same %v, policy %+v", g.Classes() == h, p)
		}
		if b.Fraction() != 0.5 || b.Burst() != 5 || b.Credits() != 5 {
			t.Errorf("budget %v/%v with %v credits, want 0.5/5 and 8 credits cut to 5", b.Fraction(), b.Burst(), b.Credits())
		}
		if f, bu := gaugeValue(t, g, "tailgate_hedge_budget_fraction"), gaugeValue(t, g, "tailgate_hedge_budget_burst"); f != 0.5 || bu != 5 {
			t.Errorf("budget gauges %v/%v", f, bu)
		}
		in := g.Debug(time.Now()).InFlight
		if in.MaxRequests != 7 || in.MaxAttempts != 9 || in.MaxShadows != 3 {
			t.Errorf("limits %+v", in)
		}
		if f := g.Replicas().Config().Probation.Factor; f != 5 {
			t.Errorf("probation factor %v, want 5", f)
		}
		m.mu.Lock()
		m.slowPaths["/slow"] = time.Second
		m.mu.Unlock()
		start := time.Now()
		if code, _, _ := getIn(g, "/slow"); code != http.StatusGatewayTimeout || time.Since(start) != 40*time.Millisecond {
			t.Errorf("slow read: %d after %v, want 504 at the new 40ms timeout", code, time.Since(start))
		}
		synctest.Wait()
	})
}

// A configuration that fails validation, or changes what cannot change,
// is refused whole: the gateway runs on as it was.
func TestReloadRefusesAndKeepsRunning(t *testing.T) {
	m := newMemReplicas(map[string]time.Duration{})
	good := Config{Backends: memBackends[:2], Base: m, MaxInFlightRequests: 10, Policy: hedge.Policy{Delay: 20 * time.Millisecond}}
	g, err := New(good)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	set, policy := g.Replicas(), g.Classes().Policy()
	with := func(f func(c *Config)) Config {
		c := good
		c.Backends = memBackends // a change that must not happen either
		f(&c)
		return c
	}
	for name, cfg := range map[string]Config{
		"no backends":     with(func(c *Config) { c.Backends = nil }),
		"bad limit":       with(func(c *Config) { c.MaxInFlightRequests = -1 }),
		"bad policy":      with(func(c *Config) { c.Policy.MaxAttempts = 9 }),
		"bad probation":   with(func(c *Config) { c.Replica.Probation.Factor = 0.5 }),
		"tied":            with(func(c *Config) { c.Tied = true }),
		"protocol":        with(func(c *Config) { c.BackendProtocol = ProtocolH2C }),
		"header limit":    with(func(c *Config) { c.MaxResponseHeaderBytes = 2048 }),
		"adaptive window": with(func(c *Config) { c.Policy.Adaptive.Window = time.Minute }),
	} {
		if _, err := g.Reload(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if g.Replicas() != set || g.Classes().Policy().Delay != policy.Delay || g.Debug(time.Now()).InFlight.MaxRequests != 10 {
		t.Errorf("a refused reload changed the gateway: %d replicas, delay %v", g.Replicas().Len(), g.Classes().Policy().Delay)
	}
	if _, err := g.Reload(with(func(*Config) {})); err != nil || g.Replicas().Len() != 3 {
		t.Errorf("a good reload after refusals: %v, %d replicas", err, g.Replicas().Len())
	}
}

// /readyz turns 503 as a drain starts, and stays so; reads are still
// served.
func TestStartDrainMakesReadyz503(t *testing.T) {
	m := newMemReplicas(map[string]time.Duration{})
	g, err := New(Config{Backends: memBackends[:1], Base: m})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if code, _ := adminGet(g, "/readyz"); code != 200 {
		t.Fatalf("readyz %d before the drain", code)
	}
	g.StartDrain()
	if code, body := adminGet(g, "/readyz"); code != 503 || body != "draining\n" {
		t.Errorf("readyz during the drain: %d %q", code, body)
	}
	if code, _, _ := getIn(g, "/item"); code != 200 {
		t.Errorf("read during the drain: %d", code)
	}
}

// Through real sockets, on each server of plain-HTTP clients: a reload
// that raises the timeout above what the server's write limit (fixed when
// it was built) allows extends the write deadline of the requests that
// need it, so that their answers arrive.
func TestLoopbackReloadRaisedTimeoutExtendsWrites(t *testing.T) {
	defer func(s time.Duration) { serverSlack = s }(serverSlack)
	serverSlack = 50 * time.Millisecond
	a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond)
		io.WriteString(w, "late")
	})
	for _, plain := range plainServers {
		t.Run(plain, func(t *testing.T) {
			cfg := Config{Backends: []string{a.URL}, Policy: hedge.Policy{MaxAttempts: 1}, Timeout: 10 * time.Millisecond}
			g, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if w := g.Server(ServerConfig{}).WriteTimeout; w != 60*time.Millisecond {
				t.Fatalf("WriteTimeout %v, want the timeout and the slack", w)
			}
			addr := servePlain(t, g, plain)
			cfg.Timeout = time.Second
			if _, err := g.Reload(cfg); err != nil {
				t.Fatal(err)
			}
			client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
			defer client.CloseIdleConnections()
			resp, err := client.Get("http://" + addr + "/x")
			if err != nil {
				t.Fatalf("read taking 150ms with a 1s timeout, on a server built for 10ms: %v", err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "late" || err != nil {
				t.Errorf("%d %q %v", resp.StatusCode, body, err)
			}
		})
	}
}

// Reloads while reads run, on real time under the race detector: every
// read is answered, by a replica of the configuration it arrived under,
// and nothing is left in flight.
func TestReloadConcurrentWithReads(t *testing.T) {
	m := newMemReplicas(map[string]time.Duration{"a.test": time.Millisecond, "b.test": time.Millisecond, "c.test": 2 * time.Millisecond})
	cfg := Config{Backends: memBackends[:2], Base: m, Policy: hedge.Policy{Delay: time.Millisecond}, Replica: replica.Config{Probation: replica.Probation{Window: 50 * time.Millisecond, MinSamples: 1}}}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if code, body, _ := getIn(g, "/item"); code != 200 {
					t.Errorf("read during reloads: %d %s", code, body)
					return
				}
				g.Debug(time.Now())
			}
		})
	}
	for i := range 40 {
		cfg.Backends = memBackends[i%2 : i%2+2]
		cfg.MaxInFlightRequests = 100 + i
		cfg.Policy.Delay = time.Duration(1+i%3) * time.Millisecond
		if _, err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// A cancelled loser gives its attempt slot back when its call returns,
	// which may be a moment after the read it lost was answered.
	in := g.Debug(time.Now()).InFlight
	for deadline := time.Now().Add(time.Second); (in.Requests != 0 || in.Attempts != 0) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		in = g.Debug(time.Now()).InFlight
	}
	if in.Requests != 0 || in.Attempts != 0 {
		t.Errorf("in flight a second after the reads: %+v", in)
	}
}
