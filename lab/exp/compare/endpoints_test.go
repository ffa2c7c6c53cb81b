package compare

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// requestLog records the URLs an endpoint was asked for, and lets a handler
// wait until a request of a given id has reached another endpoint.
type requestLog struct {
	mu   sync.Mutex
	urls []*url.URL
	seen map[string]chan struct{}
}

func (l *requestLog) add(u *url.URL) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.urls = append(l.urls, u)
	close(l.ch(u.Query().Get("id")))
}

// ch returns the channel closed once id was seen; l.mu must be held.
func (l *requestLog) ch(id string) chan struct{} {
	if l.seen == nil {
		l.seen = map[string]chan struct{}{}
	}
	c, ok := l.seen[id]
	if !ok {
		c = make(chan struct{})
		l.seen[id] = c
	}
	select {
	case <-c: // seen before: a later request must not close it again
		return make(chan struct{})
	default:
	}
	return c
}

// wait waits until id was seen or d passed.
func (l *requestLog) wait(id string, d time.Duration) {
	l.mu.Lock()
	if l.seen == nil {
		l.seen = map[string]chan struct{}{}
	}
	c, ok := l.seen[id]
	if !ok {
		c = make(chan struct{})
		l.seen[id] = c
	}
	l.mu.Unlock()
	select {
	case <-c:
	case <-time.After(d):
	}
}

func (l *requestLog) all() []*url.URL {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*url.URL(nil), l.urls...)
}

func value(w http.ResponseWriter, v string) { io.WriteString(w, `{"value":"`+v+`"}`) }

// The hedge goes to the secondary's own path and query, not the primary's.
func TestCompareHedgesToSecondaryPathAndQuery(t *testing.T) {
	check := func(t *testing.T, primaryURL, secondaryURL string, prim, sec *requestLog) {
		t.Helper()
		pu, _ := url.Parse(primaryURL)
		su, _ := url.Parse(secondaryURL)
		rep, err := Run(t.Context(), Config{Samples: 8, Rate: 200, Delay: 5 * time.Millisecond,
			Primary: primaryURL, Secondary: secondaryURL, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Config.Primary != primaryURL || rep.Config.Secondary != secondaryURL {
			t.Errorf("config %+v", rep.Config)
		}
		ps, ss := prim.all(), sec.all()
		// The baseline's 8 reach the primary; a hedged read's primary may
		// not, when its hedge has won before the primary's connection
		// was made (a loaded machine, 5ms delay): it is cancelled unsent.
		if len(ps) < 8 || len(ss) == 0 {
			t.Fatalf("primary saw %d requests, secondary %d", len(ps), len(ss))
		}
		for _, u := range ps {
			if q := u.Query(); u.Path != pu.Path || q.Get("x") != "1" || q.Get("id") == "" || q.Has("y") {
				t.Errorf("primary asked for %s", u)
			}
		}
		for _, u := range ss {
			if q := u.Query(); u.Path != su.Path || q.Get("y") != "2" || q.Get("id") == "" || q.Has("x") {
				t.Errorf("secondary asked for %s, want %s&id=...", u, su.RequestURI())
			}
		}
		if rep.Hedged.Refused != 0 || rep.Hedged.Succeeded != 8 {
			t.Errorf("hedged side: %d refused, %d of 8 succeeded (%s)", rep.Hedged.Refused, rep.Hedged.Succeeded, rep.Hedged.FirstError)
		}
	}
	t.Run("two hosts", func(t *testing.T) {
		var prim, sec requestLog
		// The primary answers once the hedge for the same read has reached
		// the secondary (or after 200ms in the baseline, where none comes),
		// so every hedged read does hedge.
		primary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			prim.mu.Lock()
			prim.urls = append(prim.urls, r.URL)
			prim.mu.Unlock()
			sec.wait(r.URL.Query().Get("id"), 200*time.Millisecond)
			value(w, "p")
		}))
		defer primary.Close()
		secondary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sec.add(r.URL)
			if r.URL.Path != "/v2/read" {
				http.NotFound(w, r)
				return
			}
			value(w, "s")
		}))
		defer secondary.Close()
		check(t, primary.URL+"/v1/item?x=1", secondary.URL+"/v2/read?y=2", &prim, &sec)
	})
	t.Run("one host", func(t *testing.T) {
		var prim, sec requestLog
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v2/read" {
				sec.add(r.URL)
				value(w, "s")
				return
			}
			prim.mu.Lock()
			prim.urls = append(prim.urls, r.URL)
			prim.mu.Unlock()
			sec.wait(r.URL.Query().Get("id"), 200*time.Millisecond)
			value(w, "p")
		}))
		defer srv.Close()
		check(t, srv.URL+"/v1/item?x=1", srv.URL+"/v2/read?y=2", &prim, &sec)
	})
	t.Run("one path, two queries", func(t *testing.T) {
		var prim, sec requestLog
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Has("y") {
				sec.add(r.URL)
				value(w, "s")
				return
			}
			prim.mu.Lock()
			prim.urls = append(prim.urls, r.URL)
			prim.mu.Unlock()
			sec.wait(r.URL.Query().Get("id"), 200*time.Millisecond)
			value(w, "p")
		}))
		defer srv.Close()
		check(t, srv.URL+"/read?x=1", srv.URL+"/read?y=2", &prim, &sec)
	})
}

