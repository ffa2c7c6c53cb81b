package gateway

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/memnet"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
)

// tiedApp is a replica's application in memory: it records every request
// it runs (its header, when it started, whether its context ended before
// it answered) and answers its name after its latency, which may depend on
// the request.
type tiedApp struct {
	name    string
	latency func(r *http.Request) time.Duration

	mu   sync.Mutex
	seen []tiedSeen
}

type tiedSeen struct {
	hdr      http.Header
	at       time.Time
	canceled bool
}

func newTiedApp(name string, lat time.Duration) *tiedApp {
	return &tiedApp{name: name, latency: func(*http.Request) time.Duration { return lat }}
}

func (a *tiedApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	i := len(a.seen)
	a.seen = append(a.seen, tiedSeen{hdr: r.Header.Clone(), at: time.Now()})
	a.mu.Unlock()
	if !memnet.Sleep(r.Context(), a.latency(r)) {
		a.mu.Lock()
		a.seen[i].canceled = true
		a.mu.Unlock()
		return
	}
	io.WriteString(w, a.name)
}

func (a *tiedApp) requests() []tiedSeen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]tiedSeen(nil), a.seen...)
}

// tiedHosts are the in-memory replicas of the tied tests, by name: a.test
// and b.test.
var tiedHosts = []string{"a.test", "b.test"}

// newTiedGateway returns a gateway in tied mode over the in-memory
// replicas a.test and b.test of net, seeded, with cfg's other settings.
func newTiedGateway(t *testing.T, net *memnet.Transport, cfg Config) *Gateway {
	t.Helper()
	cfg.Backends = []string{"http://a.test", "http://b.test"}
	cfg.Base, cfg.Tied = net, true
	cfg.Replica.Seed = 1
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// tiedServers wraps each app in a tied.Server (one worker) on net, with the
// other hosts as its peers; close them before the bubble ends.
func tiedServers(t *testing.T, net *memnet.Transport, apps map[string]http.Handler) map[string]*tied.Server {
	t.Helper()
	srv := map[string]*tied.Server{}
	for h := range apps {
		var peers []string
		for p := range apps {
			if p != h {
				peers = append(peers, "http://"+p)
			}
		}
		s, err := tied.NewServer(tied.ServerConfig{Workers: 1, Peers: peers, CancelTransport: net})
		if err != nil {
			t.Fatal(err)
		}
		srv[h] = s
		net.Handle(h, s.Handler(apps[h]))
	}
	return srv
}

func tiedCounts(g *Gateway) tiedTally { return g.metrics.tied() }

// attemptCounts reads tailgate_attempts_total by role.
func attemptCounts(t *testing.T, g *Gateway) (primaries, hedges int64) {
	t.Helper()
	return int64(counterValue(t, g, "tailgate_attempts_total", "role", "primary")),
		int64(counterValue(t, g, "tailgate_attempts_total", "role", "hedge"))
}

// The first copy goes at once to the primary, the second after the tied
// delay to the other replica, each with the same tie and naming the other's
// backend, the second marked as a hedge; the first acceptable answer (the
// primary's, here) wins and the second copy is cancelled. A client's own
// tie headers are not forwarded.
func TestTiedCopiesCrossedHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		apps := map[string]*tiedApp{"a.test": newTiedApp("a", 10*time.Millisecond), "b.test": newTiedApp("b", 10*time.Millisecond)}
		for h, a := range apps {
			net.Handle(h, a)
		}
		g := newTiedGateway(t, net, Config{})
		defer g.Close()
		start := time.Now()
		r := httptest.NewRequest(http.MethodGet, "/item?id=7", nil)
		r.Header.Set(tiedwire.TieHeader, "client-tie")
		r.Header.Set(tiedwire.PeerHeader, "http://evil.test")
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if took := time.Since(start); w.Code != 200 || took != 10*time.Millisecond {
			t.Fatalf("%d %q after %v, want the primary's answer after 10ms", w.Code, w.Body, took)
		}
		net.Wait()
		synctest.Wait()

		primary, twin := "a.test", "b.test"
		if w.Body.String() == "b" {
			primary, twin = twin, primary
		}
		p, s := apps[primary].requests(), apps[twin].requests()
		if len(p) != 1 || len(s) != 1 {
			t.Fatalf("primary ran %d, twin %d; want one copy each", len(p), len(s))
		}
		id := p[0].hdr.Get(tiedwire.TieHeader)
		if !tiedwire.ValidTie(id) || id == "client-tie" || len(p[0].hdr[tiedwire.TieHeader]) != 1 {
			t.Errorf("first copy's tie %q", p[0].hdr[tiedwire.TieHeader])
		}
		if got := p[0].hdr[tiedwire.PeerHeader]; len(got) != 1 || got[0] != "http://"+twin {
			t.Errorf("first copy names peer %q, want http://%s", got, twin)
		}
		if p[0].hdr.Get(hedge.HedgeHeader) != "" || !p[0].at.Equal(start) || p[0].canceled {
			t.Errorf("first copy: hedge mark %q, sent after %v, canceled %v", p[0].hdr.Get(hedge.HedgeHeader), p[0].at.Sub(start), p[0].canceled)
		}
		if got := s[0].hdr[tiedwire.TieHeader]; len(got) != 1 || got[0] != id {
			t.Errorf("second copy's tie %q, want the first's %q", got, id)
		}
		if got := s[0].hdr[tiedwire.PeerHeader]; len(got) != 1 || got[0] != "http://"+primary {
			t.Errorf("second copy names peer %q, want http://%s", got, primary)
		}
		if s[0].hdr.Get(hedge.HedgeHeader) != "1" || s[0].at.Sub(start) != tied.DefaultDelay {
			t.Errorf("second copy: hedge mark %q, sent after %v; want 1, after 1ms", s[0].hdr.Get(hedge.HedgeHeader), s[0].at.Sub(start))
		}
		if !s[0].canceled {
			t.Error("the losing second copy was not cancelled")
		}
		for _, c := range []tiedSeen{p[0], s[0]} {
			if c.hdr.Get(deadline.Header) == "" || c.hdr.Get("X-Forwarded-Host") == "" {
				t.Errorf("copy lacks the gateway's headers: %v", c.hdr)
			}
		}

		c := tiedCounts(g)
		if c.FirstCopies != 1 || c.SecondCopies != 1 || c.Requests[tiedFirst] != 1 || c.Requests[tiedSecond] != 0 {
			t.Errorf("tied counts %+v", c)
		}
		if v := counterValue(t, g, "tailgate_tied_copies_total", "copy", "second"); v != 1 {
			t.Errorf("tailgate_tied_copies_total{second} = %v", v)
		}
		if pr, h := attemptCounts(t, g); pr != 1 || h != 1 {
			t.Errorf("attempts: %d primaries, %d hedges; want the second copy counted as a hedge", pr, h)
		}
		for _, st := range g.Replicas().Snapshot(time.Now()) {
			if st.InFlight != 0 || st.Failures != 0 {
				t.Errorf("%s: %d in flight, %d failures", st.Name, st.InFlight, st.Failures)
			}
		}
		d := g.replicasState(time.Now())
		if d.Mode != ModeTied || d.Tied == nil || d.Tied.DelayMs != 1 || d.Tied.FirstCopies != 1 || !d.Hedge.GateOpen || d.InFlight.MaxAttempts != 2*DefaultMaxInFlightRequests {
			t.Errorf("debug: mode %q, tied %+v, gate open %v, max attempts %d", d.Mode, d.Tied, d.Hedge.GateOpen, d.InFlight.MaxAttempts)
		}
	})
}

