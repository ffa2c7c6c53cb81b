package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// replicaCounts returns tailgate_replica_attempts_total's non-zero series
// as "replica role outcome" → value, the replica's URL without its scheme.
func replicaCounts(t *testing.T, g *Gateway) map[string]float64 {
	t.Helper()
	mfs, err := g.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "tailgate_replica_attempts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				out[strings.TrimPrefix(l["replica"], "http://")+" "+l["role"]+" "+l["outcome"]] = v
			}
		}
	}
	return out
}

// wantCounts compares the counts with want, in which "P" and "H" stand for
// the replicas that got the primary and the hedge: the primary went to the
// replica that m counted one for.
func wantCounts(t *testing.T, g *Gateway, m *memReplicas, want map[string]float64) {
	t.Helper()
	primary, hedged := "a.test", "b.test"
	if p, _, _ := m.counts("b.test"); p > 0 {
		primary, hedged = hedged, primary
	}
	w := map[string]float64{}
	for k, v := range want {
		k = strings.Replace(strings.Replace(k, "P ", primary+" ", 1), "H ", hedged+" ", 1)
		w[k] = v
	}
	got := replicaCounts(t, g)
	if !mapsEqual(got, w) {
		t.Errorf("replica attempts %v, want %v", got, w)
	}
	// Every attempt started is settled to exactly one outcome.
	for _, role := range []string{"primary", "hedge"} {
		sum := 0.0
		for k, v := range got {
			if strings.Contains(k, " "+role+" ") {
				sum += v
			}
		}
		if started := counterValue(t, g, "tailgate_attempts_total", "role", role); sum != started {
			t.Errorf("%s: %v outcomes for %v attempts started", role, sum, started)
		}
	}
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Each attempt is counted once, against its replica and role, with the
// outcome that tells a dashboard which replica is slow (lost, timeout) and
// which fails (failed), whether it ends before or after its read is
// decided.
func TestReplicaAttemptOutcomes(t *testing.T) {
	slow := func(m *memReplicas) { m.slowPaths["/fail/x"] = time.Second }
	for _, tc := range []struct {
		name    string
		setup   func(m *memReplicas)
		fail    bool          // primaries answer 500
		timeout time.Duration // the gateway's
		cancel  time.Duration // the client leaves after this long
		code    int
		want    map[string]float64
	}{
		{"the primary straggles, the hedge wins", func(m *memReplicas) { m.slowFirst["/fail/x"] = time.Second }, false, 0, 0, 200,
			map[string]float64{"P primary lost": 1, "H hedge won": 1}},
		{"the primary wins while the hedge runs", nil, false, 0, 0, 200,
			map[string]float64{"P primary won": 1, "H hedge lost": 1}},
		{"the primary fails, the hedge wins", nil, true, 0, 0, 200,
			map[string]float64{"P primary failed": 1, "H hedge won": 1}},
		{"both fail", func(m *memReplicas) { m.fail["a.test"], m.fail["b.test"] = true, true }, false, 0, 0, 502,
			map[string]float64{"P primary failed": 1, "H hedge failed": 1}},
		{"time runs out", slow, false, 25 * time.Millisecond, 0, 504,
			map[string]float64{"P primary timeout": 1, "H hedge timeout": 1}},
		{"the client leaves", slow, false, 0, 25 * time.Millisecond, 0,
			map[string]float64{"P primary canceled": 1, "H hedge canceled": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// 30ms each: a hedge sent at 20ms answers 20ms after the
				// primary.
				m := newMemReplicas(map[string]time.Duration{"a.test": 30 * time.Millisecond, "b.test": 30 * time.Millisecond})
				if tc.setup != nil {
					tc.setup(m)
				}
				var base http.RoundTripper = m
				if tc.fail {
					base = failPrimaries{m}
				}
				g, err := New(Config{Backends: []string{"http://a.test", "http://b.test"}, Base: base, Policy: fixedPolicy(20 * time.Millisecond),
					Timeout: tc.timeout, DisableProbation: true})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tc.cancel > 0 {
					time.AfterFunc(tc.cancel, cancel)
				}
				code := g.serve(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, "/fail/x", nil), time.Now(), nil).code
				synctest.Wait() // the losers have ended
				if code != tc.code {
					t.Errorf("status %d, want %d", code, tc.code)
				}
				wantCounts(t, g, m, tc.want)
			})
		})
	}
}

