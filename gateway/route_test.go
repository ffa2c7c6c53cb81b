package gateway

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

func TestRouteMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, host, path string
		want                bool
	}{
		{"/search", "h", "/search", true},
		{"/search", "h", "/search/", false},
		{"/search", "h", "/searches", false},
		{"/search", "h", "/search/x", false},
		{"/api/", "h", "/api/", true},
		{"/api/", "h", "/api/v1/x", true},
		{"/api/", "h", "/api", false},
		{"/api/", "h", "/apix/", false},
		{"/", "h", "/anything/at/all", true},
		{"/", "h", "/", true},
		{"/{$}", "h", "/", true},
		{"/{$}", "h", "/x", false},
		{"/api/{$}", "h", "/api/", true},
		{"/api/{$}", "h", "/api/x", false},
		{"/api/{$}", "h", "/api", false},
		{"/items/{id}", "h", "/items/42", true},
		{"/items/{id}", "h", "/items/", false},
		{"/items/{id}", "h", "/items/42/x", false},
		{"/items/{id}/reviews", "h", "/items/42/reviews", true},
		{"/files/{path...}", "h", "/files/a/b/c", true},
		{"/files/{path...}", "h", "/files/", true},
		{"/files/{path...}", "h", "/files", false},
		{"/a%2Fb", "h", "/a%2Fb", true},
		{"/a%2Fb", "h", "/a/b", false},
		{"/a b", "h", "/a%20b", false}, // refused at compile: see below
		{"api.example.com/", "API.example.com:8080", "/x", true},
		{"api.example.com/", "other.example.com", "/x", false},
	} {
		m, err := compileMatch(c.pattern)
		if c.pattern == "/a b" {
			if err == nil {
				t.Errorf("%q compiled", c.pattern)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		if got := m.matches(c.host, c.path); got != c.want {
			t.Errorf("%q on %s%s: %v, want %v", c.pattern, c.host, c.path, got, c.want)
		}
	}
	for _, bad := range []string{"", "search", "GET /x", "/x/{$}/y", "/{a...}/b", "/x{id}", "/{}", "/{1a}", "/a//b", "h{x}/", "/%zz"} {
		if _, err := compileMatch(bad); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}

func TestRouteMatchDoesNotAllocate(t *testing.T) {
	m, _ := compileMatch("/api/{version}/items/{id}")
	if n := testing.AllocsPerRun(100, func() { m.matches("h", "/api/v2/items/42") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// routeHosts are the replicas of the routes tests: a and b the top-level
// pool, c and d the search service's.
var routeHosts = map[string]time.Duration{"a.test": time.Millisecond, "b.test": time.Millisecond, "c.test": time.Millisecond, "d.test": time.Millisecond}

func newRoutesGateway(t *testing.T, m *memReplicas, mutate func(*Config)) *Gateway {
	t.Helper()
	cfg := Config{
		Backends: []string{"http://a.test", "http://b.test"},
		Base:     m,
		Routes: []Route{
			{Name: "search", Match: "/search", Backends: []string{"http://c.test", "http://d.test"}, Delay: 30 * time.Millisecond, HedgeFraction: 0.5},
			{Name: "items", Match: "/items/{id}", Delay: 5 * time.Millisecond, Class: "item"},
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Two services behind one gateway: each route's reads reach only its
// pool, under its own settings; the reads no route takes go to the
// top-level backends.
func TestRoutesReachOnlyTheirPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(routeHosts)
		g := newRoutesGateway(t, m, nil)
		defer g.Close()
		for i := range 20 {
			for _, path := range []string{"/search?q=" + strconv.Itoa(i), "/items/" + strconv.Itoa(i), "/other"} {
				if code, body, _ := getIn(g, path); code != 200 {
					t.Fatalf("%s: %d %s", path, code, body)
				}
			}
		}
		for _, h := range []string{"a.test", "b.test", "c.test", "d.test"} {
			p, hedges, _ := m.counts(h)
			t.Logf("%s: %d primaries, %d hedges", h, p, hedges)
		}
		ap, _, _ := m.counts("a.test")
		bp, _, _ := m.counts("b.test")
		cp, _, _ := m.counts("c.test")
		dp, _, _ := m.counts("d.test")
		if ap+bp != 40 || cp+dp != 20 {
			t.Errorf("top-level pool %d primaries, search's %d: want 40 and 20", ap+bp, cp+dp)
		}
		if got := counterValue2(t, g, "tailgate_requests_total", "route", "search", "code", "200"); got != 20 {
			t.Errorf("tailgate_requests_total{route=search} %v", got)
		}
		rs := g.routesState()
		if len(rs) != 3 || rs[0].Name != DefaultRoute || rs[1].Name != "search" || rs[1].Pool != "search" || rs[2].Pool != DefaultRoute {
			t.Fatalf("routes %+v", rs)
		}
		if rs[1].Delay != "30ms" || rs[1].BudgetFraction != 0.5 || rs[0].BudgetFraction != hedge.DefaultBudgetFraction {
			t.Errorf("search route %+v", rs[1])
		}
		if len(rs[2].Classes) != 1 || rs[2].Classes[0].Class != "item" || rs[2].Classes[0].Reads != 20 {
			t.Errorf("items route's classes %+v: want one class, item, of 20 reads", rs[2].Classes)
		}
		if len(rs[0].Classes) != 1 || rs[0].Classes[0].Class != "GET /other" {
			t.Errorf("default route's classes %+v", rs[0].Classes)
		}
	})
}

// One pool overloaded (every read slow, wherever it goes: hedges lose)
// shuts its own classes' gates, not those of a class on another pool,
// whose stragglers its hedges still win.
func TestPoolOverloadDoesNotGateAnotherPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": time.Millisecond, "b.test": time.Millisecond,
			"c.test": 50 * time.Millisecond, "d.test": 50 * time.Millisecond})
		m.slowFirst["/x/9"] = 40 * time.Millisecond // the top-level pool's stragglers: slow as primaries only
		budget, _ := hedge.NewBudget(1, 1000)
		g := newRoutesGateway(t, m, func(c *Config) {
			c.Policy = hedge.Policy{Delay: 10 * time.Millisecond, Budget: budget}
			c.Routes = []Route{{Name: "search", Match: "/search", Backends: []string{"http://c.test", "http://d.test"}, Delay: 10 * time.Millisecond, HedgeFraction: 1}}
		})
		defer g.Close()
		for i := range 60 {
			getIn(g, "/search")
			path := "/x/1"
			if i%4 == 3 {
				path = "/x/9"
			}
			if _, _, took := getIn(g, path); i > 20 && path == "/x/9" && took > 20*time.Millisecond {
				t.Errorf("read %d of the healthy pool's straggler took %v: its hedge was held", i, took)
			}
			time.Sleep(10 * time.Millisecond)
		}
		search := g.view.Load().routes[0].keep.classes.Hedger("GET /search").Stats().Gate
		item := g.Classes().Hedger("GET /x/{id}").Stats().Gate
		if search.Open() {
			t.Errorf("the saturated pool's gate is open: %s", search)
		}
		if !item.Open() || item.HedgeWins == 0 {
			t.Errorf("the healthy pool's gate: %s (wins %d)", item, item.HedgeWins)
		}
	})
}