// When the first copy straggles, the second copy's answer wins as soon as
// it comes, and the first copy is cancelled.
func TestTiedSecondCopyWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		lat := func(r *http.Request) time.Duration {
			if r.Header.Get(hedge.HedgeHeader) != "" {
				return 5 * time.Millisecond
			}
			return time.Second
		}
		apps := map[string]*tiedApp{"a.test": {name: "a", latency: lat}, "b.test": {name: "b", latency: lat}}
		for h, a := range apps {
			net.Handle(h, a)
		}
		g := newTiedGateway(t, net, Config{})
		defer g.Close()
		code, body, took := getIn(g, "/x")
		if code != 200 || took != 6*time.Millisecond {
			t.Fatalf("%d %q after %v, want the second copy's answer after 1+5ms", code, body, took)
		}
		net.Wait()
		synctest.Wait()
		first := apps["a.test"]
		if body == "a" {
			first = apps["b.test"]
		}
		if r := first.requests(); len(r) != 1 || !r[0].canceled || r[0].hdr.Get(hedge.HedgeHeader) != "" {
			t.Errorf("first copy: %+v, want it cancelled", r)
		}
		if c := tiedCounts(g); c.Requests[tiedSecond] != 1 || c.FirstCopies != 1 || c.SecondCopies != 1 {
			t.Errorf("tied counts %+v", c)
		}
		if v := gaugeValue(t, g, "tailgate_hedge_wins_total"); v != 1 {
			t.Errorf("hedge wins %v", v)
		}
	})
}

