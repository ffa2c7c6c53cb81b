package replica

import "time"

// MaxAttempts is the most attempts of one request a Route steers: the
// hedge engine's hard cap, as gRPC's.
const MaxAttempts = 5

// Route steers the attempts of one request over a Set: it picks each
// attempt's replica, holds the attempt's ticket, and gives it back with the
// attempt's outcome. It is the one implementation of multi-attempt steering
// over replicas; the hedge engine's Transport, the gateway, hedgegrpc and
// tied requests all steer through it. Its mode is fixed when it is made
// (Set.Route):
//
//   - Plain: a primary by power of two choices, a hedge to the cheapest
//     replica the request has not used, an attempt after a failure the same
//     but falling back at last to a replica on probation (see Pick's roles).
//   - Owners: the same among a key's owners first. A pick that finds none of
//     them available goes to the whole set, and counts as a fallback.
//   - Owners with a home (RouteHome): the owners are ordered and the first
//     is the key's home, the one replica whose cache the key should be
//     warm in. The primary goes to the home whenever it admits one (its
//     breaker admits a request, it is not on probation); otherwise to the
//     other owners by power of two choices, then to the whole set. Hedges
//     and retries go as in Owners: the cheapest owner not yet used, which
//     after a primary at home is another owner. The home is not priced
//     against the others: that would split a key's primaries between two
//     caches whenever their costs crossed, and each would hold it half
//     warm. Whether the home is within its load bound is its caller's to
//     judge, over time, by choosing the home (package partition moves
//     homes off replicas above the bound); in-flight counts are a poor
//     judge of it per read (see docs/gateway.md, Affinity mode), except
//     for a key the home is not likely to hold (RouteCold), whose primary
//     costs a miss wherever it goes.
//   - Tied: the primary's twin, a replica for the second copy, is picked with
//     the primary (the first copy must name it as it leaves) and held until
//     the second attempt takes it. A second attempt sent because the first
//     failed goes untied (nothing is left to cancel); without a twin, no
//     second copy goes after the delay, since an untied duplicate would run
//     in full.
//
// A Route is a small value meant to live inside a request's own state (no
// allocation). Its picks (Pick, Release, Finish) must not run concurrently,
// as the engine's, under its operation's lock, do not; Done reads only its
// own attempt's ticket, and so may run in the attempt's goroutine, once,
// concurrently with the picks of later attempts. Finish gives back what
// the request held and never used.
type Route struct {
	set      *Set
	among    []int
	home     bool // among[0] is the key's home: the primary's replica when it admits one
	cold     bool // home, and the home's cache is not likely to hold the key: a busy home spills
	spilled  bool // the primary went to another owner because the home was busy
	tied     bool
	held     bool    // tied: the twin's ticket waits for the second copy
	copies   [2]bool // tied: copy i went tied
	fallback uint8   // picks that left among for the whole set
	tickets  [MaxAttempts]Ticket
	exclude  [1]int // the twin's pick's Exclude: the primary
}

// Route returns a Route over s for one request: among, when not nil,
// names the replicas (a key's owners) its attempts prefer; tied makes it
// a tied request's (see Route). among is kept, not copied.
func (s *Set) Route(among []int, tied bool) Route {
	return Route{set: s, among: among, tied: tied}
}

// RouteHome returns a Route over s for one request in owners mode with a
// home: owners (not empty) are a key's owners, in order, and owners[0] is
// the key's home, where the primary goes whenever it admits one (see
// Route). owners is kept, not copied. A nil or empty owners is Route(nil,
// tied).
func (s *Set) RouteHome(owners []int, tied bool) Route {
	return Route{set: s, among: owners, home: len(owners) > 0, tied: tied}
}

// RouteCold is RouteHome for a key its home's cache is not likely to
// hold (partition.Owners.Cold): while the home is busy, its primary goes
// to the first other owner that is not, where it costs the same miss
// without the home's queue. Busy is HAProxy's bounded load, per request:
// as many attempts in flight as spillFactor × the mean per replica (the
// request's own included), and at least spillMinInFlight. A key its home
// holds is never spilled: splitting its primaries would warm it in two
// caches (see Route). Spilled says whether the primary went elsewhere.
func (s *Set) RouteCold(owners []int, tied bool) Route {
	return Route{set: s, among: owners, home: len(owners) > 0, cold: len(owners) > 0, tied: tied}
}

// Spilling a cold key's primary (RouteCold): the bound at 1.25 × the
// mean, as HAProxy's hash-balance-factor 125, and no spill below 4 in
// flight, where a replica of a few workers is seldom queueing (HAProxy's
// bound spills at 1 or 2 in flight on a quiet tier). On bench/skew's tier
// (4 replicas of 4 workers) 3 and 4 gave the same p99s.
const (
	spillFactor      = 1.25
	spillMinInFlight = 4
)

// spillBound returns how many attempts in flight make a replica busy
// for a cold key's primary (see RouteCold): spillFactor × the mean per
// replica, this attempt included, and at least spillMinInFlight.
func (s *Set) spillBound() float64 {
	var total int64
	for _, r := range s.reps {
		total += max(r.inflight.Load(), 0)
	}
	return max(spillMinInFlight, spillFactor*float64(total+1)/float64(len(s.reps)))
}

// busy reports whether replica i has bound or more attempts in flight.
func (s *Set) busy(i int, bound float64) bool {
	return i >= 0 && i < len(s.reps) && float64(s.reps[i].inflight.Load()) >= bound
}

// Spilled reports whether the primary went to another owner than the
// home because the home was busy (RouteCold).
func (r *Route) Spilled() bool { return r.spilled }

