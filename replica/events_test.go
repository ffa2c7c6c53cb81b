package replica

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// eventLog records the events of a Set and checks that each arrives with
// none of the Set's locks held.
type eventLog struct {
	t      *testing.T
	s      *Set
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) onChange(e Event) {
	// By name: the event's index may be another generation's than l.s.
	if i, ok := l.s.Index(e.Name); ok {
		r := l.s.reps[i]
		if !r.mu.TryLock() {
			l.t.Errorf("%v reported under the replica's lock", e.Kind)
		} else {
			r.mu.Unlock()
		}
	}
	if l.s.cfg.Probation.Enabled {
		if !l.s.lin.prob.mu.TryLock() {
			l.t.Errorf("%v reported under the judge's lock", e.Kind)
		} else {
			l.s.lin.prob.mu.Unlock()
		}
	}
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) take() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.events
	l.events = nil
	return e
}

// withEvents returns cfg reporting to a new eventLog, to be given the Set.
func withEvents(t *testing.T, cfg Config) (Config, *eventLog) {
	l := &eventLog{t: t}
	cfg.OnChange = l.onChange
	return cfg, l
}

// Each move of a breaker is reported once, with its generation and, for an
// opening, the failures and the cooldown; nothing else is.
func TestOnChangeBreaker(t *testing.T) {
	cfg, log := withEvents(t, Config{FailureThreshold: 2, Cooldown: time.Second, MaxCooldown: 4 * time.Second})
	s := mustNew(t, 2, cfg)
	log.s = s
	expect := func(what string, want ...Event) {
		t.Helper()
		got := log.take()
		if len(got) != len(want) {
			t.Fatalf("%s: events %+v, want %+v", what, got, want)
		}
		for i := range got {
			if want[i].Name == "" {
				want[i].Name = "http://r0.test"
			}
			if got[i] != want[i] {
				t.Errorf("%s: event %+v, want %+v", what, got[i], want[i])
			}
		}
	}
	s.Done(pickAt(t, s, 0, t0), Success, t0)
	s.Done(pickAt(t, s, 0, t0), Failure, t0)
	stale := pickAt(t, s, 0, t0)
	expect("a success, a failure under the threshold")
	s.Done(pickAt(t, s, 0, t0), Failure, t0)
	expect("the threshold", Event{Kind: BreakerOpened, Generation: 1, Failures: 2, Cooldown: time.Second})
	s.Done(stale, Failure, t0)
	expect("a stale failure")

	probe := pickAt(t, s, 0, t0.Add(time.Second))
	expect("the cooldown over", Event{Kind: BreakerHalfOpen, Generation: 2})
	s.Done(probe, Canceled, t0.Add(time.Second))
	expect("a cancelled probe")
	probe = pickAt(t, s, 0, t0.Add(time.Second))
	expect("the probe taken again")
	s.Done(probe, Failure, t0.Add(time.Second))
	expect("a failed probe", Event{Kind: BreakerOpened, Generation: 3, Failures: 3, Probe: true, Cooldown: 2 * time.Second})

	probe = pickAt(t, s, 0, t0.Add(3*time.Second))
	s.Done(probe, Success, t0.Add(3*time.Second))
	expect("a successful probe", Event{Kind: BreakerHalfOpen, Generation: 4}, Event{Kind: BreakerClosed, Generation: 5})

	s.Done(pickAt(t, s, 1, t0), Failure, t0)
	s.Done(pickAt(t, s, 1, t0), Failure, t0)
	expect("the other replica", Event{Kind: BreakerOpened, Replica: 1, Name: "http://r1.test", Generation: 1, Failures: 2, Cooldown: time.Second})
}

// A move on or off probation is reported once, with the reason
// /debug/replicas shows for it.
func TestOnChangeProbation(t *testing.T) {
	cfg, log := withEvents(t, Config{Probation: quick})
	lat := 50 * time.Millisecond
	c := newCluster(t, 3, cfg, func(i int, _ time.Time) time.Duration {
		if i == 2 {
			return lat
		}
		return 5 * time.Millisecond
	})
	log.s = c.s
	c.run(10*time.Second, c.on(2))
	got := log.take()
	if len(got) != 1 || got[0].Kind != ProbationEntered || got[0].Replica != 2 || got[0].Name != "http://r2.test" ||
		got[0].Reason != c.state(2).Reason || !strings.HasPrefix(got[0].Reason, "p50 50ms is 10.0x peers' 5ms for 1") {
		t.Fatalf("entering: %+v; state %+v", got, c.state(2))
	}
	lat = 5 * time.Millisecond
	c.run(10*time.Second, func() bool { return !c.s.reps[2].probation.Load() })
	got = log.take()
	if len(got) != 1 || got[0].Kind != ProbationExited || got[0].Replica != 2 ||
		!strings.HasPrefix(got[0].Reason, "came off probation: p50 5ms is 1.0x peers' 5ms for 1") {
		t.Fatalf("exiting: %+v; state %+v", got, c.state(2))
	}
	c.run(2*time.Second, nil)
	if got := log.take(); len(got) != 0 {
		t.Errorf("events while nothing moved: %+v", got)
	}
}

