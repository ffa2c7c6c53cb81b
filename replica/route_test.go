package replica

import (
	"testing"
	"time"
)

// inFlight sums the tickets out on every replica.
func inFlight(s *Set) int64 {
	var n int64
	for _, r := range s.reps {
		n += r.inflight.Load()
	}
	return n
}

func TestRoutePlainHedgesAndRetriesElsewhere(t *testing.T) {
	s := mustNew(t, 3, Config{})
	now := t0
	setEWMA(s, 0, 1*time.Millisecond, now)
	setEWMA(s, 1, 5*time.Millisecond, now)
	setEWMA(s, 2, 9*time.Millisecond, now)
	r := s.Route(nil, false)
	p, ok := r.Pick(0, false, nil, now)
	if !ok {
		t.Fatal("no primary")
	}
	h, ok := r.Pick(1, false, []int{p}, now)
	if !ok || h == p {
		t.Fatalf("hedge = %d, %v; primary %d", h, ok, p)
	}
	x, ok := r.Pick(2, true, []int{p, h}, now)
	if !ok || x == p || x == h {
		t.Fatalf("retry = %d, %v after %d and %d", x, ok, p, h)
	}
	if _, ok := r.Pick(3, false, []int{p, h, x}, now); ok {
		t.Fatal("a fourth attempt found a replica none of the three used")
	}
	if r.Tied(0) || r.Tied(1) {
		t.Fatal("a plain route reports tied copies")
	}
	for i := range 3 {
		if r.Replica(i) != []int{p, h, x}[i] {
			t.Fatalf("Replica(%d) = %d", i, r.Replica(i))
		}
		r.Done(i, Success, time.Millisecond)
	}
	if n := inFlight(s); n != 0 {
		t.Fatalf("%d tickets still out after every Done", n)
	}
}

func TestRouteOwnersFirstThenFallback(t *testing.T) {
	s := mustNew(t, 4, Config{FailureThreshold: 1})
	now := t0
	r := s.Route([]int{2, 3}, false)
	for range 20 {
		rr := s.Route([]int{2, 3}, false)
		i, ok := rr.Pick(0, false, nil, now)
		if !ok || (i != 2 && i != 3) {
			t.Fatalf("primary %d, %v: not among the owners", i, ok)
		}
		rr.Done(0, Success, time.Millisecond)
	}
	// Both owners' breakers open: the primary goes elsewhere, counted.
	for _, o := range []int{2, 3} {
		tk := pickAt(t, s, o, now)
		s.Done(tk, Failure, now)
	}
	i, ok := r.Pick(0, false, nil, now)
	if !ok || i == 2 || i == 3 {
		t.Fatalf("primary %d, %v with both owners open", i, ok)
	}
	if r.Fallbacks() != 1 {
		t.Fatalf("Fallbacks = %d, want 1", r.Fallbacks())
	}
	r.Done(0, Success, time.Millisecond)
}

// With a home, every primary goes home, however much cheaper the other
// owner is, and the hedge goes to the other owner.
func TestRouteHomeTakesEveryPrimary(t *testing.T) {
	s := mustNew(t, 4, Config{})
	now := t0
	setEWMA(s, 2, 9*time.Millisecond, now) // the home: slow and busy
	setEWMA(s, 3, 1*time.Millisecond, now)
	busy := pickAt(t, s, 2, now)
	for range 50 {
		r := s.RouteHome([]int{2, 3}, false)
		p, ok := r.Pick(0, false, nil, now)
		if !ok || p != 2 {
			t.Fatalf("primary %d, %v; want the home, 2", p, ok)
		}
		h, ok := r.Pick(1, false, []int{p}, now)
		if !ok || h != 3 {
			t.Fatalf("hedge %d, %v; want the other owner, 3", h, ok)
		}
		r.Done(0, Success, 9*time.Millisecond)
		r.Done(1, Canceled, time.Millisecond)
		setEWMA(s, 2, 9*time.Millisecond, now)
		if r.Fallbacks() != 0 {
			t.Fatalf("%d fallbacks", r.Fallbacks())
		}
	}
	s.Done(busy, Success, now)
	// Without a home the same owners share the primaries.
	seen := map[int]bool{}
	for range 50 {
		r := s.Route([]int{2, 3}, false)
		p, _ := r.Pick(0, false, nil, now)
		seen[p] = true
		r.Done(0, Success, time.Millisecond)
	}
	if !seen[3] {
		t.Fatalf("owners mode without a home sent no primary to the cheaper owner: %v", seen)
	}
}

