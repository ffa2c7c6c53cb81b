package hedge

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

func TestDefaultClass(t *testing.T) {
	for _, c := range []struct{ method, target, want string }{
		{"GET", "/item?id=42", "GET /item"},
		{"GET", "/items/42", "GET /items/{id}"},
		{"HEAD", "/items/42/reviews/7", "HEAD /items/{id}/reviews/{id}"},
		{"GET", "/users/5f1c3c6a-7f1d-4e1a-9b6e-2c9d6a1f0e3b/avatar", "GET /users/{id}/avatar"},
		{"GET", "/blobs/9f86d081884c7d659a2feaa0c55ad015", "GET /blobs/{id}"},
		{"GET", "/t/dXNlcjoxMjM0NTY3ODkw_-x", "GET /t/{id}"},
		{"GET", "/v2/search", "GET /v2/search"},
		{"GET", "/static/app.css", "GET /static/app.css"},
		{"GET", "/", "GET /"},
		{"GET", "", "GET /"},
		{"GET", "/a//b/", "GET /a/b/"},
		{"GET", "/a%2Fb/1", "GET /a%2Fb/{id}"},
		{"POST", "/index/_search", "POST /index/_search"},
	} {
		u, err := url.ParseRequestURI(c.target)
		if c.target == "" {
			u, err = &url.URL{}, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		r := &http.Request{Method: c.method, URL: u}
		if got := DefaultClass(r); got != c.want {
			t.Errorf("DefaultClass(%s %s) = %q, want %q", c.method, c.target, got, c.want)
		}
		if classKey(r.Method, requestPath(r)) != classKey(c.want[:len(c.method)], c.want[len(c.method)+1:]) {
			t.Errorf("%s %s: its key is not its template's", c.method, c.target)
		}
	}
}

func TestIsIdentifier(t *testing.T) {
	for seg, want := range map[string]bool{
		"42": true, "0": true, "2024": true,
		"5f1c3c6a-7f1d-4e1a-9b6e-2c9d6a1f0e3b": true,
		"9f86d081884c7d65":                     true, // 16 hex digits
		"9f86d081884c7d6":                      false,
		"dXNlcjoxMjM0NTY3ODkw":                 true,
		"item":                                 false, "v2": false, "search": false, "_search": false,
		"abcdefghijklmnopqrstuvwxyz": false, // long, but no digit: a name
		"":                           false,
	} {
		if got := isIdentifier(seg); got != want {
			t.Errorf("isIdentifier(%q) = %v", seg, got)
		}
	}
}

// Each class has a Hedger of its own, sharing the Budget; ForRequest and
// Hedger agree; past MaxClasses further classes share OtherClass, counted.
func TestClassesBoundedAndShared(t *testing.T) {
	c, err := NewClasses(Policy{})
	if err != nil {
		t.Fatal(err)
	}
	req := func(path string) *http.Request {
		return &http.Request{Method: "GET", URL: &url.URL{Path: path}}
	}
	a := c.ForRequest(req("/item/1"))
	if a != c.ForRequest(req("/item/2")) || a != c.Hedger("GET /item/{id}") {
		t.Fatal("one class, several Hedgers")
	}
	b := c.ForRequest(req("/search"))
	if a == b || a.budget != b.budget || a.budget != c.Budget() {
		t.Fatal("two classes share a Hedger, or not the Budget")
	}
	for i := range MaxClasses + 10 {
		c.Hedger(fmt.Sprint("class-", i))
	}
	if got := len(c.List()); got != MaxClasses+1 {
		t.Errorf("%d classes listed, want %d and %s", got, MaxClasses, OtherClass)
	}
	if c.Overflowed() != 12 || c.Hedger("class-70") != c.Hedger(OtherClass) {
		t.Errorf("overflowed %d", c.Overflowed())
	}
	if c.Hedger("GET /item/{id}") != a {
		t.Error("a known class lost its Hedger once the set was full")
	}
}

// A class idle for ClassIdle makes room for a new one.
func TestClassesForgetIdle(t *testing.T) {
	c, _ := NewClasses(Policy{})
	for i := range MaxClasses {
		c.Hedger(fmt.Sprint("class-", i))
	}
	old := time.Now().Add(-ClassIdle - time.Minute).Unix()
	c.Hedger("class-0").lastUsed.Store(old)
	c.swept = time.Time{}
	if h := c.Hedger("new"); h == c.Hedger(OtherClass) {
		t.Fatal("no room made for a new class")
	}
	if _, ok := (*c.byName.Load())["class-0"]; ok {
		t.Error("the idle class is still kept")
	}
}

// Update reaches every class, and those made later.
func TestClassesUpdate(t *testing.T) {
	c, _ := NewClasses(Policy{Delay: 10 * time.Millisecond})
	h := c.Hedger("a")
	if err := c.Update(Policy{Delay: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if h.Policy().Delay != 20*time.Millisecond || c.Hedger("b").Policy().Delay != 20*time.Millisecond {
		t.Errorf("delays %v and %v after Update", h.Policy().Delay, c.Hedger("b").Policy().Delay)
	}
	if err := c.Update(Policy{MaxAttempts: 9}); err == nil || c.Hedger("a").Policy().MaxAttempts != 2 {
		t.Error("an invalid Update changed a class")
	}
}

func TestClassesConcurrent(t *testing.T) {
	c, _ := NewClasses(Policy{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				r := &http.Request{Method: "GET", URL: &url.URL{Path: fmt.Sprintf("/p%d/%d", (g+i)%80, i)}}
				if c.ForRequest(r) == nil {
					t.Error("nil Hedger")
				}
			}
		})
	}
	wg.Wait()
	if n := len(c.List()); n > MaxClasses+1 {
		t.Errorf("%d classes", n)
	}
}

// The default class of a six-segment path costs no allocation once known
// (and well under a microsecond: BenchmarkClassLookup).
func TestClassLookupDoesNotAllocate(t *testing.T) {
	c, _ := NewClasses(Policy{})
	r := &http.Request{Method: "GET", URL: &url.URL{Path: "/api/v2/users/42/orders/9f86d081884c7d659a2f"}}
	c.ForRequest(r)
	if n := testing.AllocsPerRun(1000, func() { c.ForRequest(r) }); n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}

func BenchmarkClassLookup(b *testing.B) {
	c, _ := NewClasses(Policy{})
	r := &http.Request{Method: "GET", URL: &url.URL{Path: "/api/v2/users/42/orders/9f86d081884c7d659a2f"}}
	c.ForRequest(r)
	b.ReportAllocs()
	for b.Loop() {
		c.ForRequest(r)
	}
}