// closedAddr returns a 127.0.0.1 address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Errors name the URLs that were configured, not a made-up host; a side
// where nothing succeeded has null percentiles.
func TestCompareErrorsNameRealURLs(t *testing.T) {
	p, s := "http://"+closedAddr(t)+"/a?x=1", "http://"+closedAddr(t)+"/b?y=2"
	rep, err := Run(t.Context(), Config{Samples: 3, Rate: 100, Primary: p, Secondary: s})
	if err != nil {
		t.Fatal(err)
	}
	for name, side := range map[string]Side{"baseline": rep.Baseline, "hedged": rep.Hedged} {
		if side.Succeeded != 0 || side.FirstError == "" {
			t.Fatalf("%s: %+v", name, side.Summary)
		}
		if strings.Contains(side.FirstError, "endpoint") || !strings.Contains(side.FirstError, strings.TrimPrefix(p, "http://")) {
			t.Errorf("%s: error %q does not name %s", name, side.FirstError, p)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"p99Ms":null`) || strings.Contains(string(b), `"p99Ms":0`) {
		t.Errorf("nothing succeeded, yet the report shows a p99: %.400s", b)
	}
	// A bad URL is reported as given.
	for _, bad := range []string{"ftp://127.0.0.1/x", "http:///x", "http://127.0.0.1/x#frag"} {
		if _, err := Run(t.Context(), Config{Samples: 1, Primary: bad, Secondary: s}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("primary %q: error %v", bad, err)
		}
	}
}

// Progress comes during a side, not only when it ends: the endpoints hold
// the second half of each side's reads until a report has come from it.
func TestCompareReportsProgressDuringASide(t *testing.T) {
	progressed := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var closed [2]bool
	var mu sync.Mutex
	var calls [][2]int
	var timedOut [2]bool
	hold := func(w http.ResponseWriter, r *http.Request) {
		if id := r.URL.Query().Get("id"); id >= "5" {
			mu.Lock()
			side := 0
			if len(calls) > 0 && calls[len(calls)-1][0] >= 10 {
				side = 1
			}
			mu.Unlock()
			select {
			case <-progressed[side]:
			case <-time.After(time.Second):
				mu.Lock()
				timedOut[side] = true
				mu.Unlock()
			}
		}
		value(w, "v")
	}
	primary := httptest.NewServer(http.HandlerFunc(hold))
	defer primary.Close()
	secondary := httptest.NewServer(http.HandlerFunc(hold))
	defer secondary.Close()
	_, err := Run(context.Background(), Config{Samples: 10, Rate: 500, Delay: 50 * time.Millisecond,
		Primary: primary.URL + "/p", Secondary: secondary.URL + "/s",
		Progress: func(done, total int) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, [2]int{done, total})
			if side := done / 10; done%10 != 0 && !closed[side] {
				closed[side] = true
				close(progressed[side])
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if timedOut[0] || timedOut[1] {
		t.Errorf("no progress during a side (baseline %v, hedged %v); reports: %v", !timedOut[0], !timedOut[1], calls)
	}
	for i, c := range calls {
		if c[1] != 20 || c[0] < 0 || (i > 0 && c[0] < calls[i-1][0]) || (c[0] == c[1]) != (i == len(calls)-1) {
			t.Errorf("reports %v: done must grow to total (20), reached exactly at the last", calls)
			break
		}
	}
	if len(calls) == 0 || calls[len(calls)-1] != [2]int{20, 20} {
		t.Errorf("reports %v", calls)
	}
}