// A home that admits no primary (breaker open, on probation) sends it to
// the other owners, not counted as a fallback; with none of them either,
// to the whole set, counted.
func TestRouteHomeOverflowsToOwnersThenSet(t *testing.T) {
	s := mustNew(t, 4, Config{FailureThreshold: 1})
	now := t0
	setEWMA(s, 1, 9*time.Millisecond, now)
	setEWMA(s, 0, time.Millisecond, now)
	setEWMA(s, 2, time.Millisecond, now)
	for range 10 { // while the home admits one, the home, slow or not
		r := s.RouteHome([]int{1, 0, 2}, false)
		if p, ok := r.Pick(0, false, nil, now); !ok || p != 1 {
			t.Fatalf("primary %d, %v with the home admitting; want 1", p, ok)
		}
		r.Done(0, Success, 9*time.Millisecond)
	}
	s.Done(pickAt(t, s, 1, now), Failure, now) // the home's breaker opens
	r := s.RouteHome([]int{1, 0, 2}, false)
	p, ok := r.Pick(0, false, nil, now)
	if !ok || (p != 0 && p != 2) || r.Fallbacks() != 0 {
		t.Fatalf("primary %d, %v, fallbacks %d; want owner 0 or 2, none", p, ok, r.Fallbacks())
	}
	r.Done(0, Success, time.Millisecond)
	for _, o := range []int{0, 2} {
		s.Done(pickAt(t, s, o, now), Failure, now)
	}
	r = s.RouteHome([]int{1, 0, 2}, false)
	if p, ok := r.Pick(0, false, nil, now); !ok || p != 3 || r.Fallbacks() != 1 {
		t.Fatalf("primary %d, %v, fallbacks %d; want 3, one fallback", p, ok, r.Fallbacks())
	}
	r.Done(0, Success, time.Millisecond)
	// An empty list of owners is plain.
	r = s.RouteHome(nil, false)
	if p, ok := r.Pick(0, false, nil, now); !ok || p != 3 {
		t.Fatalf("primary %d, %v without owners", p, ok)
	}
	r.Done(0, Success, time.Millisecond)
	if n := inFlight(s); n != 0 {
		t.Fatalf("%d tickets out", n)
	}
}

func TestRouteTiedPicksTwinWithPrimary(t *testing.T) {
	s := mustNew(t, 3, Config{})
	now := t0
	r := s.Route(nil, true)
	p, ok := r.Pick(0, false, nil, now)
	if !ok {
		t.Fatal("no primary")
	}
	twin, held := r.Twin()
	if !held || twin == p {
		t.Fatalf("twin %d, held %v, primary %d", twin, held, p)
	}
	if !r.Tied(0) {
		t.Fatal("the first copy of a request with a twin is not tied")
	}
	if n := inFlight(s); n != 2 {
		t.Fatalf("%d tickets out, want the primary's and the twin's", n)
	}
	// The second copy, after the delay, takes the twin, tied.
	got, ok := r.Pick(1, false, []int{p}, now.Add(time.Millisecond))
	if !ok || got != twin || !r.Tied(1) {
		t.Fatalf("second copy %d, %v, tied %v; twin %d", got, ok, r.Tied(1), twin)
	}
	if _, held := r.Twin(); held {
		t.Fatal("the twin is still held after the second copy took it")
	}
	r.Done(0, Success, time.Millisecond)
	r.Done(1, Canceled, time.Millisecond)
	r.Finish()
	if n := inFlight(s); n != 0 {
		t.Fatalf("%d tickets out", n)
	}
}

func TestRouteTiedRetryGoesUntied(t *testing.T) {
	s := mustNew(t, 2, Config{})
	r := s.Route(nil, true)
	p, _ := r.Pick(0, false, nil, t0)
	got, ok := r.Pick(1, true, []int{p}, t0)
	if !ok || got == p || r.Tied(1) {
		t.Fatalf("retry %d, %v, tied %v", got, ok, r.Tied(1))
	}
	r.Done(0, Failure, time.Millisecond)
	r.Done(1, Success, time.Millisecond)
	r.Finish()
	if n := inFlight(s); n != 0 {
		t.Fatalf("%d tickets out", n)
	}
}

func TestRouteTiedWithoutTwinSendsNoSecondCopy(t *testing.T) {
	s := mustNew(t, 1, Config{})
	r := s.Route(nil, true)
	p, ok := r.Pick(0, false, nil, t0)
	if !ok || r.Tied(0) {
		t.Fatalf("primary %d, %v, tied %v: one replica cannot be tied", p, ok, r.Tied(0))
	}
	if _, ok := r.Pick(1, false, []int{p}, t0); ok {
		t.Fatal("an untied duplicate was sent after the delay")
	}
	r.Done(0, Success, time.Millisecond)
}

