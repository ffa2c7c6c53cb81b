package gateway

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/internal/h1"
	"github.com/tailgate-dev/tailgate/internal/memnet"
)

// Each connection internal/h1 closes for stray bytes is counted under its
// replica and when they came; a line is logged per replica at most once a
// minute, with the count held back; an attempt that found no clean
// connection fails as "unsolicited". A replica removed is forgotten.
func TestUnsolicitedCountedAndLogged(t *testing.T) {
	log := &syncBuffer{}
	g, err := New(Config{Backends: []string{"http://a.test", "http://b.test:8080"}, Base: new(memnet.Transport), Logger: jsonLogger(log)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.unsolicited(h1.Unsolicited{Host: "a.test"})
	g.unsolicited(h1.Unsolicited{Host: "a.test", OnOpen: true})
	g.unsolicited(h1.Unsolicited{Host: "b.test:8080"})
	for _, c := range []struct {
		replica, when string
		want          float64
	}{{"http://a.test", "answer", 1}, {"http://a.test", "open", 1}, {"http://b.test:8080", "answer", 1}} {
		if got := gaugeValue(t, g, "tailgate_unsolicited_total", "replica", c.replica, "when", c.when); got != c.want {
			t.Errorf("tailgate_unsolicited_total{replica=%q,when=%q} = %v, want %v", c.replica, c.when, got, c.want)
		}
	}
	if n := log.count("replica sent bytes nobody asked for"); n != 2 {
		t.Errorf("%d lines logged for two replicas; want 2 (one each a minute)", n)
	}
	// A replica a reload removes is no longer reported.
	if _, err := g.SetBackends([]string{"http://a.test"}); err != nil {
		t.Fatal(err)
	}
	if n := sumCounter(t, g, "tailgate_unsolicited_total"); n != 2 {
		t.Errorf("%v counted after b.test was removed; want a.test's 2", n)
	}
	if reason := failureReason(nil, fmt.Errorf("x: %w", h1.ErrUnsolicited)); reason != failUnsolicited {
		t.Errorf("failure reason %q; want %q", reason, failUnsolicited)
	}
}

func TestStrayLogOncePerReplicaPerMinute(t *testing.T) {
	var l strayLog
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		replica    string
		at         time.Duration
		ok         bool
		suppressed int64
	}{
		{"a", 0, true, 0},
		{"a", 30 * time.Second, false, 0},
		{"b", 30 * time.Second, true, 0},
		{"a", 59 * time.Second, false, 0},
		{"a", time.Minute, true, 2},
		{"a", time.Minute + time.Second, false, 0},
	} {
		if ok, n := l.allow(c.replica, t0.Add(c.at)); ok != c.ok || n != c.suppressed {
			t.Errorf("%s at %v: %v, %d suppressed; want %v, %d", c.replica, c.at, ok, n, c.ok, c.suppressed)
		}
	}
}

// The gateway has each plain-HTTP replica proven as it learns of it (a
// connection dialled and checked for a greeting before any read needs
// one, see h1.Transport.Prove): at New, and for a replica a reload adds.
func TestBackendsProvenBeforeReads(t *testing.T) {
	dialled := make(chan string, 4)
	backend := func() *httptest.Server {
		s := httptest.NewUnstartedServer(http.NotFoundHandler())
		s.Config.ConnState = func(c net.Conn, st http.ConnState) {
			if st == http.StateNew {
				select { // never hold up the server: a dial more is not this test's business
				case dialled <- s.URL:
				default:
				}
			}
		}
		s.Start()
		return s
	}
	a, b := backend(), backend()
	defer a.Close()
	defer b.Close()
	g, err := New(Config{Backends: []string{a.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	next := func() string {
		select {
		case u := <-dialled:
			return u
		case <-time.After(10 * time.Second): // a bound on a hang, not a timing
			return "nothing"
		}
	}
	if got := next(); got != a.URL {
		t.Fatalf("dialled %s; want %s", got, a.URL)
	}
	if _, err := g.SetBackends([]string{a.URL, b.URL}); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != b.URL {
		t.Fatalf("after the reload dialled %s; want the added %s", got, b.URL)
	}
}