// Set returns the Set the Route steers over.
func (r *Route) Set() *Set { return r.set }

// Pick chooses the replica of attempt i (0 the primary) at now; retry says
// it is sent because an earlier attempt failed, used lists the replicas
// earlier attempts used. ok is false when no replica fits: for the primary,
// every breaker is open; for another attempt, none is left (or, tied
// without a twin, none is to be sent).
func (r *Route) Pick(i int, retry bool, used []int, now time.Time) (replica int, ok bool) {
	if i < 0 || i >= MaxAttempts {
		return -1, false
	}
	var t Ticket
	switch {
	case i == 0:
		t, ok = r.pick(now, Attempt{Role: Primary})
		if ok && r.tied {
			r.tie(now, t.Replica())
		}
	case r.tied && i == 1 && r.held:
		r.held = false
		r.copies[1] = !retry
		return r.tickets[1].Replica(), true
	case r.tied && !retry:
		return -1, false
	case retry:
		t, ok = r.pick(now, Attempt{Role: Retry, Exclude: used})
	default:
		t, ok = r.pick(now, Attempt{Role: Hedge, Exclude: used})
	}
	if !ok {
		return -1, false
	}
	r.tickets[i] = t
	return t.Replica(), true
}

// pick picks for a among the Route's replicas when it has some, falling
// back to the whole set when none fits. A primary with a home goes home
// when it admits one, and otherwise to the other owners first.
func (r *Route) pick(now time.Time, a Attempt) (Ticket, bool) {
	among := r.among
	if r.cold && a.Role == Primary {
		if t, ok := r.spill(now, a); ok {
			return t, true
		}
	}
	if r.home && a.Role == Primary {
		a.Among = among[:1]
		if _, t, ok := r.set.Pick(now, a); ok {
			return t, true
		}
		among = among[1:] // empty: none left but the whole set
	}
	if among != nil {
		if len(among) > 0 {
			a.Among = among
			if _, t, ok := r.set.Pick(now, a); ok {
				return t, true
			}
		}
		r.fallback++
		a.Among = nil
	}
	_, t, ok := r.set.Pick(now, a)
	return t, ok
}

// spill picks a cold key's primary past a busy home: the first other
// owner that is not busy, if the home is (see RouteCold). ok is false
// when the primary should go home as usual. The home's own count is read
// first, alone: below spillMinInFlight it is not busy, and the bound,
// which reads every replica's count, is not needed.
func (r *Route) spill(now time.Time, a Attempt) (Ticket, bool) {
	home := r.among[0]
	if !r.set.busy(home, spillMinInFlight) {
		return Ticket{}, false
	}
	bound := r.set.spillBound()
	if !r.set.busy(home, bound) {
		return Ticket{}, false
	}
	for k := 1; k < len(r.among); k++ {
		if i := r.among[k]; i >= 0 && i < len(r.set.reps) && !r.set.busy(i, bound) {
			a.Among = r.among[k : k+1]
			_, t, ok := r.set.Pick(now, a)
			r.spilled = ok
			return t, ok
		}
	}
	return Ticket{}, false
}

// tie picks the twin of a primary on replica p, as a hedge's (never p,
// never a replica on probation), and holds its ticket for the second copy.
func (r *Route) tie(now time.Time, p int) {
	r.exclude[0] = p
	t, ok := r.pick(now, Attempt{Role: Hedge, Exclude: r.exclude[:]})
	if !ok {
		return
	}
	r.tickets[1], r.held = t, true
	r.copies[0] = true
}

// Tied reports whether attempt i went, or goes, as a tied copy: the first
// when a twin was picked with it, the second when it took the twin after
// the delay.
func (r *Route) Tied(i int) bool { return i >= 0 && i < 2 && r.copies[i] }

// Twin returns the replica held for a tied request's second copy, and
// whether one is held.
func (r *Route) Twin() (int, bool) {
	if !r.held {
		return -1, false
	}
	return r.tickets[1].Replica(), true
}

// Fallbacks counts the picks that found none of the Route's replicas
// (among) available and went to the whole set.
func (r *Route) Fallbacks() int { return int(r.fallback) }

// Replica returns the replica attempt i was sent to, or -1.
func (r *Route) Replica(i int) int {
	if i < 0 || i >= MaxAttempts {
		return -1
	}
	return r.tickets[i].Replica()
}

// ticket returns attempt i's ticket (the zero Ticket for none).
func (r *Route) ticket(i int) Ticket {
	if i < 0 || i >= MaxAttempts {
		return Ticket{}
	}
	return r.tickets[i]
}

// Done gives back attempt i's ticket with its outcome o, the attempt having
// run for elapsed from its pick (a tied twin's from the primary's pick).
// Measuring from the pick saves a clock read per attempt. Call it once per
// attempt picked.
func (r *Route) Done(i int, o Outcome, elapsed time.Duration) {
	if i < 0 || i >= MaxAttempts {
		return
	}
	t := r.tickets[i]
	if t.rep() == 0 {
		return
	}
	r.set.Done(t, o, r.set.timeAt(t.start).Add(elapsed))
}

// release gives back attempt i's ticket for an attempt that never ran
// (picked, then refused by a limit of the caller's): neutral, and no
// latency sample, not even a lower bound.
func (r *Route) release(i int) {
	if i == 1 && r.tied {
		r.copies[1] = false
	}
	r.Done(i, Canceled, 0)
}

// Finish ends the request's use of the Route: a twin held for a second
// copy that never went is given back, neutral. Call it once the request
// is decided; the attempts still out give their tickets back with Done.
func (r *Route) Finish() {
	if r.held {
		r.held = false
		r.release(1)
	}
}
