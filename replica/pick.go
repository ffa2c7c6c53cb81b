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

// PickPrimary chooses the replica for the first attempt of a request and
// takes a ticket for it, to be given back with Done.
//
// A replica whose breaker waits for a probe (open with its cooldown over, or
// half-open with the probe slot free) is chosen first: the first pick that
// sees the cooldown over moves the breaker to half-open and takes the probe,
// so a recovering replica is probed promptly however its latency compares.
// Otherwise the pick is by power of two choices among the replicas whose
// breaker admits a request: two distinct candidates at random, the one of
// lower cost wins, cost being the peak-EWMA latency × (in-flight + 1), ties
// going to the one with fewer in flight. With one available replica it is
// chosen. The randomness spreads load that a strict "lowest cost" would
// send in herds to whichever replica looked best a moment ago.
//
// Replicas on probation are left out, their breaker probes included (a
// shadow takes those), unless no other replica admits a request: then the
// pick is made among them alone, since a slow answer beats none.
//
// The chosen replica's in-flight count goes up by one. ok is false, and i is
// -1, when no replica admits a request. PickPrimary does not allocate.
func (s *Set) PickPrimary(now time.Time) (i int, t Ticket, ok bool) {
	return s.pickPrimary(s.offset(now), nil, true)
}

// PickPrimaryAmong is PickPrimary restricted to the replicas whose indices
// are in among (a key's owners, say), except that it never falls back to
// a replica on probation: ok is false when no replica of among that is not
// on probation admits a request, and the caller decides where to go next
// (PickPrimary over the whole set, typically). Indices out of range are
// skipped; a repeated index weighs twice in the random choice. Nil among
// means every replica. PickPrimaryAmong does not allocate.
func (s *Set) PickPrimaryAmong(now time.Time, among []int) (i int, t Ticket, ok bool) {
	return s.pickPrimary(s.offset(now), among, false)
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
	if n > 1 {
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

// PickAlternate chooses the replica for a hedge: the available replica of
// lowest cost, as PickPrimary prices it, that is not in exclude, the
// replicas earlier attempts of the same request used. Ties go to fewer in
// flight, then to the lower index. No randomness here: a hedge is sent
// because something is slow, and the replica expected to be fastest is the
// best bet. For the same reason a replica on probation never gets a hedge:
// it is there because it is slow, and it takes only shadows. For an
// attempt after a failure, use PickRetry.
//
// The bookkeeping is PickPrimary's: the in-flight count goes up and a ticket
// is taken, which is the probe if the chosen replica's breaker waits for
// one. ok is false, and i is -1, if no replica outside exclude admits a
// request. PickAlternate does not allocate.
func (s *Set) PickAlternate(now time.Time, exclude []int) (i int, t Ticket, ok bool) {
	return s.pickAlternate(s.offset(now), exclude, false, nil)
}

// PickAlternateAmong is PickAlternate restricted to the replicas whose
// indices are in among (nil: all; indices out of range are skipped): ok is
// false when none of them outside exclude admits a request. It does not
// allocate.
func (s *Set) PickAlternateAmong(now time.Time, among, exclude []int) (i int, t Ticket, ok bool) {
	return s.pickAlternate(s.offset(now), exclude, false, among)
}

// PickRetryAmong is PickAlternateAmong for an attempt after a failure: as
// PickRetry restricted to among, except that it never falls back to a
// replica on probation (the caller goes to PickRetry over the whole set
// for that). It does not allocate.
func (s *Set) PickRetryAmong(now time.Time, among, exclude []int) (i int, t Ticket, ok bool) {
	return s.PickAlternateAmong(now, among, exclude)
}

// PickRetry chooses the replica for an attempt after a failure (a transport
// error or a 5xx): as PickAlternate, except that when no serving replica
// outside exclude admits a request, one on probation is taken, the
// cheapest: a slow answer beats an error. PickRetry does not allocate.
func (s *Set) PickRetry(now time.Time, exclude []int) (i int, t Ticket, ok bool) {
	return s.pickAlternate(s.offset(now), exclude, true, nil)
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
