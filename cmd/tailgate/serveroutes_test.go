package main

import (
	"fmt"
	"io"
	"net/http"
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
	// Each pool serves its own reads, and only those (a read slow on a
	// busy machine may be hedged: a second attempt, in the same pool).
	reads := func(replicas ...int) (search, others int) {
		for _, i := range replicas {
			search += rs.count(i, "/search")
			others += rs.count(i, "/other")
			for j := range 10 {
				others += rs.count(i, fmt.Sprintf("/items/%d", j))
			}
		}
		return search, others
	}
	topSearch, top := reads(0, 1)
	search, searchOthers := reads(2, 3)
	if topSearch != 0 || searchOthers != 0 || top < 20 || search < 10 {
		t.Errorf("the top-level pool served %d searches and %d other reads, the search pool %d searches and %d other reads: want 0 and 20 or more, 10 or more and 0",
			topSearch, top, search, searchOthers)
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
	if d := debugRoutes(t, s.g)[1].Delay; d != "40ms" {
		t.Errorf("search's delay after the reload %q", d)
	}
	bad := strings.Replace(file("40ms"), fmt.Sprintf("[%s, %s]\n    hedge-delay", rs.url(2), rs.url(3)), fmt.Sprintf("[%s, %s]\n    hedge-delay", rs.url(0), rs.url(3)), 1)
	s.rewrite(t, bad)
	err := s.r.reload("test")
	if err == nil || !strings.Contains(err.Error(), "tailgate.yaml:5: ") || !strings.Contains(err.Error(), "route search: backend") {
		t.Errorf("a route with the top-level pool's backend: %v", err)
	}
	if d := debugRoutes(t, s.g)[1].Delay; d != "40ms" || len(debugRoutes(t, s.g)) != 3 {
		t.Errorf("a refused reload changed the routes: %+v", debugRoutes(t, s.g))
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

// A route of the file declares POST a read, its body limit set by
// -max-request-body-bytes; a gRPC route turns h2c on for the client
// listener (net/http's server, whatever -client-server says), where a
// gRPC call no route takes is UNIMPLEMENTED, and HTTP/1.1 still works.
func TestServeBodyAndGRPCRoutesFromFile(t *testing.T) {
	rs := newReplicas(t, 2)
	s := startServed(t, loopback+fmt.Sprintf("backends: [%s, %s]\n", rs.url(0), rs.url(1))+
		"max-request-body-bytes: 16\n"+
		"routes:\n"+
		"  - name: search\n"+
		"    match: /products/_search\n"+
		"    methods: [POST]\n"+
		"  - name: catalog\n"+
		"    match: /catalog.v1.Catalog/\n"+
		"    grpc: [GetProduct, /catalog.v1.Catalog/ListProducts]\n")
	if st := debugRoutes(t, s.g); len(st) != 3 || st[1].Methods[0] != "POST" {
		t.Fatalf("routes: %+v", st)
	}
	post := func(body string) int {
		resp, err := http.Post("http://"+s.addr+"/products/_search", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(`{"q":"tail"}`); code != 200 || rs.count(0, "/products/_search")+rs.count(1, "/products/_search") != 1 {
		t.Errorf("declared POST: %d", code)
	}
	if code := post(strings.Repeat("x", 17)); code != 413 {
		t.Errorf("POST over -max-request-body-bytes: %d, want 413", code)
	}
	s.waitLog(t, `msg="gateway listening".*server="net/http \(h2c for gRPC\)"`)

	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.addr+"/other.Service/Get", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("h2c: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.Header.Get("Grpc-Status") != "12" {
		t.Errorf("gRPC call over h2c: %s, grpc-status %q; want HTTP/2 and UNIMPLEMENTED", resp.Proto, resp.Header.Get("Grpc-Status"))
	}
	if code, _, _ := do(t, "GET", "http://"+s.addr+"/x"); code != 200 {
		t.Errorf("HTTP/1.1 GET beside h2c: %d", code)
	}
}