// Every breaker of one pool open: that pool's classes see it (the gate's
// unavailable signal), the other pool's do not.
func TestPoolBreakersGateOnlyTheirPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(routeHosts)
		m.fail["c.test"], m.fail["d.test"] = true, true
		g := newRoutesGateway(t, m, func(c *Config) {
			c.Routes = []Route{{Name: "broken", Match: "/fail/", Backends: []string{"http://c.test", "http://d.test"}}}
		})
		defer g.Close()
		for range 30 {
			getIn(g, "/fail/x")
			getIn(g, "/ok")
			time.Sleep(10 * time.Millisecond)
		}
		broken := g.view.Load().routes[0].keep.classes.Hedger("GET /fail/x").Stats().Gate
		ok := g.Classes().Hedger("GET /ok").Stats().Gate
		if broken.Load.Unavailable != 1 || ok.Load.Unavailable != 0 {
			t.Errorf("unavailable: broken pool's classes see %v, the healthy pool's %v; want 1 and 0", broken.Load.Unavailable, ok.Load.Unavailable)
		}
		if broken.Shut&hedge.GateUnavailable == 0 || !ok.Open() {
			t.Errorf("gates: broken %s; healthy %s", broken, ok)
		}
	})
}

// A route may be matched by host, and takes only its methods; a read of
// another method goes on to the next route, or, as a read no route takes,
// to the top-level settings: a method other than GET and HEAD is refused.
func TestRoutesMatchHostAndMethods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(routeHosts)
		g := newRoutesGateway(t, m, func(c *Config) {
			c.Routes = []Route{
				{Name: "api-head", Match: "api.example.com/", Methods: []string{"HEAD"}, Backends: []string{"http://c.test"}},
				{Name: "api", Match: "api.example.com/", Backends: []string{"http://d.test"}},
			}
		})
		defer g.Close()
		for _, c := range []struct{ method, host, want string }{
			{"HEAD", "api.example.com", "c.test"},
			{"GET", "api.example.com:8080", "d.test"},
			{"GET", "www.example.com", "a.test b.test"},
		} {
			r := httptest.NewRequest(c.method, "/v1/thing", nil)
			r.Host = c.host
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code != 200 {
				t.Errorf("%s %s: %d", c.method, c.host, w.Code)
			}
			if body := w.Body.String(); c.method == "GET" && !strings.Contains(c.want, body) {
				t.Errorf("%s %s went to %q, want %s", c.method, c.host, body, c.want)
			}
		}
		w := serveIn(g, http.MethodPost, "/v1/thing", nil)
		if w.Code != http.StatusMethodNotAllowed {
			t.Errorf("POST: %d", w.Code)
		}
	})
}

