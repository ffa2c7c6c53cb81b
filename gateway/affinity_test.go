package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/partition"
	"github.com/tailgate-dev/tailgate/replica"
)

// hosts returns n in-memory backends' URLs and host names: http://r0.test ...
func hosts(n int) (urls []string, latency map[string]time.Duration) {
	latency = map[string]time.Duration{}
	for i := range n {
		urls = append(urls, fmt.Sprintf("http://r%d.test", i))
		latency[fmt.Sprintf("r%d.test", i)] = time.Millisecond
	}
	return urls, latency
}

// newAffinityGateway returns a gateway in affinity mode over n in-memory
// replicas answering after 1ms. Its rounds run only when the test calls
// RebalanceAt (every hour otherwise).
func newAffinityGateway(t *testing.T, n int, cfg Config) (*Gateway, *memReplicas) {
	t.Helper()
	urls, latency := hosts(n)
	m := newMemReplicas(latency)
	cfg.Backends, cfg.Base = urls, m
	if cfg.Affinity == nil {
		cfg.Affinity = &Affinity{Key: "path"}
	}
	if cfg.Affinity.RebalanceEvery == 0 {
		cfg.Affinity.RebalanceEvery = time.Hour
	}
	if cfg.Replica.Seed == 0 {
		cfg.Replica.Seed = 1
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g, m
}

// hostsOf returns the host names of backend URLs.
func hostsOf(urls []string) []string {
	var out []string
	for _, u := range urls {
		out = append(out, strings.TrimPrefix(u, "http://"))
	}
	return out
}

// readFrom returns the hosts that got primaries or hedges since before.
func readFrom(m *memReplicas, before map[string]int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for h := range m.latency {
		if m.primaries[h]+m.hedges[h] > before[h] {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

func attemptsSoFar(m *memReplicas) map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for h := range m.latency {
		out[h] = m.primaries[h] + m.hedges[h]
	}
	return out
}

func mustGet(t *testing.T, g *Gateway, path string, hdr ...string) string {
	t.Helper()
	w := serveIn(g, http.MethodGet, path, nil, hdr...)
	if w.Code != 200 {
		t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	return w.Body.String()
}

// Every primary of a key goes to its home, its partition's first owner,
// though the other owner is as fast and as idle: the key is warm in one
// cache, not half warm in two.
func TestAffinityPrimariesGoHome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, m := newAffinityGateway(t, 6, Config{Policy: hedge.Policy{MaxAttempts: 1}})
		homes := map[string]bool{}
		for k := range 20 {
			key := fmt.Sprintf("/items/%d", k)
			owners := hostsOf(g.Partitions().OwnersAt(key, time.Now()).Replicas)
			before := attemptsSoFar(m)
			for range 20 {
				mustGet(t, g, key)
			}
			if got := readFrom(m, before); !slices.Equal(got, owners[:1]) {
				t.Fatalf("%s read from %v; want its home only, the first of %v", key, got, owners)
			}
			homes[owners[0]] = true
		}
		if len(homes) < 4 {
			t.Errorf("20 keys have %d homes among 6 replicas", len(homes))
		}
	})
}

func TestAffinityHedgeGoesToOtherOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, m := newAffinityGateway(t, 6, Config{Policy: fixedPolicy(10 * time.Millisecond)})
		for k := range 10 {
			key := fmt.Sprintf("/items/%d", k)
			owners := hostsOf(g.Partitions().OwnersAt(key, time.Now()).Replicas)
			// Every primary of this key straggles: the hedge answers.
			m.mu.Lock()
			m.slowFirst[key] = time.Second
			m.mu.Unlock()
			before := attemptsSoFar(m)
			_, hedgesBefore, _ := m.counts(owners[0])
			_, hedgesBefore1, _ := m.counts(owners[1])
			w := serveIn(g, http.MethodGet, key, nil)
			if w.Code != 200 {
				t.Fatalf("%s: %d", key, w.Code)
			}
			if got := readFrom(m, before); !slices.Equal(got, slices.Sorted(slices.Values(owners))) {
				t.Errorf("%s: primary and hedge went to %v, want its owners %v", key, got, owners)
			}
			_, h0, _ := m.counts(owners[0])
			_, h1, _ := m.counts(owners[1])
			if h0-hedgesBefore+h1-hedgesBefore1 != 1 || !slices.Contains(owners, w.Body.String()) {
				t.Errorf("%s: hedges %d, answer from %s", key, h0-hedgesBefore+h1-hedgesBefore1, w.Body)
			}
		}
	})
}

