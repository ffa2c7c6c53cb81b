package replica

import (
	"errors"
	"fmt"
)

// This file: membership. A Set's members change in one way only, by its
// next generation (Next), whether an operator's reload or discovery asks.

// ErrSuperseded is Next's error on a Set that is no longer the newest of
// its generations: membership changes in a line, each generation made
// from the one before, so that no change is lost to a concurrent one.
var ErrSuperseded = errors.New("replica: set superseded by a later generation")

// Next returns the next generation of s: a Set of the named replicas, in
// order, with cfg, and the lineage's newest from now on. A replica whose
// name is also in s is the same replica in both: its breaker, peak-EWMA
// latency, in-flight count, counters and probation carry over, and Done
// on either generation moves them. A new name starts cold, as in New (no
// latency sample: it costs 0, so picks try it soon, and nothing is
// borrowed from its peers). A replica left out is not stopped: the
// attempts that hold its tickets, taken from s, finish and are given back
// to s as usual, and a caller that holds s for a whole request (picks and
// Done) may still pick it; s's successors never do. That is how a replica
// is drained.
//
// The generations share their clock (the time of their first method call)
// and their random generator; cfg.Seed is ignored. The rest of cfg
// applies to the new generation, probation's settings to the judge at
// once: it judges the newest generation only (its MaxShare cap counts the
// new members), from whichever generation's Done is due to judge.
// Turning probation off takes every replica off it; turning it on starts
// afresh. A replica left out comes off probation. Each replica Next takes
// off probation is reported to cfg.OnChange (ProbationExited, with the
// reason), as Next returns; breakers keep reporting to the OnChange of the
// generation whose pick or Done moves them.
//
// Next fails, leaving s as it was, with an error wrapping ErrInvalid as New
// does, or with ErrSuperseded when s is no longer the newest generation. It
// allocates the new Set and its new replicas; picks and Done on any
// generation do not wait for it.
func (s *Set) Next(names []string, cfg Config) (*Set, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkNames(names); err != nil {
		return nil, err
	}
	cfg.Seed = s.cfg.Seed
	kept := make(map[string]*replica, len(s.reps))
	for _, r := range s.reps {
		kept[r.name] = r
	}
	next := &Set{cfg: cfg, tau: float64(cfg.DecayTime), lin: s.lin, reps: make([]*replica, len(names))}
	in := make(map[*replica]bool, len(names))
	for i, n := range names {
		r, ok := kept[n]
		if !ok {
			r = newReplica(n, cfg)
		}
		next.reps[i] = r
		in[r] = true
	}

	// Under the judge's lock: no judgement runs while the members, the
	// settings and the count of replicas on probation change together, and
	// two Next calls cannot both succeed from one generation.
	lin := s.lin
	j := &lin.prob
	j.mu.Lock()
	if lin.current.Load() != s {
		j.mu.Unlock()
		return nil, fmt.Errorf("%w: Next of generation %d", ErrSuperseded, s.gen)
	}
	lin.gens++
	next.gen = lin.gens
	j.configure(cfg.Probation, len(names))
	// The replicas that come off probation here are reported, as the
	// judge's moves are, to the new generation's OnChange once the lock
	// is released: a receiver told one went on hears that it came off.
	var moves []Event
	for i, r := range s.reps {
		if !in[r] {
			moves = release(r, moves, i, ReasonRemoved)
		}
	}
	on := int32(0)
	for i, r := range next.reps {
		if !cfg.Probation.Enabled {
			moves = release(r, moves, i, ReasonProbationOff)
		}
		if r.probation.Load() {
			on++
		}
	}
	lin.onProbation.Store(on)
	lin.current.Store(next)
	j.mu.Unlock()
	next.report(moves)
	return next, nil
}

// release takes r, replica i of its generation, off probation and out of
// the judge's hands, keeping its counts of moves (counters, for metrics),
// and appends the move off probation, if it was on, to moves, for why.
// Called with the judge's mu held.
func release(r *replica, moves []Event, i int, why string) []Event {
	if r.probation.Load() {
		moves = append(moves, Event{Kind: ProbationExited, Replica: i, Name: r.name, Reason: why})
	}
	r.probation.Store(false)
	r.judged = probState{entries: r.judged.entries, exits: r.judged.exits}
	return moves
}