// A hook costs no allocation on the path of an attempt that moves
// nothing, nor does its absence.
func TestOnChangeNoAllocations(t *testing.T) {
	for _, hook := range []func(Event){nil, func(Event) {}} {
		s := mustNew(t, 3, Config{OnChange: hook, Probation: Probation{Enabled: true}})
		now := t0
		if n := testing.AllocsPerRun(1000, func() {
			now = now.Add(time.Microsecond)
			_, tk, _ := s.Pick(now, Attempt{})
			s.Done(tk, Success, now.Add(time.Millisecond))
		}); n != 0 {
			t.Errorf("hook %v: %v allocations per attempt", hook != nil, n)
		}
	}
}

func TestEventKindString(t *testing.T) {
	if BreakerOpened.String() != "breakerOpened" || ProbationExited.String() != "probationExited" || EventKind(0).String() != "EventKind(0)" {
		t.Error(BreakerOpened, ProbationExited, EventKind(0))
	}
}

// After Next changes the members' order, an event names the replica that
// moved, with its index in the generation that moved it: the newest one,
// or the older one to which a drained replica's attempt is given back.
func TestOnChangeAcrossGenerations(t *testing.T) {
	n := names(3)
	cfg, log := withEvents(t, Config{FailureThreshold: 1, Cooldown: time.Second})
	s := mustNew(t, 3, cfg)
	log.s = s
	held := pickAt(t, s, 1, t0) // r1's, in flight across the change
	next, err := s.Next([]string{n[2], n[0]}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	log.s = next
	next.Done(pickAt(t, next, 0, t0), Failure, t0)
	if got := log.take(); len(got) != 1 || got[0] != (Event{Kind: BreakerOpened, Replica: 0, Name: n[2], Generation: 1, Failures: 1, Cooldown: time.Second}) {
		t.Errorf("r2, now replica 0, failed: %+v", got)
	}
	s.Done(held, Failure, t0)
	if got := log.take(); len(got) != 1 || got[0] != (Event{Kind: BreakerOpened, Replica: 1, Name: n[1], Generation: 1, Failures: 1, Cooldown: time.Second}) {
		t.Errorf("removed r1's attempt failed: %+v", got)
	}
	probe := pickAt(t, next, 0, t0.Add(time.Second))
	next.Done(probe, Success, t0.Add(time.Second))
	if got := log.take(); len(got) != 2 || got[0].Name != n[2] || got[0].Kind != BreakerHalfOpen || got[1].Name != n[2] || got[1].Kind != BreakerClosed || got[1].Generation != 3 {
		t.Errorf("r2's probe: %+v", got)
	}
}

// A replica that Next takes off probation, removed or with probation
// turned off, is reported to have come off, with why; one kept stays on,
// unreported.
func TestOnChangeNextTakesOffProbation(t *testing.T) {
	n := names(4)
	cfg, log := withEvents(t, Config{Probation: quick})
	cfg.Probation.Enabled = true
	s := mustNew(t, 4, cfg)
	log.s = s
	forceProbation(s, 1, t0)
	forceProbation(s, 3, t0)
	next, err := s.Next([]string{n[3], n[0], n[2]}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	log.s = next
	if got := log.take(); len(got) != 1 || got[0] != (Event{Kind: ProbationExited, Replica: 1, Name: n[1], Reason: "removed from the set"}) {
		t.Errorf("r1 removed while on probation: %+v", got)
	}
	off := cfg
	off.Probation = Probation{}
	if _, err := next.Next(next.names(), off); err != nil {
		t.Fatal(err)
	}
	if got := log.take(); len(got) != 1 || got[0] != (Event{Kind: ProbationExited, Replica: 0, Name: n[3], Reason: "probation turned off"}) {
		t.Errorf("probation turned off with r3 on: %+v", got)
	}
}

// The judge's moves name the newest generation's replica, by its index
// there.
func TestOnChangeProbationAfterNext(t *testing.T) {
	n := names(3)
	cfg, log := withEvents(t, Config{Probation: quick})
	c := newCluster(t, 3, cfg, func(i int, _ time.Time) time.Duration {
		if i == 0 { // in the next generation: r2
			return 50 * time.Millisecond
		}
		return 5 * time.Millisecond
	})
	cfg.Probation.Enabled = true
	next, err := c.s.Next([]string{n[2], n[0], n[1]}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.s, log.s = next, next
	c.run(10*time.Second, c.on(0))
	if got := log.take(); len(got) != 1 || got[0].Kind != ProbationEntered || got[0].Replica != 0 || got[0].Name != n[2] {
		t.Fatalf("slow r2, replica 0 of the next generation: %+v", got)
	}
}
