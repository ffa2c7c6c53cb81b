package gateway

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// Replicas saturated alike (every read 30ms, wherever it goes): the hedges
// lose, the gate shuts, and the gateway says so once, in its metrics, its
// debug view and its log. When the replicas recover and a few reads
// straggle on their primary alone, probes win and the gate reopens, said
// once too.
func TestGateShutsOnSaturationAndSaysSoOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 30 * time.Millisecond, "b.test": 30 * time.Millisecond})
		var log syncBuffer
		budget, _ := hedge.NewBudget(1, 1000)
		g, err := New(Config{Backends: memBackends[:2], Base: m, Logger: slog.New(slog.NewTextHandler(&log, nil)),
			Policy: hedge.Policy{Delay: 10 * time.Millisecond, Budget: budget}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for range 40 {
			if code, body, _ := getIn(g, "/item/1"); code != 200 {
				t.Fatalf("status %d %s", code, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		d := g.replicasState(time.Now()).Hedge
		if d.GateOpen || d.Gate.Open || len(d.Gate.Signals) != 1 || d.Gate.Signals[0] != "noHelp" ||
			!strings.HasPrefix(d.Gate.Reason, "shut: hedges won 0 of ") || d.Gate.WindowHedged < 3 || d.Gate.WindowHedgeWins != 0 {
			t.Errorf("debug view of a saturated pair: %+v", d)
		}
		if v := gaugeValue(t, g, "tailgate_hedge_gate_open"); v != 0 {
			t.Errorf("tailgate_hedge_gate_open %v", v)
		}
		if v := gaugeValue(t, g, "tailgate_hedge_gate_signal", "signal", "noHelp"); v != 1 {
			t.Errorf("noHelp signal %v", v)
		}
		if v := gaugeValue(t, g, "tailgate_hedge_gate_transitions_total", "to", "shut"); v != 1 {
			t.Errorf("shut %v times", v)
		}
		if v := gaugeValue(t, g, "tailgate_hedges_suppressed_total", "reason", "gate"); v < 20 {
			t.Errorf("%v hedges held by the gate", v)
		}
		if n := log.count("overload gate shut"); n != 1 {
			t.Errorf("%d log lines for the gate shutting, want 1:\n%s", n, log.b.String())
		}

		// Recovered: 1ms, and every fifth read straggles 50ms on its
		// primary only; a hedge to the other replica wins.
		m.mu.Lock()
		m.slowFirst["/item/9"] = 50 * time.Millisecond // the same class of read
		m.mu.Unlock()
		m.set("a.test", time.Millisecond)
		m.set("b.test", time.Millisecond)
		start := time.Now()
		for i := 0; g.replicasState(time.Now()).Hedge.GateOpen == false; i++ {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("gate still shut 10s after the replicas recovered: %+v", g.replicasState(time.Now()).Hedge.Gate)
			}
			path := "/item/1"
			if i%5 == 4 {
				path = "/item/9"
			}
			getIn(g, path)
			time.Sleep(10 * time.Millisecond)
		}
		if v := gaugeValue(t, g, "tailgate_hedge_gate_transitions_total", "to", "open"); v != 1 {
			t.Errorf("reopened %v times", v)
		}
		if n := log.count("overload gate reopened"); n != 1 {
			t.Errorf("%d log lines for the gate reopening, want 1", n)
		}
		// Why it reopened: how long it was shut, and the figures its
		// signals are judged on.
		log.mu.Lock()
		reopened := regexp.MustCompile(`msg="overload gate reopened: hedges for late answers resume" route=default class="GET /item/{id}" shutFor=(\S+) state=open evidence="hedges won [1-9]\d* of \d+; [^"]*% of the concurrency limit in use; 0% of the replicas unavailable"`).FindStringSubmatch(log.b.String())
		log.mu.Unlock()
		if reopened == nil {
			t.Errorf("no reopening line with its evidence")
		} else if d, err := time.ParseDuration(reopened[1]); err != nil || d <= 0 || d > 10*time.Second {
			t.Errorf("shut for %q", reopened[1])
		}
		if v := gaugeValue(t, g, "tailgate_hedge_gate_probes_total"); v < 1 {
			t.Errorf("%v probes", v)
		}
	})
}

// The request limit full: the gate shuts for capacity, holds every hedge
// (no probes: hedges cannot disprove a full limit), and reopens a second
// after the limit has room again.
func TestGateShutsWhenLimitsAreFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": 100 * time.Millisecond, "b.test": 100 * time.Millisecond})
		budget, _ := hedge.NewBudget(1, 1000)
		g, err := New(Config{Backends: memBackends[:2], Base: m, MaxInFlightRequests: 10,
			Policy: hedge.Policy{Delay: 10 * time.Millisecond, Budget: budget}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		getIn(g, "/warm")
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { getIn(g, "/item") })
		}
		time.Sleep(50 * time.Millisecond)
		if d := g.replicasState(time.Now()).Hedge.Gate; d.Open || len(d.Signals) != 1 || d.Signals[0] != "capacity" || d.InUse != 1 {
			t.Errorf("ten requests in flight of ten: %+v", d)
		}
		wg.Wait()
		_, hedges, _ := m.counts("a.test")
		_, hedgesB, _ := m.counts("b.test")
		if hedges+hedgesB != 1 || gaugeValue(t, g, "tailgate_hedge_gate_probes_total") != 0 {
			t.Errorf("%d hedges (the warm-up's alone expected), %v probes", hedges+hedgesB, gaugeValue(t, g, "tailgate_hedge_gate_probes_total"))
		}
		time.Sleep(time.Second)
		if d := g.replicasState(time.Now()).Hedge.Gate; !d.Open {
			t.Errorf("a second after the limit had room: %+v", d)
		}
	})
}

// Two of three replicas' breakers open: the gate shuts, since the one left
// carries the whole load; failover to it still goes, bounded by the budget.
func TestGateShutsWhenMostBreakersAreOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemReplicas(map[string]time.Duration{"a.test": time.Millisecond, "b.test": time.Millisecond, "c.test": time.Millisecond})
		m.fail["a.test"], m.fail["b.test"] = true, true
		g, err := New(Config{Backends: memBackends, Base: m, DisableProbation: true,
			Replica: replica.Config{FailureThreshold: 1, Cooldown: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for range 20 {
			getIn(g, "/fail") // 502 until both failing replicas' breakers are open
			time.Sleep(20 * time.Millisecond)
		}
		if code, body, _ := getIn(g, "/fail"); code != 200 || body != "c.test" {
			t.Fatalf("status %d %q: want the healthy replica's answer", code, body)
		}
		if d := g.replicasState(time.Now()).Hedge.Gate; d.Open || len(d.Signals) != 1 || d.Signals[0] != "unavailable" || d.Unavailable < 0.6 {
			t.Errorf("two breakers of three open: %+v", d)
		}
	})
}
