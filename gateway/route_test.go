package gateway

import "testing"

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
