package replica

import "time"

// maxPickRounds bounds how often a pick starts over when a replica it chose
// changed state under it (another pick took the probe slot in between).
const maxPickRounds = 4

// cost returns what sending one more attempt to r at off is expected to
// cost: its peak-EWMA latency times the attempts that would then be in
// flight there, as Finagle's and Linkerd's peak-EWMA balancers price it. A
// replica without a latency sample costs 0, so it is tried. The in-flight
// count is returned to break ties.
func (s *Set) cost(r *replica, off int64) (float64, int64) {
	in := max(r.inflight.Load(), 0)
	e := s.ewmaAt(r, off)
	if e == 0 {
		return 0, in
	}
	return e * float64(in+1), in
}

// better reports whether replica i is a better choice than j at off: lower
// cost, then fewer in flight (replicas without samples all cost 0, and
// spreading them by load beats piling onto one).
func (s *Set) better(i, j int, off int64) bool {
	ci, ni := s.cost(s.reps[i], off)
	cj, nj := s.cost(s.reps[j], off)
	return ci < cj || ci == cj && ni < nj
}

// Role says what a pick is for.
type Role uint8

const (
	// Primary is a request's first attempt: power of two choices among
	// the replicas whose breaker admits a request (see Set.Pick).
	Primary Role = iota
	// Hedge is a duplicate sent because an answer is late: the cheapest
	// replica the request has not used. Never a replica on probation: it
	// is there because it is slow.
	Hedge
	// Retry is an attempt after a failure (a transport error, a 5xx): as
	// Hedge, except that when no serving replica is left, one on
	// probation is taken, since a slow answer beats an error.
	Retry
	// Shadow is a copy sent to a replica on probation to measure it (see
	// Probation): due at most ShadowRate times a second per replica.
	Shadow
)

// Attempt says what a pick is for: its role, the replicas it may choose
// among, and those the request's earlier attempts used.
type Attempt struct {
	Role Role
	// Among restricts the pick to these replicas' indices (a key's
	// owners, say); indices out of range are skipped, and a repeated one
	// weighs twice in a primary's random choice. Nil means every replica.
	// A pick among some never falls back to a replica on probation: ok is
	// false, and the caller decides where to go next (the whole set,
	// typically; Route does).
	Among []int
	// Exclude lists replicas the pick must not choose: those the request's
	// earlier attempts used. Ignored for a Primary and a Shadow.
	Exclude []int
}

// Pick chooses a replica for attempt a at now and takes a ticket for it,
// to be given back with Done. The chosen replica's in-flight count goes up
// by one. ok is false, and i is -1, when no replica fits. Pick does not
// allocate, takes no lock, and is the one way to choose a replica.
//
// A Primary: a replica whose breaker waits for a probe (open with its
// cooldown over, or half-open with the probe slot free) is chosen first,
// so that a recovering replica is probed promptly however its latency
// compares; otherwise two distinct candidates at random among the replicas
// whose breaker admits a request, the one of lower cost wins, cost being
// the peak-EWMA latency × (in-flight + 1), ties going to the one with
// fewer in flight. The randomness spreads load that a strict "lowest cost"
// would send in herds to whichever replica looked best a moment ago.
// Replicas on probation are left out, their breaker probes included (a
// shadow takes those), unless no other replica admits a request.
//
// A Hedge or a Retry: the available replica of lowest cost outside
// Exclude, ties going to fewer in flight, then to the lower index. No
// randomness: a hedge is sent because something is slow, and the replica
// expected to be fastest is the best bet. The ticket is the probe if the
// chosen replica's breaker waits for one.
//
// A Shadow: the first replica on probation whose shadow is due (and whose
// breaker admits a request: a shadow may be its half-open probe); with no
// replica on probation that costs one atomic load. The caller sends the
// shadow off the client's path and gives the ticket back like any other:
// its latency is what brings the replica back from probation. A shadow
// whose replica turned out unavailable is not retried before its next turn.
func (s *Set) Pick(now time.Time, a Attempt) (i int, t Ticket, ok bool) {
	switch a.Role {
	case Primary:
		return s.pickPrimary(s.offset(now), a.Among, a.Among == nil)
	case Hedge:
		return s.pickAlternate(s.offset(now), a.Exclude, false, a.Among)
	case Retry:
		return s.pickAlternate(s.offset(now), a.Exclude, a.Among == nil, a.Among)
	case Shadow:
		return s.pickShadow(now)
	}
	return -1, Ticket{}, false
}