// The tied delay is configurable; negative sends both copies at once. A
// first copy that answers within the delay has no second copy, and the
// ticket held for it goes back without a latency sample.
func TestTiedDelay(t *testing.T) {
	for _, tc := range []struct {
		delay, want time.Duration
	}{{0, time.Millisecond}, {3 * time.Millisecond, 3 * time.Millisecond}, {-1, time.Nanosecond}} {
		synctest.Test(t, func(t *testing.T) {
			net := new(memnet.Transport)
			apps := map[string]*tiedApp{"a.test": newTiedApp("a", 10*time.Millisecond), "b.test": newTiedApp("b", 10*time.Millisecond)}
			for h, a := range apps {
				net.Handle(h, a)
			}
			g := newTiedGateway(t, net, Config{TiedDelay: tc.delay})
			defer g.Close()
			start := time.Now()
			if code, body, _ := getIn(g, "/x"); code != 200 {
				t.Fatalf("%d %s", code, body)
			}
			net.Wait()
			var at []time.Duration
			for _, a := range apps {
				for _, r := range a.requests() {
					at = append(at, r.at.Sub(start))
				}
			}
			if len(at) != 2 || max(at[0], at[1]) != tc.want || min(at[0], at[1]) != 0 {
				t.Errorf("delay %v: copies sent after %v, want 0 and %v", tc.delay, at, tc.want)
			}
		})
	}
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		apps := map[string]*tiedApp{"a.test": newTiedApp("a", 500*time.Microsecond), "b.test": newTiedApp("b", 500*time.Microsecond)}
		for h, a := range apps {
			net.Handle(h, a)
		}
		g := newTiedGateway(t, net, Config{})
		defer g.Close()
		if code, body, took := getIn(g, "/x"); code != 200 || took != 500*time.Microsecond {
			t.Fatalf("%d %s after %v", code, body, took)
		}
		net.Wait()
		synctest.Wait()
		if n := len(apps["a.test"].requests()) + len(apps["b.test"].requests()); n != 1 {
			t.Errorf("%d copies sent for a first copy that answered within the delay", n)
		}
		c := tiedCounts(g)
		if c.FirstCopies != 1 || c.SecondCopies != 0 || c.Requests[tiedFirst] != 1 {
			t.Errorf("tied counts %+v", c)
		}
		var canceled uint64
		for _, st := range g.Replicas().Snapshot(time.Now()) {
			canceled += st.Canceled
			if st.InFlight != 0 {
				t.Errorf("%s: %d in flight: the twin's ticket was not given back", st.Name, st.InFlight)
			}
			if st.Successes == 0 && st.EWMA != 0 {
				t.Errorf("%s: the unused twin ticket fed latency %v", st.Name, st.EWMA)
			}
		}
		if canceled != 1 {
			t.Errorf("%d tickets given back cancelled, want the twin's", canceled)
		}
	})
}

// With tied.Server on both replicas and one of them busy, the copy queued
// there is dropped when its twin starts on the idle one: the dropped
// answer never wins, does not move the busy replica's breaker and gives
// it no latency sample, however many there are (more than the breaker's
// threshold here).
func TestTiedDroppedAnswerIsNeutral(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		release := make(chan struct{})
		busy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release // the worker is held by the first request, for good
			io.WriteString(w, "a")
		})
		apps := map[string]http.Handler{"a.test": busy, "b.test": newTiedApp("b", 5*time.Millisecond)}
		srv := tiedServers(t, net, apps)
		defer func() {
			close(release)
			net.Wait()
			for _, s := range srv {
				s.Close()
			}
		}()
		// Occupy a's only worker.
		blocker, _ := http.NewRequest(http.MethodGet, "http://a.test/block", nil)
		go net.RoundTrip(blocker)
		synctest.Wait()

		g := newTiedGateway(t, net, Config{})
		defer g.Close()
		const n = 12
		for range n {
			if code, body, _ := getIn(g, "/x"); code != 200 || body != "b" {
				t.Fatalf("%d %q, want b's answer", code, body)
			}
		}
		synctest.Wait()
		c := tiedCounts(g)
		sa := srv["a.test"].Stats()
		if dropped := c.DroppedQueued + c.DroppedOnArrival; dropped != n || dropped != int64(sa.DroppedByTwin+sa.DroppedOnArrival) {
			t.Errorf("gateway saw %d dropped answers (%+v), a dropped %d+%d; want %d", dropped, c, sa.DroppedByTwin, sa.DroppedOnArrival, n)
		}
		if v := counterValue(t, g, "tailgate_tied_dropped_total", "when", "queued"); v != float64(c.DroppedQueued) {
			t.Errorf("tailgate_tied_dropped_total{queued} = %v", v)
		}
		a := g.Replicas().Snapshot(time.Now())[0]
		if a.Breaker != replica.Closed || a.Failures != 0 || a.ConsecutiveFailures != 0 || a.Successes != 0 || a.EWMA != 0 || a.Canceled != n || a.InFlight != 0 {
			t.Errorf("busy replica after %d dropped answers: %+v", n, a)
		}
		if c.Requests[tiedFirst]+c.Requests[tiedSecond] != n || c.Requests[tiedFailed] != 0 {
			t.Errorf("tied outcomes %+v", c.Requests)
		}
		if sb := srv["b.test"].Stats(); sb.Dequeued != n || sb.DroppedByTwin != 0 {
			t.Errorf("b: %+v", sb)
		}
		// With both copies out, a dropped one leaves nothing to send.
		if v := counterValue(t, g, "tailgate_hedges_suppressed_total", "reason", "maxAttempts"); v != float64(c.DroppedQueued+c.DroppedOnArrival) {
			t.Errorf("maxAttempts suppressions %v, want one per dropped answer", v)
		}
	})
}