// failPrimaries answers every primary (an attempt not marked as a hedge)
// with a 500, once its replica has taken its time.
type failPrimaries struct{ *memReplicas }

func (f failPrimaries) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := f.memReplicas.RoundTrip(r)
	if err == nil && r.Header.Get(hedge.HedgeHeader) == "" {
		resp.StatusCode = http.StatusInternalServerError
	}
	return resp, err
}

// Over real sockets, a cancelled loser is lost, not failed: the error
// net/http returns for it still says it was cancelled.
func TestLoopbackReplicaAttemptLoserIsLost(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	a := newBackend(t, "a", straggleUnlessHedge)
	b := newBackend(t, "b", straggleUnlessHedge)
	g, srv := newGateway(t, Config{Policy: fixedPolicy(20 * time.Millisecond)}, a, b)
	resp, body := get(t, srv.URL+"/item")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	winner, loser := a, b
	if body == "b" {
		winner, loser = b, a
	}
	want := map[string]float64{
		strings.TrimPrefix(winner.URL, "http://") + " hedge won":   1,
		strings.TrimPrefix(loser.URL, "http://") + " primary lost": 1,
	}
	var got map[string]float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = replicaCounts(t, g); mapsEqual(got, want) {
			return
		}
	}
	t.Errorf("replica attempts %v, want %v", got, want)
}

// Shadows are counted against their replica as role shadow; the series of
// every replica, role and outcome exist from the start, at zero.
func TestReplicaAttemptSeries(t *testing.T) {
	g, err := New(Config{Backends: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	mfs, err := g.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []string
	for _, mf := range mfs {
		if mf.GetName() == "tailgate_replica_attempts_total" {
			for _, m := range mf.GetMetric() {
				var l []string
				for _, p := range m.GetLabel() {
					l = append(l, p.GetValue())
				}
				series = append(series, strings.Join(l, " "))
			}
		}
	}
	// Labels in order: outcome, replica, role.
	for _, want := range []string{"won http://127.0.0.1:1 primary", "lost http://127.0.0.1:2 hedge", "timeout http://127.0.0.1:1 hedge",
		"answered http://127.0.0.1:2 shadow", "canceled http://127.0.0.1:1 shadow"} {
		if !slices.Contains(series, want) {
			t.Errorf("no series %q in %v", want, series)
		}
	}
	if len(series) != 2*(5+5+4) {
		t.Errorf("%d series, want 28: %v", len(series), series)
	}
	if slices.Contains(series, "won http://127.0.0.1:1 shadow") || slices.Contains(series, "answered http://127.0.0.1:1 primary") {
		t.Error("series for outcomes a role cannot have")
	}
	for err, want := range map[error]int{nil: outAnswered, context.DeadlineExceeded: outTimeout, context.Canceled: outCanceled, hedge.ErrResponseTooLarge: outFailed} {
		if got := shadowOutcome(err); got != want {
			t.Errorf("shadowOutcome(%v) = %s, want %s", err, outcomeNames[got], outcomeNames[want])
		}
	}
}

// Counting an attempt allocates nothing: the children are made with the
// view.
func TestReplicaAttemptCountDoesNotAllocate(t *testing.T) {
	c := newReplicaAttempts().counters([]string{"http://127.0.0.1:1", "http://127.0.0.1:2"})
	if n := testing.AllocsPerRun(100, func() { c[1].count(roleHedge, outLost) }); n != 0 {
		t.Errorf("%v allocations per count", n)
	}
}

func TestReplicaLabel(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8081":            "http://127.0.0.1:8081",
		"http://user:secret@10.0.0.1:8081": "http://10.0.0.1:8081",
		"http://[::1]:8081":                "http://[::1]:8081",
	} {
		if got := replicaLabel(in); got != want {
			t.Errorf("replicaLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// Medians reach /metrics as seconds that print short: 1.2962ms once read
// 0.0012961999999999999.
func TestMsSecondsPrintsShort(t *testing.T) {
	for ns := int64(1); ns < 100_000_000; ns += 997 {
		ms := float64(ns) / 1e6 // as replica reports a median
		s := strconv.FormatFloat(msSeconds(ms), 'g', -1, 64)
		if want := strconv.FormatFloat(time.Duration(ns).Seconds(), 'g', -1, 64); s != want {
			t.Fatalf("%dns: %s, want %s", ns, s, want)
		}
	}
	if got := msSeconds(1.2962); got != 0.0012962 {
		t.Errorf("msSeconds(1.2962) = %v", got)
	}
}