// pickPrimary is PickPrimary among the replicas of among (nil: all),
// falling back to replicas on probation if fallback.
func (s *Set) pickPrimary(off int64, among []int, fallback bool) (i int, t Ticket, ok bool) {
	strict := s.lin.onProbation.Load() > 0
	for round := 0; round < maxPickRounds; round++ {
		n, probe := 0, -1
		for k := range s.span(among) {
			j, r := s.at(among, k)
			if r == nil {
				continue
			}
			if strict && r.probation.Load() {
				continue
			}
			if ok, p := r.admits(off); ok {
				n++
				if p && probe < 0 {
					probe = j
				}
			}
		}
		if n == 0 {
			if strict && fallback {
				// Nothing but replicas on probation: fall back to them,
				// without spending a round.
				strict = false
				round--
				continue
			}
			break
		}
		if probe >= 0 {
			if t, ok := s.admit(probe, off); ok {
				return probe, t, true
			}
			continue
		}
		a, b := s.candidates(n, off, strict, among)
		if a < 0 {
			continue // every replica counted has become unavailable
		}
		if b >= 0 && s.better(b, a, off) {
			a, b = b, a
		}
		if t, ok := s.admit(a, off); ok {
			return a, t, true
		}
		if b >= 0 {
			if t, ok := s.admit(b, off); ok {
				return b, t, true
			}
		}
	}
	return -1, Ticket{}, false
}

// candidates returns two distinct replicas chosen at random among the n of
// among (nil: all) that were available at off, those on probation left out
// when strict (b is -1 when n is 1). Availability may have changed since
// they were counted; a candidate no longer found is -1.
func (s *Set) candidates(n int, off int64, strict bool, among []int) (a, b int) {
	ra, rb := 0, -1
	switch {
	case n == 2:
		ra = s.intn(2) // one draw: the other is the second
		rb = 1 - ra
	case n > 2:
		ra, rb = s.intn(n), s.intn(n-1)
		if rb >= ra {
			rb++
		}
	}
	a, b = -1, -1
	c := 0
	for k := range s.span(among) {
		j, r := s.at(among, k)
		if r == nil || strict && r.probation.Load() {
			continue
		}
		if ok, _ := r.admits(off); !ok {
			continue
		}
		switch c {
		case ra:
			a = j
		case rb:
			b = j
		}
		c++
	}
	if a < 0 {
		a, b = b, -1
	}
	return a, b
}

// pickAlternate picks the cheapest replica of among (nil: all) outside
// exclude, falling back to replicas on probation if fallback.
func (s *Set) pickAlternate(off int64, exclude []int, fallback bool, among []int) (i int, t Ticket, ok bool) {
	strict := s.lin.onProbation.Load() > 0
	for round := 0; round < maxPickRounds; round++ {
		best, bestCost, bestIn := -1, 0.0, int64(0)
		for k := range s.span(among) {
			j, r := s.at(among, k)
			if r == nil || excluded(exclude, j) {
				continue
			}
			if strict && r.probation.Load() {
				continue
			}
			if ok, _ := r.admits(off); !ok {
				continue
			}
			c, in := s.cost(r, off)
			if best < 0 || c < bestCost || c == bestCost && in < bestIn {
				best, bestCost, bestIn = j, c, in
			}
		}
		if best < 0 {
			if strict && fallback {
				strict = false
				round--
				continue
			}
			break
		}
		if t, ok := s.admit(best, off); ok {
			return best, t, true
		}
	}
	return -1, Ticket{}, false
}

// span returns how many replicas a pick looks at: those of among, or all
// when among is nil.
func (s *Set) span(among []int) int {
	if among == nil {
		return len(s.reps)
	}
	return len(among)
}

// at returns the k-th replica a pick looks at, and its index; nil for an
// index of among out of range.
func (s *Set) at(among []int, k int) (int, *replica) {
	if among == nil {
		return k, s.reps[k]
	}
	j := among[k]
	if j < 0 || j >= len(s.reps) {
		return j, nil
	}
	return j, s.reps[j]
}

func excluded(exclude []int, i int) bool {
	for _, x := range exclude {
		if x == i {
			return true
		}
	}
	return false
}