// An answer dropped for its twin never wins, even with a status that would
// (a misbehaving middleware), and the twin's answer is awaited.
func TestTiedDroppedNeverWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		dropper := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			memnet.Sleep(r.Context(), 2*time.Millisecond) // both copies are out by then
			if r.Header.Get(tiedwire.TieHeader) != "" {
				w.Header().Set(tiedwire.DroppedHeader, tiedwire.DroppedQueued)
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, "dropped")
				return
			}
			io.WriteString(w, "untied")
		})
		net.Handle("a.test", dropper)
		net.Handle("b.test", dropper)
		g := newTiedGateway(t, net, Config{})
		defer g.Close()
		// Both copies are dropped: no answer, 502; never "dropped".
		code, body, _ := getIn(g, "/x")
		if code != http.StatusBadGateway || !strings.Contains(body, "dropped for its twin") {
			t.Errorf("%d %q, want 502", code, body)
		}
		if c := tiedCounts(g); c.DroppedQueued != 2 || c.Requests[tiedFailed] != 1 {
			t.Errorf("tied counts %+v", c)
		}
		// Dropped for its twin: lost, not failed, on either replica.
		if got := replicaCounts(t, g); !mapsEqual(got, map[string]float64{"a.test primary lost": 1, "b.test hedge lost": 1}) &&
			!mapsEqual(got, map[string]float64{"b.test primary lost": 1, "a.test hedge lost": 1}) {
			t.Errorf("replica attempts %v", got)
		}
		for _, st := range g.Replicas().Snapshot(time.Now()) {
			if st.Failures != 0 || st.Successes != 0 || st.EWMA != 0 {
				t.Errorf("%s: %+v", st.Name, st)
			}
		}
	})
}

// unreachable is a network on which one host cannot be reached: requests
// to it fail after a while (at once: refused; later: a connect timeout).
type unreachable struct {
	net   *memnet.Transport
	host  string
	after time.Duration
}

func (u *unreachable) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != u.host {
		return u.net.RoundTrip(r)
	}
	if !memnet.Sleep(r.Context(), u.after) {
		return nil, r.Context().Err()
	}
	return nil, errors.New("dial tcp: connection refused")
}

// A twin whose server cannot be reached fails no read: its copy fails or
// is cancelled, the cancel sent to it fails, and every read is answered as
// fast as the reachable replica answers. A twin refused at once fails its
// copies, which count against its breaker (that is its health); once it
// opens, reads go untied to the one replica left.
func TestTiedUnreachableTwin(t *testing.T) {
	for _, after := range []time.Duration{0, 20 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			net := &unreachable{net: new(memnet.Transport), host: "b.test", after: after}
			app := newTiedApp("a", 5*time.Millisecond)
			s, err := tied.NewServer(tied.ServerConfig{Workers: 1, Peers: []string{"http://b.test"}, CancelTransport: net})
			if err != nil {
				t.Fatal(err)
			}
			net.net.Handle("a.test", s.Handler(app))
			defer func() {
				net.net.Wait()
				s.Close()
			}()
			g, err := New(Config{Backends: []string{"http://a.test", "http://b.test"}, Base: net, Tied: true, Replica: replica.Config{Seed: 1}})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			const n = 20
			for range n {
				if code, body, took := getIn(g, "/x"); code != 200 || body != "a" || took > 6*time.Millisecond {
					t.Fatalf("after %v: %d %q in %v", after, code, body, took)
				}
			}
			synctest.Wait()
			time.Sleep(time.Second) // for the cancels to b to end
			c := tiedCounts(g)
			if c.Requests[tiedFailed] != 0 || c.Requests[tiedFirst]+c.Requests[tiedSecond]+c.Requests[tiedRetry]+c.Requests[tiedUntied] != n {
				t.Errorf("after %v: tied outcomes %+v", after, c.Requests)
			}
			st, b := s.Stats(), g.Replicas().Snapshot(time.Now())[1]
			switch after {
			case 0:
				if b.Breaker != replica.Open || c.Requests[tiedUntied] == 0 {
					t.Errorf("refused b: %+v; tied outcomes %+v", b, c.Requests)
				}
			default:
				if st.CancelsFailed == 0 || st.CancelsSent != 0 || c.Requests[tiedFirst] == 0 {
					t.Errorf("a's cancels to the unreachable b: %+v; tied outcomes %+v", st, c.Requests)
				}
			}
		})
	}
}