func TestRouteFinishGivesBackUnusedTwin(t *testing.T) {
	s := mustNew(t, 2, Config{})
	r := s.Route(nil, true)
	r.Pick(0, false, nil, t0)
	r.Done(0, Success, time.Millisecond) // the first copy won before the delay
	if n := inFlight(s); n != 1 {
		t.Fatalf("%d tickets out, want the held twin's", n)
	}
	r.Finish()
	if n := inFlight(s); n != 0 {
		t.Fatalf("%d tickets out after Finish", n)
	}
	st := s.Snapshot(t0)
	for i, x := range st {
		if x.Successes+x.Failures > 1 || x.EWMA > time.Millisecond {
			t.Fatalf("replica %d: %+v: the unused twin moved its state", i, x)
		}
	}
}

func TestRouteReleaseIsNeutral(t *testing.T) {
	s := mustNew(t, 2, Config{FailureThreshold: 1})
	r := s.Route(nil, false)
	p, _ := r.Pick(0, false, nil, t0)
	h, _ := r.Pick(1, false, []int{p}, t0)
	r.release(1)
	if got := stateOfReplica(s, h, t0); got.Canceled != 1 || got.EWMA != 0 || got.InFlight != 0 {
		t.Fatalf("released replica: %+v", got)
	}
	r.Done(0, Failure, time.Millisecond)
	if got := stateOfReplica(s, p, t0); got.Breaker != Open {
		t.Fatalf("a failure given back through the route did not open the breaker: %+v", got)
	}
}

func TestRouteDoesNotAllocate(t *testing.T) {
	s := mustNew(t, 3, Config{})
	among := []int{0, 1}
	used := make([]int, 0, 2)
	if n := testing.AllocsPerRun(100, func() {
		r := s.Route(among, true)
		p, _ := r.Pick(0, false, nil, t0)
		used = append(used[:0], p)
		r.Pick(1, false, used, t0)
		r.Done(0, Success, time.Millisecond)
		r.Done(1, Canceled, time.Millisecond)
		r.Finish()
		r = s.RouteHome(among, false)
		p, _ = r.Pick(0, false, nil, t0)
		r.Done(0, Success, time.Millisecond)
	}); n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}

// A cold key's primary (RouteCold) leaves a busy home for the first other
// owner that is not busy, and says so; a home with few in flight, or
// every owner busy, keeps it home; a warm key (RouteHome) stays home
// however busy.
func TestRouteColdSpillsPastABusyHome(t *testing.T) {
	s := mustNew(t, 4, Config{})
	now := t0
	primary := func(r Route) (int, bool) {
		t.Helper()
		p, ok := r.Pick(0, false, nil, now)
		if !ok {
			t.Fatal("no primary")
		}
		r.Done(0, Success, time.Millisecond)
		return p, r.Spilled()
	}
	load := func(i, n int) []Ticket {
		var ts []Ticket
		for range n {
			ts = append(ts, pickAt(t, s, i, now))
		}
		return ts
	}
	owners := []int{1, 2, 3}
	if p, spilled := primary(s.RouteCold(owners, false)); p != 1 || spilled {
		t.Fatalf("idle home: primary %d, spilled %v; want 1, no", p, spilled)
	}
	home := load(1, spillMinInFlight-1) // below the minimum: not busy
	if p, spilled := primary(s.RouteCold(owners, false)); p != 1 || spilled {
		t.Fatalf("home with %d in flight: primary %d, spilled %v; want 1, no", spillMinInFlight-1, p, spilled)
	}
	home = append(home, load(1, 1)...) // spillMinInFlight, above 1.25 × the mean: busy
	if p, spilled := primary(s.RouteCold(owners, false)); p != 2 || !spilled {
		t.Fatalf("busy home: primary %d, spilled %v; want 2, yes", p, spilled)
	}
	if p, spilled := primary(s.RouteHome(owners, false)); p != 1 || spilled {
		t.Fatalf("warm key, busy home: primary %d, spilled %v; want 1, no", p, spilled)
	}
	second := load(2, spillMinInFlight) // the next owner busy too: the third
	if p, spilled := primary(s.RouteCold(owners, false)); p != 3 || !spilled {
		t.Fatalf("home and owner 2 busy: primary %d, spilled %v; want 3, yes", p, spilled)
	}
	third := load(3, spillMinInFlight) // every owner busy: home
	if p, spilled := primary(s.RouteCold(owners, false)); p != 1 || spilled {
		t.Fatalf("every owner busy: primary %d, spilled %v; want 1, no", p, spilled)
	}
	// No owners, or an index out of range: plain, no panic.
	if _, spilled := primary(s.RouteCold(nil, false)); spilled {
		t.Fatal("no owners: spilled")
	}
	if p, spilled := primary(s.RouteCold([]int{9, 1}, false)); spilled || p < 0 {
		t.Fatalf("an owner out of range: primary %d, spilled %v", p, spilled)
	}
	for _, tk := range append(append(home, second...), third...) {
		s.Done(tk, Success, now)
	}
	if n := inFlight(s); n != 0 {
		t.Fatalf("%d tickets out", n)
	}
}