// A fixed delay below a class's median is warned of, once.
func TestRouteWarnsFixedDelayBelowMedian(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 20 * time.Millisecond, "b.test": 20 * time.Millisecond})
		var log syncBuffer
		g, err := New(Config{Backends: []string{"http://a.test", "http://b.test"}, Base: m, Logger: slog.New(slog.NewTextHandler(&log, nil)),
			Routes: []Route{{Name: "search", Match: "/search", Delay: 5 * time.Millisecond}}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for range 30 {
			getIn(g, "/search")
			time.Sleep(20 * time.Millisecond)
		}
		if n := log.count("hedge delay below a class's median latency"); n != 1 {
			t.Errorf("%d warnings, want 1:\n%s", n, log.b.String())
		}
		if !strings.Contains(log.b.String(), `route=search class="GET /search" delay=5ms`) {
			t.Errorf("warning does not name the route, class and delay:\n%s", log.b.String())
		}
	})
}

// A reload that brings an invalid route changes nothing; one that changes
// a route keeps what its classes learnt; routes come and go.
func TestReloadRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(routeHosts)
		g := newRoutesGateway(t, m, nil)
		defer g.Close()
		getIn(g, "/search")
		cfg := g.view.Load().cfg
		classes := g.view.Load().routes[0].keep.classes
		bad := cfg
		bad.Routes = append([]Route{}, cfg.Routes...)
		bad.Routes[1].Backends = []string{"http://c.test"} // the search pool's
		if _, err := g.Reload(bad); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "already in pool search") {
			t.Fatalf("a replica in two pools: %v", err)
		}
		if g.view.Load().cfg.Routes[1].Backends != nil {
			t.Fatal("a refused reload changed the routes")
		}
		next := cfg
		next.Routes = []Route{cfg.Routes[0]}
		next.Routes[0].Delay = 40 * time.Millisecond
		if _, err := g.Reload(next); err != nil {
			t.Fatal(err)
		}
		v := g.view.Load()
		if len(v.routes) != 1 || v.routes[0].keep.classes != classes || v.routes[0].fixed != 40*time.Millisecond {
			t.Errorf("after the reload: %d routes, classes kept %v, delay %v", len(v.routes), v.routes[0].keep.classes == classes, v.routes[0].fixed)
		}
		if code, body, _ := getIn(g, "/items/3"); code != 200 || !strings.Contains("a.test b.test", body) {
			t.Errorf("/items/3 after its route went: %d %s", code, body)
		}
		if hasSeries(t, g, "tailgate_hedge_delay_seconds", "route", "items") || hasSeries(t, g, "tailgate_requests_total", "route", "items") {
			t.Error("a removed route's series stay")
		}
	})
}