// A first copy that fails before the second is due gets the second at
// once, untied: its server had nothing to cancel.
func TestTiedFailureSendsSecondUntied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		fail, ok := newTiedApp("fail", 0), newTiedApp("ok", 5*time.Millisecond)
		net.Handle("a.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fail.ServeHTTP(httptest.NewRecorder(), r)
			w.WriteHeader(http.StatusInternalServerError)
		}))
		net.Handle("b.test", ok)
		g := newTiedGateway(t, net, Config{})
		defer g.Close()
		// Until a is picked as the primary (its breaker opens after 5).
		var first *tiedSeen
		for i := 0; first == nil; i++ {
			if i == 5 {
				t.Fatal("a never picked as the primary")
			}
			if code, body, _ := getIn(g, "/x"); code != 200 || body != "ok" {
				t.Fatalf("%d %q", code, body)
			}
			net.Wait()
			for _, r := range fail.requests() {
				if r.hdr.Get(hedge.HedgeHeader) == "" {
					first = &r
				}
			}
		}
		if first.hdr.Get(tiedwire.TieHeader) == "" {
			t.Fatalf("a's first copy untied: %v", first.hdr)
		}
		var second *tiedSeen
		for _, r := range ok.requests() {
			if r.at.Equal(first.at) && r.hdr.Get(hedge.HedgeHeader) != "" {
				second = &r
			}
		}
		if second == nil {
			t.Fatalf("no second copy sent to b at once after a's failure")
		}
		if second.hdr.Get(tiedwire.TieHeader) != "" || second.hdr.Get(tiedwire.PeerHeader) != "" {
			t.Errorf("second copy after a failure: %v, want it untied", second.hdr)
		}
		if c := tiedCounts(g); c.Requests[tiedRetry] != 1 {
			t.Errorf("tied outcomes %+v", c.Requests)
		}
	})
}

