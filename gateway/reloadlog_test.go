package gateway

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
)

// After a reload that gives the indexes to other replicas, each breaker
// change is logged once under its own backend's name: none is dropped as
// stale on account of the generations another replica reached at that
// index, nor of those of a replica removed and added again (a new one,
// cold); readiness moves with the reload; and the access log, New's for
// good, names the replica that answered from the request's configuration.
func TestReloadLogsReplicasByName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": time.Millisecond, "c.test": time.Millisecond})
		fail := func(host string, on bool) {
			m.mu.Lock()
			m.fail[host] = on
			m.mu.Unlock()
		}
		var log, access syncBuffer
		cfg := Config{Backends: []string{"http://a.test"}, Base: m, Logger: slog.New(slog.NewTextHandler(&log, nil)),
			AccessLog: jsonLogger(&access), DisableProbation: true, Policy: hedge.Policy{MaxAttempts: 1},
			Replica: replica.Config{Seed: 1, FailureThreshold: 2, Cooldown: time.Second}}
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		var bodies []string // of the reads since the first reload, in order
		read := func() {
			code, body, _ := getIn(g, "/fail")
			if code == 200 {
				bodies = append(bodies, body)
			} else {
				bodies = append(bodies, "")
			}
		}

		// a, replica 0, opens, closes and opens again: generation 4.
		fail("a.test", true)
		getIn(g, "/fail")
		getIn(g, "/fail")
		time.Sleep(time.Second)
		fail("a.test", false)
		getIn(g, "/fail") // the probe succeeds
		fail("a.test", true)
		getIn(g, "/fail")
		getIn(g, "/fail")
		if st := g.Replicas().Snapshot(time.Now())[0]; st.Breaker != replica.Open || st.Generation != 4 {
			t.Fatalf("a before the reload: %+v", st)
		}
		log.reset()
		access.reset()

		// c joins ahead of a: c is replica 0 now, a replica 1.
		cfg.Backends = []string{"http://c.test", "http://a.test"}
		if _, err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		fail("c.test", true)
		read() // a is open: both go to c, which opens (its generation 1)
		read()
		time.Sleep(time.Second)
		fail("a.test", false)
		fail("c.test", false)
		read() // both cooldowns are over: c's probe first (the lower index)
		read() // then a's
		read()
		want := []string{
			`level=INFO msg="ready: a replica is available again" available=1 replicas=2`,
			`level=WARN msg="breaker opened: replica refused attempts" replica=http://c.test failures=2 cooldown=1s`,
			`level=WARN msg="not ready: no replica available, every breaker is open" replicas=2`,
			`level=INFO msg="breaker half-open: one probe let through" replica=http://c.test`,
			`level=INFO msg="breaker closed: replica back in use" replica=http://c.test`,
			`level=INFO msg="ready: a replica is available again" available=2 replicas=2`,
			`level=INFO msg="breaker half-open: one probe let through" replica=http://a.test`,
			`level=INFO msg="breaker closed: replica back in use" replica=http://a.test`,
		}
		if got := stateLines(log.lines()); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("log after the reload:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}

		// a is removed, then added again: a new replica, cold, whose
		// first opening (its generation 1) is logged. (The access log
		// and its sample stay New's: every read is still logged.)
		cfg.AccessLog, cfg.AccessLogSample = nil, 0.01
		cfg.Backends = []string{"http://c.test"}
		if _, err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		cfg.Backends = []string{"http://a.test", "http://c.test"}
		if _, err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		log.reset()
		fail("a.test", true)
		for range 20 {
			if st := g.Replicas().Snapshot(time.Now())[0]; st.Breaker == replica.Open {
				break
			}
			read()
		}
		want = []string{`level=WARN msg="breaker opened: replica refused attempts" replica=http://a.test failures=2 cooldown=1s`}
		if got := stateLines(log.lines()); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("log after a was added again:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}

		lines := accessLines(t, &access)
		if len(lines) != len(bodies) {
			t.Fatalf("%d access lines for %d reads", len(lines), len(bodies))
		}
		answered := 0
		for k, l := range lines {
			if bodies[k] == "" {
				continue
			}
			answered++
			if l["replica"] != "http://"+bodies[k] {
				t.Errorf("access line %d: replica %v, answered by %s", k, l["replica"], bodies[k])
			}
		}
		if answered < 3 {
			t.Errorf("%d reads answered since the first reload, want at least 3", answered)
		}
	})
}

// stateLines are the lines of changes of state: those of the failed
// reads themselves (one a second at most) are left out.
func stateLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, "all attempts failed") {
			out = append(out, l)
		}
	}
	return out
}

// A replica on probation that a reload removes is logged off probation,
// as removed; one that stays on probation across a reload that changes
// its index is not logged again, and one a reload turns probation off for
// is logged back in the rotation, with why.
func TestReloadLogsProbationExits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 5 * time.Millisecond, "b.test": 5 * time.Millisecond, "c.test": 50 * time.Millisecond})
		var log syncBuffer
		cfg := Config{Backends: memBackends, Base: m, Replica: quickProbation, Logger: slog.New(slog.NewTextHandler(&log, nil)),
			Policy: hedge.Policy{MaxAttempts: 1}}
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		untilProbation(t, g, 2, 20*time.Second, onProbation)
		log.reset()
		cfg.Backends = []string{"http://c.test", "http://a.test", "http://b.test"}
		if _, err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		if !probationOf(g, 0).Status.OnProbation() {
			t.Fatalf("c, now replica 0, after the reload: %+v", probationOf(g, 0))
		}
		cfg.Backends = []string{"http://a.test", "http://b.test"}
		if _, err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		want := []string{`level=INFO msg="replica off probation: removed from the backends" replica=http://c.test`}
		if got := log.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}

		cfg.Backends = memBackends
		if _, err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		untilProbation(t, g, 2, 20*time.Second, onProbation)
		log.reset()
		cfg.DisableProbation = true
		if _, err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		want = []string{`level=INFO msg="replica off probation: back in the rotation" replica=http://c.test reason="probation turned off"`}
		if got := log.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
