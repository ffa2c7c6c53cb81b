package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/memnet"
)

// searchRoute declares POST /search a read.
var searchRoute = Route{Name: "search", Match: "/search", Methods: []string{http.MethodPost}}

// A declared POST is hedged as a GET is, and every attempt sends the same
// bytes with the same Content-Length: the body is read once, before the
// first attempt, and replayed.
func TestDeclaredPOSTHedgedWithTheSameBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", straggleUnlessHedge)
		b := newMemBackend(net, "b", straggleUnlessHedge)
		g := newMemGateway(t, net, Config{Policy: fixedPolicy(20 * time.Millisecond), Routes: []Route{searchRoute}}, a, b)
		const query = `{"query":{"match":{"title":"tail"}}}`
		start := time.Now()
		w := serveIn(g, http.MethodPost, "/search", strings.NewReader(query), "Content-Type", "application/json")
		if took := time.Since(start); w.Code != 200 || took != 20*time.Millisecond {
			t.Fatalf("%d %q after %v; want the hedge's answer after the 20ms delay", w.Code, w.Body, took)
		}
		synctest.Wait()
		seen := append(a.requests(), b.requests()...)
		if len(seen) != 2 {
			t.Fatalf("%d attempts, want a primary and a hedge", len(seen))
		}
		hedges := 0
		for _, r := range seen {
			got, _ := io.ReadAll(r.Body)
			if r.Method != http.MethodPost || string(got) != query || r.ContentLength != int64(len(query)) || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("attempt %s %q, Content-Length %d, Content-Type %q; want POST with the client's body and its length",
					r.Method, got, r.ContentLength, r.Header.Get("Content-Type"))
			}
			if r.Header.Get(hedge.HedgeHeader) != "" {
				hedges++
			}
		}
		if hedges != 1 {
			t.Errorf("%d attempts marked as hedges, want 1", hedges)
		}
	})
}

// A POST no route declares is refused before its body is read, whatever
// its path; and the default route's reads stay GET and HEAD.
func TestUndeclaredPOSTRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		a := newMemBackend(net, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
		g := newMemGateway(t, net, Config{Routes: []Route{searchRoute}}, a)
		for _, path := range []string{"/other", "/search/x"} {
			if w := serveIn(g, http.MethodPost, path, strings.NewReader("q")); w.Code != http.StatusMethodNotAllowed {
				t.Errorf("POST %s: %d, want 405", path, w.Code)
			}
		}
		if w := serveIn(g, http.MethodGet, "/search", nil); w.Code != 200 {
			t.Errorf("GET /search: %d, want 200 (the default route's read)", w.Code)
		}
		if n := a.hits.Load(); n != 1 {
			t.Errorf("backend saw %d requests, want only the GET", n)
		}
	})
}