// The bounds: the overload gate does not pause second copies (every read
// wants one); the budget does, and a read without a credit goes untied and
// alone; a second copy without an attempt slot is not sent; and a read
// whose time left would not cover a second copy goes untied.
func TestTiedBounds(t *testing.T) {
	setup := func(t *testing.T, cfg Config) (*Gateway, *memnet.Transport, map[string]*tiedApp) {
		net := new(memnet.Transport)
		apps := map[string]*tiedApp{"a.test": newTiedApp("a", 10*time.Millisecond), "b.test": newTiedApp("b", 10*time.Millisecond)}
		for h, a := range apps {
			net.Handle(h, a)
		}
		return newTiedGateway(t, net, cfg), net, apps
	}
	sent := func(apps map[string]*tiedApp) (tiedCopies, untied int) {
		for _, a := range apps {
			for _, r := range a.requests() {
				if r.hdr.Get(tiedwire.TieHeader) != "" {
					tiedCopies++
				} else {
					untied++
				}
			}
		}
		return
	}
	t.Run("gate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g, net, apps := setup(t, Config{Policy: hedge.Policy{Gate: hedge.Gate{MinWinRate: 0.5, Slowdown: 1}}})
			defer g.Close()
			for range 40 {
				getIn(g, "/x")
			}
			net.Wait()
			if c := tiedCounts(g); c.SecondCopies != 40 || !g.replicasState(time.Now()).Hedge.GateOpen {
				t.Errorf("tied counts %+v, gate open %v: the gate held second copies back", c, g.replicasState(time.Now()).Hedge.GateOpen)
			}
			if tc, u := sent(apps); tc != 80 || u != 0 {
				t.Errorf("%d tied and %d untied copies", tc, u)
			}
		})
	})
	t.Run("budget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			budget, _ := hedge.NewBudget(0, 2)
			g, net, apps := setup(t, Config{Policy: hedge.Policy{Budget: budget}})
			defer g.Close()
			for range 10 {
				if code, _, _ := getIn(g, "/x"); code != 200 {
					t.Fatal(code)
				}
			}
			net.Wait()
			c := tiedCounts(g)
			if c.FirstCopies != 2 || c.SecondCopies != 2 || c.Requests[tiedUntied] != 8 {
				t.Errorf("tied counts %+v, want 2 reads tied on the burst, 8 untied", c)
			}
			if tc, u := sent(apps); tc != 4 || u != 8 {
				t.Errorf("%d tied and %d untied copies, want 4 and 8 (no copies for untied reads)", tc, u)
			}
			if v := counterValue(t, g, "tailgate_hedges_suppressed_total", "reason", "budget"); v != 8 {
				t.Errorf("budget suppressions %v", v)
			}
		})
	})
	t.Run("slots", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g, net, apps := setup(t, Config{MaxInFlightRequests: 1, MaxInFlightAttempts: 1})
			defer g.Close()
			if code, _, _ := getIn(g, "/x"); code != 200 {
				t.Fatal(code)
			}
			net.Wait()
			c := tiedCounts(g)
			if c.FirstCopies != 1 || c.SecondCopies != 0 || c.Requests[tiedFirst] != 1 {
				t.Errorf("tied counts %+v", c)
			}
			if tc, u := sent(apps); tc != 1 || u != 0 {
				t.Errorf("%d tied and %d untied copies", tc, u)
			}
			if v := counterValue(t, g, "tailgate_hedges_suppressed_total", "reason", "capacity"); v != 1 {
				t.Errorf("capacity suppressions %v", v)
			}
			for _, st := range g.Replicas().Snapshot(time.Now()) {
				if st.InFlight != 0 || (st.Successes == 0 && st.EWMA != 0) {
					t.Errorf("%s: %+v", st.Name, st)
				}
			}
		})
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g, net, apps := setup(t, Config{})
			defer g.Close()
			for _, a := range apps {
				a.latency = func(r *http.Request) time.Duration {
					if r.URL.RawQuery == "warm" {
						return 10 * time.Millisecond
					}
					return 2 * time.Millisecond
				}
			}
			for range 5 {
				getIn(g, "/x?warm") // latency is learnt per class of read: GET /x
			}
			time.Sleep(time.Second) // past the engine's refresh of the expected latency
			need := g.Classes().Hedger("GET /x").Expected()
			if need < 5*time.Millisecond {
				t.Fatalf("expected latency %v", need)
			}
			net.Wait()
			before, _ := sent(apps)
			// need + 0.5ms left: not refused, but a second copy, 1ms
			// later, could not finish: untied.
			if w := serveInMemory(g, "/x", deadline.Format(need+500*time.Microsecond)); w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			// need + 2ms: enough for both.
			if w := serveInMemory(g, "/x", deadline.Format(need+2*time.Millisecond)); w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			net.Wait()
			if after, u := sent(apps); after-before != 2 || u != 1 {
				t.Errorf("%d more tied copies and %d untied, want 2 (the read with 2ms to spare) and 1 (the other)", after-before, u)
			}
			if c := tiedCounts(g); c.Requests[tiedUntied] != 1 {
				t.Errorf("tied counts %+v", c)
			}
		})
	})
}

// A replica that is slow to execute (not to queue) is where tied requests
// cannot help: idle, it starts its copy first and has the twin dropped.
// Its answers are slow and measured, so it goes on probation, and then it
// is never a primary nor a twin, only shadowed.
func TestTiedProbation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		apps := map[string]*tiedApp{"a.test": newTiedApp("a", 5*time.Millisecond), "b.test": newTiedApp("b", 5*time.Millisecond),
			"c.test": newTiedApp("c", 100*time.Millisecond)}
		handlers := map[string]http.Handler{}
		for h, a := range apps {
			handlers[h] = a
		}
		srv := tiedServers(t, net, handlers)
		defer func() {
			net.Wait()
			for _, s := range srv {
				s.Close()
			}
		}()
		g, err := New(Config{Backends: memBackends, Base: net, Tied: true, Replica: quickProbation})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		untilProbation(t, g, 2, 10*time.Second, onProbation)
		time.Sleep(200 * time.Millisecond) // for the copies in flight to end
		counts := func() (copies, shadows int) {
			for _, r := range apps["c.test"].requests() {
				if r.hdr.Get(ShadowHeader) != "" {
					shadows++
				} else {
					copies++
				}
			}
			return
		}
		copies, shadows := counts()
		for _, dt := range traffic(t, g, time.Second) {
			if dt != 5*time.Millisecond {
				t.Fatalf("a read took %v with c on probation, want 5ms", dt)
			}
		}
		time.Sleep(200 * time.Millisecond)
		if c2, s2 := counts(); c2 != copies || s2 == shadows {
			t.Errorf("replica on probation got %d copies and %d shadows, want none and some", c2-copies, s2-shadows)
		}
		if c := tiedCounts(g); c.Requests[tiedFailed] != 0 {
			t.Errorf("tied counts %+v", c)
		}
	})
}

