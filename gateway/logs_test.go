package gateway

import (
	"log/slog"
	"regexp"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
)

// One line per second at most, and the next line counts those held back
// in between; a quiet spell costs nothing and saves nothing up.
func TestLimitedLog(t *testing.T) {
	var l limitedLog
	s := int64(time.Second)
	for _, step := range []struct {
		at         int64
		ok         bool
		suppressed int64
	}{
		{0, true, 0},
		{1, false, 0},
		{s / 2, false, 0},
		{s - 1, false, 0},
		{s, true, 3},
		{s + 1, false, 0},
		{10 * s, true, 1}, // long after: one line, with the one held back
		{10*s + 1, false, 0},
		{11 * s, true, 1},
		{12 * s, true, 0},
	} {
		ok, n := l.allowAt(step.at)
		if ok != step.ok || n != step.suppressed {
			t.Errorf("at %v: %v %d, want %v %d", time.Duration(step.at), ok, n, step.ok, step.suppressed)
		}
	}
}

// Every read failing: one "all attempts failed" line a second, however
// many reads fail, each saying how many lines it stands for; a timeout is
// another cause, with a budget of its own.
func TestFailuresLoggedOncePerSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": time.Millisecond})
		m.fail["a.test"] = true
		m.slowPaths["/slow"] = time.Hour
		var log syncBuffer
		g, err := New(Config{Backends: memBackends[:1], Base: m, Logger: slog.New(slog.NewTextHandler(&log, nil)), Timeout: 100 * time.Millisecond,
			DisableProbation: true, Replica: replica.Config{FailureThreshold: 1000}, Policy: hedge.Policy{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for range 50 { // 50ms: within one second
			if code, _, _ := getIn(g, "/fail"); code != 502 {
				t.Fatalf("status %d", code)
			}
		}
		if n := log.count(`msg="all attempts failed"`); n != 1 {
			t.Fatalf("%d lines for 50 failures within a second, want 1:\n%s", n, log.b.String())
		}
		time.Sleep(time.Second)
		getIn(g, "/fail")
		re := regexp.MustCompile(`msg="all attempts failed" path=/fail err=".*replica answered 500 Internal Server Error" suppressed=(\d+)`)
		if got := re.FindAllStringSubmatch(log.b.String(), -1); len(got) != 2 || got[0][1] != "0" || got[1][1] != "49" {
			t.Errorf("lines %q, want two, the second standing for the 49 held back:\n%s", got, log.b.String())
		}

		// A timeout is logged although a failure was just logged.
		for range 3 {
			if code, _, _ := getIn(g, "/slow"); code != 504 {
				t.Fatalf("status %d", code)
			}
		}
		if n := log.count(`msg="request timed out" path=/slow timeout=100ms suppressed=0`); n != 1 || log.count("request timed out") != 1 {
			t.Errorf("timeouts: %d lines, want 1:\n%s", n, log.b.String())
		}
	})
}