func TestAffinityOpenBreakerSendsKeyToOtherOwnerThenAnyReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, m := newAffinityGateway(t, 6, Config{
			Policy:  hedge.Policy{MaxAttempts: 1},
			Replica: replica.Config{FailureThreshold: 1, Cooldown: time.Hour},
		})
		key := "/fail/item"
		owners := hostsOf(g.Partitions().OwnersAt(key, time.Now()).Replicas)
		// The first owner fails once: its breaker opens for an hour.
		m.fail[owners[0]] = true
		for range 10 {
			serveIn(g, http.MethodGet, key, nil)
		}
		if st := g.Replicas().Snapshot(time.Now()); st[slices.Index(g.view.Load().cfg.Backends, "http://"+owners[0])].Breaker != replica.Open {
			t.Fatalf("owner %s's breaker did not open", owners[0])
		}
		before := attemptsSoFar(m)
		for range 10 {
			if body := mustGet(t, g, key); body != owners[1] {
				t.Fatalf("read from %s, want the other owner %s", body, owners[1])
			}
		}
		if got := readFrom(m, before); !slices.Equal(got, []string{owners[1]}) {
			t.Errorf("reads went to %v, want only %s", got, owners[1])
		}
		// Both owners' breakers open: the key is read from any other
		// replica rather than failed, and each such read is counted.
		m.fail[owners[1]] = true
		serveIn(g, http.MethodGet, key, nil)
		m.fail[owners[0]], m.fail[owners[1]] = false, false
		fallbacks := counterValue(t, g, "tailgate_affinity_fallbacks_total", "", "")
		for range 10 {
			if body := mustGet(t, g, key); slices.Contains(owners, body) {
				t.Fatalf("read from owner %s whose breaker is open", body)
			}
		}
		if n := counterValue(t, g, "tailgate_affinity_fallbacks_total", "", "") - fallbacks; n != 10 {
			t.Errorf("%v fallbacks counted, want 10", n)
		}
	})
}

func TestAffinityProbationHandsKeyToOtherOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, m := newAffinityGateway(t, 3, Config{Policy: hedge.Policy{MaxAttempts: 1}, Replica: quickProbation})
		// A key that r2 owns, and its other owner.
		var key, other string
		for k := 0; key == ""; k++ {
			if o := hostsOf(g.Partitions().OwnersAt(fmt.Sprintf("/k/%d", k), time.Now()).Replicas); slices.Contains(o, "r2.test") {
				key = fmt.Sprintf("/k/%d", k)
				other = o[0]
				if other == "r2.test" {
					other = o[1]
				}
			}
		}
		m.set("r2.test", 100*time.Millisecond)
		// Traffic over many keys, so that every replica is measured.
		for k := 0; !probationOf(g, 2).Status.OnProbation(); k++ {
			if k > 2000 {
				t.Fatalf("r2 not on probation: %+v", probationOf(g, 2))
			}
			mustGet(t, g, fmt.Sprintf("/k/%d", k%50))
			time.Sleep(5 * time.Millisecond)
		}
		before := attemptsSoFar(m)
		for range 20 {
			if body := mustGet(t, g, key); body != other {
				t.Fatalf("read from %s while r2 is on probation, want the other owner %s", body, other)
			}
		}
		if got := readFrom(m, before); !slices.Equal(got, []string{other}) {
			t.Errorf("reads went to %v", got)
		}
	})
}

func TestAffinityHotKeySpreadsOverKReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, m := newAffinityGateway(t, 8, Config{Policy: hedge.Policy{MaxAttempts: 1}})
		tab := g.Partitions()
		// A second of reads: a third of them one key, the rest spread.
		for s := range 3 {
			for i := range 300 {
				key := fmt.Sprintf("/cold/%d", i)
				if i%3 == 0 {
					key = "/hot"
				}
				mustGet(t, g, key)
			}
			time.Sleep(time.Second - 300*time.Millisecond) // each read took 1ms
			tab.RebalanceAt(time.Now())
			_ = s
		}
		o := tab.OwnersAt("/hot", time.Now())
		if !o.Hot || len(o.Replicas) != partition.DefaultHotReplicas {
			t.Fatalf("hot key: %+v", o)
		}
		before := attemptsSoFar(m)
		for range 200 {
			mustGet(t, g, "/hot")
		}
		if got, want := readFrom(m, before), slices.Sorted(slices.Values(hostsOf(o.Replicas))); !slices.Equal(got, want) {
			t.Errorf("hot key read from %v, want its %d replicas %v", got, len(want), want)
		}
		if o := tab.OwnersAt("/cold/1", time.Now()); o.Hot || len(o.Replicas) != 2 {
			t.Errorf("a cold key: %+v", o)
		}
	})
}

// With hot keys off, a partition too hot for any one home (here half the
// reads, 4× a replica's mean) is shared: its reads spread over both its
// owners rather than saturate its home.
func TestAffinityPartitionTooHotForOneHomeSpreads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, m := newAffinityGateway(t, 8, Config{Policy: hedge.Policy{MaxAttempts: 1},
			Affinity: &Affinity{Key: "path", Partitions: partition.Config{HotKeys: -1}}})
		tab := g.Partitions()
		for i := range 300 {
			key := fmt.Sprintf("/cold/%d", i)
			if i%2 == 0 {
				key = "/hot"
			}
			mustGet(t, g, key)
		}
		tab.RebalanceAt(time.Now())
		o := tab.OwnersAt("/hot", time.Now())
		if !o.Shared || o.Hot || len(o.Replicas) != 2 {
			t.Fatalf("the hot key's partition: %+v", o)
		}
		before := attemptsSoFar(m)
		for range 200 {
			mustGet(t, g, "/hot")
		}
		if got, want := readFrom(m, before), slices.Sorted(slices.Values(hostsOf(o.Replicas))); !slices.Equal(got, want) {
			t.Errorf("a shared partition's key read from %v, want both its owners %v", got, want)
		}
		if s, _ := g.partitionsState(); len(s.Shared) != 1 || s.Shared[0] != o.Partition {
			t.Errorf("/debug/partitions lists shared partitions %v, want [%d]", s.Shared, o.Partition)
		}
	})
}

func TestAffinityKeySources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct {
			key  string
			read func(t *testing.T, g *Gateway, k string) string
		}{
			{"query:id", func(t *testing.T, g *Gateway, k string) string {
				return mustGet(t, g, "/items?x=1&id="+strings.ReplaceAll(k, " ", "+")+"&id=zz")
			}},
			{"header:x-tenant", func(t *testing.T, g *Gateway, k string) string { return mustGet(t, g, "/items", "X-Tenant", k) }},
		} {
			g, m := newAffinityGateway(t, 6, Config{Policy: hedge.Policy{MaxAttempts: 1}, Affinity: &Affinity{Key: c.key}})
			for k := range 5 {
				key := fmt.Sprintf("user %d", k)
				owners := hostsOf(g.Partitions().OwnersAt(key, time.Now()).Replicas)
				for range 10 {
					if body := c.read(t, g, key); !slices.Contains(owners, body) {
						t.Fatalf("%s: key %q read from %s, owners %v", c.key, key, body, owners)
					}
				}
			}
			// A read without the key goes anywhere, and is counted.
			before := attemptsSoFar(m)
			for range 60 {
				mustGet(t, g, "/items")
			}
			if got := readFrom(m, before); len(got) < 4 {
				t.Errorf("%s: keyless reads went only to %v", c.key, got)
			}
			if n := counterValue(t, g, "tailgate_affinity_keyless_total", "", ""); n != 60 {
				t.Errorf("%s: %v keyless reads counted, want 60", c.key, n)
			}
		}
	})
}