func TestRouteConfigErrors(t *testing.T) {
	base := []string{"http://a.test", "http://b.test"}
	for _, c := range []struct {
		r    Route
		want string
	}{
		{Route{Match: "/x"}, "has no name"},
		{Route{Name: "a b", Match: "/x"}, "route name"},
		{Route{Name: "default", Match: "/x"}, "used twice"},
		{Route{Name: "x", Match: "x"}, "no path"},
		{Route{Name: "x", Match: "/x", Methods: []string{"get"}}, "upper-case"},
		{Route{Name: "x", Match: "/x", Methods: []string{"CONNECT"}}, "never a read"},
		{Route{Name: "x", Match: "/svc.S/", GRPC: []string{"Get"}, Methods: []string{"POST"}}, "leave its methods empty"},
		{Route{Name: "x", Match: "/svc.S/{m}", GRPC: []string{"Get"}}, "a service"},
		{Route{Name: "x", Match: "/svc.S/Get/", GRPC: []string{"Get"}}, "a service"},
		{Route{Name: "x", Match: "/svc.S/Get", GRPC: []string{"List"}}, "not under the route's match"},
		{Route{Name: "x", Match: "/svc.S/", GRPC: []string{"/other.S/Get"}}, "not under the route's match"},
		{Route{Name: "x", Match: "/svc.S/", GRPC: []string{"Get", "/svc.S/Get"}}, "listed twice"},
		{Route{Name: "x", Match: "/svc.S/", GRPC: []string{"a/b"}}, "a method's name"},
		{Route{Name: "x", Match: "/svc.S/", GRPC: []string{"Get"}, Tied: ptr(true)}, "tied calls are hedgegrpc's"},
		{Route{Name: "x", Match: "/x", Backends: []string{"http://a.test"}}, "already in pool default"},
		{Route{Name: "x", Match: "/x", Backends: []string{"ftp://c.test"}}, "backend"},
		{Route{Name: "x", Match: "/x", Delay: time.Millisecond, Quantile: 0.9}, "both"},
		{Route{Name: "x", Match: "/x", Quantile: 1}, "quantile"},
		{Route{Name: "x", Match: "/x", MaxAttempts: 6}, "attempts"},
		{Route{Name: "x", Match: "/x", HedgeFraction: 0.2}, "backends of the route's own"},
		{Route{Name: "x", Match: "/x", Backends: []string{"http://c.test"}, Tied: ptr(true)}, "at least two backends"},
		{Route{Name: "x", Match: "/x", Tied: ptr(true), Delay: time.Millisecond}, "tied"},
		{Route{Name: "x", Match: "/x", AffinityKey: "cookie:x"}, "affinity"},
	} {
		_, err := New(Config{Backends: base, Routes: []Route{c.r}})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %q", c.r, err, c.want)
		}
	}
	_, err := New(Config{Backends: base, Routes: []Route{{Name: "x", Match: "/x"}, {Name: "x", Match: "/y"}}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "used twice") {
		t.Errorf("two routes named x: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// hasSeries reports whether the registry has a series of name with label
// value.
func hasSeries(t *testing.T, g *Gateway, name, label, value string) bool {
	t.Helper()
	mfs, err := g.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return true
				}
			}
		}
	}
	return false
}

// counterValue2 reads a counter by two labels.
func counterValue2(t *testing.T, g *Gateway, name, l1, v1, l2, v2 string) float64 {
	t.Helper()
	return gaugeValue(t, g, name, l1, v1, l2, v2)
}
