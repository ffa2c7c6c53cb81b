package main

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// Routes come from the -config file: each route's reads go to its pool
// under its settings, /debug/routes and the metrics name it, and a reload
// changes the routes whole, or, when one is wrong, not at all, the error
// located at the route's line.
func TestServeRoutesFromFile(t *testing.T) {
	rs := newReplicas(t, 4)
	file := func(searchDelay string) string {
		return loopback + fmt.Sprintf("backends: [%s, %s]\n", rs.url(0), rs.url(1)) +
			"routes:\n" +
			"  - name: search\n" +
			"    match: /search\n" +
			fmt.Sprintf("    backends: [%s, %s]\n", rs.url(2), rs.url(3)) +
			"    hedge-delay: " + searchDelay + "\n" +
			"    hedge-fraction: 0.05\n" +
			"    timeout: 3s\n" +
			"  - name: items\n" +
			"    match: /items/{id}\n" +
			"    class: item\n"
	}
	s := startServed(t, file("30ms"))
	for i := range 10 {
		for _, p := range []string{"/search", fmt.Sprintf("/items/%d", i), "/other"} {
			if code, _, _ := do(t, "GET", "http://"+s.addr+p); code != 200 {
				t.Fatalf("%s: %d", p, code)
			}
		}
	}
	reads := func(replicas ...int) int {
		n := 0
		for _, i := range replicas {
			n += rs.count(i, "/search") + rs.count(i, "/other")
			for j := range 10 {
				n += rs.count(i, fmt.Sprintf("/items/%d", j))
			}
		}
		return n
	}
	if top, search := reads(0, 1), reads(2, 3); top != 20 || search != 10 || rs.count(0, "/search")+rs.count(1, "/search") != 0 {
		t.Errorf("the top-level pool served %d reads, the search pool %d: want 20 and 10, each its own", top, search)
	}
	code, body, _ := do(t, "GET", "http://"+s.admin+"/debug/routes")
	if code != 200 || !strings.Contains(body, `"name": "search"`) || !strings.Contains(body, `"delay": "30ms"`) || !strings.Contains(body, `"class": "item"`) {
		t.Errorf("/debug/routes: %d %s", code, body)
	}
	_, metrics, _ := do(t, "GET", "http://"+s.admin+"/metrics")
	if !strings.Contains(metrics, `tailgate_requests_total{code="200",route="search"} 10`) {
		t.Errorf("/metrics lacks the search route's requests")
	}

	// A good reload changes a route's delay at once; a route of another
	// pool's backend is refused, located at its line, and nothing changes.
	s.rewrite(t, file("40ms"))
	if err := s.r.reload("test"); err != nil {
		t.Fatal(err)
	}
	if d := s.g.RoutesState()[1].Delay; d != "40ms" {
		t.Errorf("search's delay after the reload %q", d)
	}
	bad := strings.Replace(file("40ms"), fmt.Sprintf("[%s, %s]\n    hedge-delay", rs.url(2), rs.url(3)), fmt.Sprintf("[%s, %s]\n    hedge-delay", rs.url(0), rs.url(3)), 1)
	s.rewrite(t, bad)
	err := s.r.reload("test")
	if err == nil || !strings.Contains(err.Error(), "tailgate.yaml:5: ") || !strings.Contains(err.Error(), "route search: backend") {
		t.Errorf("a route with the top-level pool's backend: %v", err)
	}
	if d := s.g.RoutesState()[1].Delay; d != "40ms" || len(s.g.RoutesState()) != 3 {
		t.Errorf("a refused reload changed the routes: %+v", s.g.RoutesState())
	}
}

// The file's own errors about routes name the file, the line and the key.
func TestServeRoutesFileErrors(t *testing.T) {
	for _, c := range []struct{ routes, want string }{
		{"routes: /search\n", "tailgate.yaml:2: routes: want a list of routes"},
		{"routes:\n  - /search\n", "tailgate.yaml:3: routes: item 1: want a mapping"},
		{"routes:\n  - match: /search\n", "tailgate.yaml:3: routes: item 1 has no name"},
		{"routes:\n  - name: s\n    match: /s\n    delay: 5ms\n", `tailgate.yaml:5: routes: unknown key "delay" (a route takes name, match`},
		{"routes:\n  - name: s\n    match: /s\n    hedge-delay: soon\n", "tailgate.yaml:5: routes: hedge-delay: hedge: invalid policy: delay \"soon\""},
		{"routes:\n  - name: s\n    match: /s\n    timeout: 5\n", "tailgate.yaml:5: routes: timeout: invalid value \"5\": want a duration"},
		{"routes:\n  - name: s\n    match: /s\n    backends: [dns+http://replicas:80]\n", "a route's backends are addresses"},
		{"routes:\n  - name: s\n    match: /s\n  - name: s\n    match: /t\n", `tailgate.yaml:5: routes: "s" given twice (first on line 3)`},
	} {
		path := writeTestFile(t, "tailgate.yaml", "backends: [http://127.0.0.1:1]\n"+c.routes)
		_, _, err := loadServeFlags([]string{"-config", path}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.routes, err, c.want)
		}
	}
	// The gateway's checks of a route are located at the route.
	path := writeTestFile(t, "tailgate.yaml", "backends: [http://127.0.0.1:1]\nroutes:\n  - name: s\n    match: /s\n    hedge-fraction: 0.5\n")
	var stderr strings.Builder
	if code := serveWith(t.Context(), []string{"-config", path, "-listen", "127.0.0.1:0", "-admin", ""}, io.Discard, &stderr, nil); code != exitUsage ||
		!strings.Contains(stderr.String(), "tailgate.yaml:3: gateway: invalid configuration: route s: a hedge fraction needs backends of the route's own") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
