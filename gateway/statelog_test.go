package gateway

import (
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
)

// lines returns the log's lines, without the time (it is the bubble's).
func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l != "" {
			out = append(out, regexp.MustCompile(`^time=\S+ `).ReplaceAllString(l, ""))
		}
	}
	return out
}

func (s *syncBuffer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

// A lone replica fails: its breaker opening and the gateway turning
// unready are logged once each, however often /readyz is asked; the
// cooldown over, /readyz sees it ready, and the probe's success closes
// the breaker, each said once.
func TestBreakerAndReadinessLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": time.Millisecond})
		m.fail["a.test"] = true
		var log syncBuffer
		g, err := New(Config{Backends: memBackends[:1], Base: m, Logger: slog.New(slog.NewTextHandler(&log, nil)), DisableProbation: true,
			Policy: hedge.Policy{MaxAttempts: 1}, Replica: replica.Config{FailureThreshold: 2, Cooldown: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if code, _ := adminGet(g, "/readyz"); code != 200 {
			t.Fatalf("readyz %d at start", code)
		}
		for range 4 {
			getIn(g, "/fail") // 502, 502, then refused: no replica
			adminGet(g, "/readyz")
		}
		want := []string{
			`level=WARN msg="all attempts failed" path=/fail err="replica answered 500 Internal Server Error" suppressed=0`,
			`level=WARN msg="breaker opened: replica refused attempts" replica=http://a.test failures=2 cooldown=1s`,
			`level=WARN msg="not ready: no replica available, every breaker is open" replicas=1`,
			`level=WARN msg="no replica available: every circuit breaker is open" path=/fail suppressed=0`,
		}
		if got := log.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		log.reset()
		time.Sleep(time.Second)
		for range 2 {
			if code, _ := adminGet(g, "/readyz"); code != 200 {
				t.Fatalf("readyz %d after the cooldown", code)
			}
		}
		if code, _, _ := getIn(g, "/ok"); code != 200 {
			t.Fatalf("probe: %d", code)
		}
		adminGet(g, "/readyz")
		want = []string{
			`level=INFO msg="ready: a replica is available again" available=1 replicas=1`,
			`level=INFO msg="breaker half-open: one probe let through" replica=http://a.test`,
			`level=INFO msg="breaker closed: replica back in use" replica=http://a.test`,
		}
		if got := log.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}

		// Nobody asks /readyz: the breaker's closing tells that the
		// gateway is ready again; a failed probe that reopens it, not.
		log.reset()
		getIn(g, "/fail")
		getIn(g, "/fail")
		time.Sleep(time.Second)
		getIn(g, "/fail") // the probe fails
		time.Sleep(2 * time.Second)
		getIn(g, "/ok")
		want = []string{
			`level=WARN msg="breaker opened: replica refused attempts" replica=http://a.test failures=2 cooldown=1s`,
			`level=WARN msg="not ready: no replica available, every breaker is open" replicas=1`,
			`level=INFO msg="breaker half-open: one probe let through" replica=http://a.test`,
			`level=WARN msg="breaker reopened: its probe failed" replica=http://a.test cooldown=2s`,
			`level=INFO msg="breaker half-open: one probe let through" replica=http://a.test`,
			`level=INFO msg="breaker closed: replica back in use" replica=http://a.test`,
			`level=INFO msg="ready: a replica is available again" available=1 replicas=1`,
		}
		var got []string
		for _, l := range log.lines() {
			if !strings.Contains(l, "all attempts failed") { // the failures' own lines are another test's
				got = append(got, l)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// A replica going on probation and coming back is logged once each, with
// the reason /debug/replicas gives.
func TestProbationLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 5 * time.Millisecond, "b.test": 5 * time.Millisecond, "c.test": 50 * time.Millisecond})
		var log syncBuffer
		g, err := New(Config{Backends: memBackends, Base: m, Replica: quickProbation, Logger: slog.New(slog.NewJSONHandler(&log, nil)),
			Policy: hedge.Policy{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		untilProbation(t, g, 2, 20*time.Second, onProbation)
		reason := probationOf(g, 2).Reason
		m.set("c.test", 5*time.Millisecond)
		untilProbation(t, g, 2, 20*time.Second, offProbation)
		back := probationOf(g, 2).Reason
		for range 100 { // and nothing more to say while nothing moves
			getIn(g, "/item")
			time.Sleep(10 * time.Millisecond)
		}
		var got []map[string]any
		for _, l := range log.lines() {
			var line map[string]any
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			if strings.Contains(line["msg"].(string), "probation") {
				got = append(got, line)
			}
		}
		if len(got) != 2 ||
			got[0]["level"] != "WARN" || got[0]["msg"] != "replica on probation: shadow requests only" || got[0]["replica"] != "http://c.test" || got[0]["reason"] != reason ||
			got[1]["level"] != "INFO" || got[1]["msg"] != "replica off probation: back in the rotation" || got[1]["replica"] != "http://c.test" || got[1]["reason"] != back {
			t.Errorf("probation lines %v; want one on (%q), one off (%q)", got, reason, back)
		}
	})
}

// Failed probes do not make the gateway look ready on the way: when one
// replica's probe fails, the other's cooldown may be over (it counts as
// available until its own probe is taken), but nothing has come back.
func TestReopeningIsNotReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": time.Millisecond, "b.test": time.Millisecond})
		m.fail["a.test"], m.fail["b.test"] = true, true
		var log syncBuffer
		g, err := New(Config{Backends: memBackends[:2], Base: m, Logger: slog.New(slog.NewTextHandler(&log, nil)), DisableProbation: true,
			Replica: replica.Config{FailureThreshold: 1, Cooldown: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		getIn(g, "/fail") // the primary fails, then the retry: both open
		time.Sleep(time.Second)
		getIn(g, "/fail") // both probes fail
		if n := log.count("breaker reopened"); n != 2 {
			t.Fatalf("%d reopenings:\n%s", n, log.b.String())
		}
		if n, m := log.count(`msg="not ready`), log.count(`msg="ready`); n != 1 || m != 0 {
			t.Errorf("%d lines not ready, %d ready, want 1 and 0:\n%s", n, m, log.b.String())
		}
	})
}