func TestQueryValue(t *testing.T) {
	for _, c := range []struct{ q, name, want string }{
		{"id=7", "id", "7"},
		{"a=1&id=7&id=8", "id", "7"},
		{"idx=1&id=a%2Fb", "id", "a/b"},
		{"id=a+b", "id", "a b"},
		{"i%64=9", "id", "9"},
		{"id", "id", ""},
		{"id=%zz&id=2", "id", ""},
		{"", "id", ""},
		{"x=1", "id", ""},
	} {
		if got := queryValue(c.q, c.name); got != c.want {
			t.Errorf("queryValue(%q, %q) = %q, want %q", c.q, c.name, got, c.want)
		}
	}
}

func TestAffinityRoundsRunPeriodically(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newAffinityGateway(t, 3, Config{Affinity: &Affinity{Key: "path", RebalanceEvery: time.Second}})
		time.Sleep(3*time.Second + time.Millisecond)
		if n := g.Partitions().Snapshot().Rounds; n != 3 {
			t.Errorf("%d rounds in 3s, want 3", n)
		}
	})
}

func TestAffinityFollowsBackends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		urls, _ := hosts(9)
		g, m := newAffinityGateway(t, 8, Config{Policy: hedge.Policy{MaxAttempts: 1}})
		m.set("r8.test", time.Millisecond)
		before := g.Partitions().Snapshot().Assignment
		if _, err := g.SetBackends(urls); err != nil {
			t.Fatal(err)
		}
		s := g.Partitions().Snapshot()
		if len(s.Replicas) != 9 || s.Replicas[8].Partitions == 0 {
			t.Fatalf("the ninth backend owns nothing: %+v", s.Replicas)
		}
		moved := 0
		for p := range before {
			if !slices.Equal(before[p], s.Assignment[p]) {
				moved++
			}
		}
		t.Logf("adding a ninth backend changed the owners of %d of %d partitions", moved, len(before))
		// A key the new backend owns is read from it.
		for k := 0; ; k++ {
			key := fmt.Sprintf("/k/%d", k)
			if o := hostsOf(g.Partitions().OwnersAt(key, time.Now()).Replicas); slices.Contains(o, "r8.test") {
				seen := map[string]bool{}
				for range 20 {
					seen[mustGet(t, g, key)] = true
				}
				if !seen["r8.test"] {
					t.Errorf("key %s owned by %v never read from r8", key, o)
				}
				break
			}
		}
		// Removing it drops it from every partition.
		if _, err := g.SetBackends(urls[:8]); err != nil {
			t.Fatal(err)
		}
		for p, own := range g.Partitions().Snapshot().Assignment {
			if slices.Contains(own, urls[8]) {
				t.Fatalf("partition %d still owned by the removed backend", p)
			}
		}
	})
}

func TestAffinityConfigRefused(t *testing.T) {
	urls, _ := hosts(3)
	for _, c := range []struct {
		aff  Affinity
		want string
	}{
		{Affinity{Key: ""}, `affinity key ""`},
		{Affinity{Key: "paths"}, `affinity key "paths"`},
		{Affinity{Key: "query:"}, `affinity key "query:"`},
		{Affinity{Key: "query:a&b"}, `affinity key "query:a&b"`},
		{Affinity{Key: "header:bad name"}, `affinity key "header:bad name"`},
		{Affinity{Key: "cookie:x"}, `affinity key "cookie:x"`},
		{Affinity{Key: "path", RebalanceEvery: -1}, "negative rebalance interval"},
		{Affinity{Key: "path", Partitions: partition.Config{Owners: -1}}, "Owners -1"},
		{Affinity{Key: "path", Partitions: partition.Config{LoadBound: 0.5}}, "LoadBound"},
	} {
		_, err := New(Config{Backends: urls, Affinity: &c.aff})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrInvalid naming %s", c.aff, err, c.want)
		}
	}
}

func TestAffinityReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newAffinityGateway(t, 3, Config{})
		cfg := g.view.Load().cfg
		off := cfg
		off.Affinity = nil
		if _, err := g.Reload(off); err != nil || g.Partitions() != nil {
			t.Errorf("turning affinity off: %v, table %v", err, g.Partitions())
		}
		if _, err := g.Reload(cfg); err != nil || g.Partitions() == nil {
			t.Fatalf("turning affinity back on: %v", err)
		}
		more := cfg
		more.Affinity = &Affinity{Key: "path", RebalanceEvery: time.Hour, Partitions: partition.Config{Owners: 3}}
		if _, err := g.Reload(more); err == nil || !strings.Contains(err.Error(), "cannot change") {
			t.Errorf("changing the owners: %v", err)
		}
		key := cfg
		key.Affinity = &Affinity{Key: "query:id", RebalanceEvery: time.Hour}
		if _, err := g.Reload(key); err != nil {
			t.Fatalf("changing the key: %v", err)
		}
		owners := hostsOf(g.Partitions().OwnersAt("42", time.Now()).Replicas)
		for range 10 {
			if body := mustGet(t, g, "/any/path?id=42"); !slices.Contains(owners, body) {
				t.Fatalf("after reload, key 42 read from %s, owners %v", body, owners)
			}
		}
	})
}

func TestAffinityOffCostsNothing(t *testing.T) {
	urls, _ := hosts(3)
	g, err := New(Config{Backends: urls})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Partitions() != nil || len(g.view.Load().tables()) != 0 {
		t.Error("affinity state without Config.Affinity")
	}
}

// A key its home has not seen lately (cold) goes to its other owner while
// its home is busy, is counted as a spill, and its next reads follow it
// there, the home idle again; a warm key stays home however busy.
func TestAffinityColdKeySpillsPastBusyHomeAndStays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, m := newAffinityGateway(t, 4, Config{Policy: hedge.Policy{MaxAttempts: 1}})
		tab := g.Partitions()
		busy, cold := "/items/busy", ""
		home := tab.OwnersAt(busy, time.Now()).Replicas[0]
		for k := range 1000 { // a key of the same home, never read
			key := fmt.Sprintf("/items/cold-%d", k)
			if partitionOwners(tab, key)[0] == home {
				cold = key
				break
			}
		}
		if cold == "" {
			t.Fatal("no key with the same home")
		}
		m.mu.Lock()
		m.slowFirst[busy] = time.Second
		m.mu.Unlock()
		for range 4 { // four reads in flight at the home: busy (replica.Set.RouteCold)
			go serveIn(g, http.MethodGet, busy, nil)
		}
		synctest.Wait()
		owners := hostsOf(partitionOwners(tab, cold))
		before := attemptsSoFar(m)
		mustGet(t, g, cold)
		if got := readFrom(m, before); !slices.Equal(got, owners[1:2]) {
			t.Fatalf("cold key past a busy home read from %v; want its other owner %v", got, owners[1])
		}
		time.Sleep(2 * time.Second) // the busy reads end: the home is idle
		before = attemptsSoFar(m)
		mustGet(t, g, cold)
		if got := readFrom(m, before); !slices.Equal(got, owners[1:2]) {
			t.Fatalf("the spilled key's next read went to %v; want %v, where it is warm", got, owners[1])
		}
		s, _ := g.partitionsState()
		if s.Spills != 1 {
			t.Errorf("spills %d, want 1", s.Spills)
		}
		// A warm key of the busy home stays there.
		for range 4 {
			go serveIn(g, http.MethodGet, busy, nil)
		}
		synctest.Wait()
		before = attemptsSoFar(m)
		go serveIn(g, http.MethodGet, busy, nil)
		synctest.Wait()
		if got := readFrom(m, before); !slices.Equal(got, hostsOf([]string{home})) {
			t.Errorf("a warm key's read went to %v with its home busy; want its home", got)
		}
		time.Sleep(2 * time.Second)
	})
}

// partitionOwners returns key's owners without noting a read of it.
func partitionOwners(tab *partition.Table, key string) []string {
	s := tab.Snapshot()
	return s.Assignment[tab.Partition(key)]
}