func TestTiedConfig(t *testing.T) {
	two := []string{"http://a.test", "http://b.test"}
	for _, cfg := range []Config{
		{Backends: two[:1], Tied: true},
		{Backends: two, Tied: true, Policy: hedge.Policy{Delay: time.Millisecond}},
		{Backends: two, Tied: true, Policy: hedge.Policy{MaxAttempts: 3}},
		{Backends: two, Tied: true, Policy: hedge.Policy{MaxAttempts: 1}},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v): %v, want ErrInvalid", cfg, err)
		}
	}
	g, err := New(Config{Backends: two, Tied: true, Policy: hedge.Policy{MaxAttempts: 2}, MaxInFlightRequests: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	p := g.Classes().Policy()
	if p.Delay != time.Millisecond || p.MaxAttempts != 2 || !p.Gate.Disabled || p.Budget.Fraction() != 1 || g.replicasState(time.Now()).InFlight.MaxAttempts != 20 {
		t.Errorf("tied policy %+v, budget %v, max attempts in flight %d", p, p.Budget.Fraction(), g.replicasState(time.Now()).InFlight.MaxAttempts)
	}
	// Hedge mode: no tied series, no tied state.
	h, err := New(Config{Backends: two})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if d := h.replicasState(time.Now()); d.Mode != ModeHedge || d.Tied != nil {
		t.Errorf("hedge mode debug: %q %+v", d.Mode, d.Tied)
	}
	mfs, _ := h.Registry().Gather()
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "tailgate_tied_") {
			t.Errorf("hedge mode registers %s", mf.GetName())
		}
	}
}

// In hedge mode too, a client's tie headers never reach a replica: a tie
// is for the gateway to make.
func TestClientTieHeadersNotForwarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		app := newTiedApp("a", 0)
		net.Handle("a.test", app)
		g, err := New(Config{Backends: []string{"http://a.test"}, Base: net})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Header.Set(tiedwire.TieHeader, "client-tie")
		r.Header.Set(tiedwire.PeerHeader, "http://b.test")
		r.Header.Set("X-Other", "kept")
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		net.Wait()
		got := app.requests()
		if w.Code != 200 || len(got) != 1 || got[0].hdr.Get("X-Other") != "kept" ||
			len(got[0].hdr[tiedwire.TieHeader]) != 0 || len(got[0].hdr[tiedwire.PeerHeader]) != 0 {
			t.Errorf("%d, replica saw %+v", w.Code, got)
		}
	})
}

// Over real HTTP on 127.0.0.1: two backends behind tied.Server, each with
// the other as its peer, one of them busy (its only worker held). Copies
// queued at the busy one are dropped there when their twins start on the
// idle one. Only accounting invariants are checked, not timings.
func TestTiedLoopback(t *testing.T) {
	release := make(chan struct{})
	var busySrv *tied.Server
	busyDrops := func() uint64 {
		st := busySrv.Stats()
		return st.DroppedByTwin + st.DroppedOnArrival
	}
	var urls [2]string
	var https [2]*httptest.Server
	var srvs [2]*tied.Server
	for i := range 2 {
		https[i] = httptest.NewUnstartedServer(nil)
		urls[i] = "http://" + https[i].Listener.Addr().String()
	}
	for i := range 2 {
		s, err := tied.NewServer(tied.ServerConfig{Workers: 1, Peers: []string{urls[1-i]}})
		if err != nil {
			t.Fatal(err)
		}
		srvs[i] = s
		var h http.HandlerFunc
		if i == 0 {
			h = func(w http.ResponseWriter, r *http.Request) {
				<-release
				io.WriteString(w, "busy")
			}
		} else {
			h = func(w http.ResponseWriter, r *http.Request) {
				// Answer once the busy backend has dropped a copy (the
				// first time), with a bound: so that at least one drop is
				// seen however slow the machine, and the client never
				// cancels the busy copy first.
				for end := time.Now().Add(2 * time.Second); busyDrops() == 0 && time.Now().Before(end); {
					time.Sleep(time.Millisecond)
				}
				io.WriteString(w, "idle")
			}
		}
		https[i].Config.Handler = s.Handler(h)
		https[i].Start()
	}
	busySrv = srvs[0]
	var blocked sync.WaitGroup
	defer func() {
		close(release)
		blocked.Wait()
		for i := range 2 {
			https[i].Close()
			srvs[i].Close()
		}
	}()
	blocker := &http.Client{Transport: &http.Transport{}}
	defer blocker.CloseIdleConnections()
	blocked.Go(func() {
		if resp, err := blocker.Get(urls[0] + "/block"); err == nil {
			resp.Body.Close()
		}
	})
	for end := time.Now().Add(10 * time.Second); busySrv.Stats().Running != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("busy backend's worker never taken")
		}
	}

	g, err := New(Config{Backends: urls[:], Tied: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	front := httptest.NewServer(g)
	defer front.Close()
	client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	const n = 20
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range n {
		wg.Go(func() {
			resp, err := client.Get(front.URL + "/item")
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && string(b) == "idle" {
				ok.Add(1)
			} else {
				t.Errorf("%d %q", resp.StatusCode, b)
			}
		})
	}
	wg.Wait()
	if ok.Load() != n {
		t.Fatalf("%d of %d reads answered by the idle backend", ok.Load(), n)
	}
	// The busy backend runs only the blocker: each tied copy it receives
	// is, in the end, dropped for its twin or abandoned by the gateway
	// (cancelled copies leave its queue as their cancellation arrives).
	settled := func(s tied.Stats) bool {
		return s.Queued == 0 && s.Tied == s.DroppedByTwin+s.DroppedOnArrival+s.Abandoned
	}
	for end := time.Now().Add(10 * time.Second); !settled(busySrv.Stats()); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			st := busySrv.Stats()
			t.Fatalf("busy backend: %d tied copies, %d+%d dropped, %d abandoned, %d queued", st.Tied, st.DroppedByTwin, st.DroppedOnArrival, st.Abandoned, st.Queued)
		}
	}
	// The gateway's counts first: a dropped answer it counts was counted
	// by the busy backend before it was sent.
	c := g.metrics.tied()
	busy, idle := srvs[0].Stats(), srvs[1].Stats()
	t.Logf("busy %+v\nidle %+v\ngateway %+v", busy, idle, c)
	if busy.DroppedByTwin+busy.DroppedOnArrival == 0 {
		t.Error("no tied copy dropped at the busy backend")
	}
	if busy.Dequeued != 1 {
		t.Errorf("busy backend ran %d requests, want the blocker only", busy.Dequeued)
	}
	// The idle backend ran every read once, and dropped nothing (the busy
	// one never started a copy, so never sent a cancel).
	if idle.Dequeued != n || idle.DroppedByTwin+idle.DroppedOnArrival != 0 || busy.CancelsSent+busy.CancelsFailed != 0 {
		t.Errorf("idle backend %+v, busy's cancels %d+%d", idle, busy.CancelsSent, busy.CancelsFailed)
	}
	// The gateway: every read tied and answered by a copy; it cannot have
	// seen more dropped answers than were sent, nor the backends more
	// tied copies than it sent.
	if c.FirstCopies != n || c.Requests[tiedFirst]+c.Requests[tiedSecond] != n {
		t.Errorf("gateway counts %+v", c)
	}
	if got := c.DroppedQueued + c.DroppedOnArrival; got > int64(busy.DroppedByTwin+busy.DroppedOnArrival) {
		t.Errorf("gateway saw %d dropped answers, the busy backend dropped %d", got, busy.DroppedByTwin+busy.DroppedOnArrival)
	}
	if busy.Tied+idle.Tied > uint64(c.FirstCopies+c.SecondCopies) || idle.Tied+idle.Untied != n {
		t.Errorf("backends counted %d+%d tied copies, the gateway sent %d+%d", busy.Tied, idle.Tied, c.FirstCopies, c.SecondCopies)
	}
	if pr, h := attemptCounts(t, g); pr != n || h != c.SecondCopies {
		t.Errorf("attempts %d primaries, %d hedges; want %d and the second copies %d", pr, h, n, c.SecondCopies)
	}
	for _, st := range g.Replicas().Snapshot(time.Now()) {
		if st.Failures != 0 || st.Breaker != replica.Closed {
			t.Errorf("%s: %+v", st.Name, st)
		}
	}
}

// firstCopyResets fails every first copy at the transport level after a
// while; second copies (marked as hedges) go through to net.
type firstCopyResets struct{ net *memnet.Transport }

func (f firstCopyResets) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get(hedge.HedgeHeader) != "" {
		return f.net.RoundTrip(r)
	}
	if !memnet.Sleep(r.Context(), 5*time.Millisecond) {
		return nil, r.Context().Err()
	}
	return nil, errors.New("read tcp: connection reset by peer")
}

// When the copy that ran fails after its twin was dropped, the 502 names
// that failure, not the drop (the engine keeps the refused dropped answer
// over the later transport error).
func TestTiedFailureAfterDropIsNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := new(memnet.Transport)
		dropper := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(tiedwire.DroppedHeader, tiedwire.DroppedQueued)
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		net.Handle("a.test", dropper)
		net.Handle("b.test", dropper)
		g, err := New(Config{Backends: []string{"http://a.test", "http://b.test"}, Base: firstCopyResets{net}, Tied: true,
			Replica: replica.Config{Seed: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		code, body, _ := getIn(g, "/x")
		if code != http.StatusBadGateway || !strings.Contains(body, "connection reset by peer") {
			t.Errorf("%d %q, want 502 naming the reset", code, body)
		}
	})
}
