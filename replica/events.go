// This file: the changes of a replica's state that a Set reports to
// Config.OnChange, so that its caller can log them or count them. The Set
// itself neither logs nor reads the clock.

package replica

import (
	"strconv"
	"time"
)

// EventKind is what changed.
type EventKind uint8

// Event kinds.
const (
	// BreakerOpened: failures opened the breaker (or its half-open probe
	// failed and it reopened); it refuses attempts for Cooldown.
	BreakerOpened EventKind = iota + 1
	// BreakerHalfOpen: the cooldown is over and a pick took the single
	// probe; its outcome closes or reopens the breaker.
	BreakerHalfOpen
	// BreakerClosed: the probe succeeded; the replica takes attempts again.
	BreakerClosed
	// ProbationEntered: the replica's median latency diverged from its
	// peers' for Probation.Window; it gets shadows only.
	ProbationEntered
	// ProbationExited: it recovered for Probation.Window and serves again.
	ProbationExited
)

var eventNames = [...]string{"", "breakerOpened", "breakerHalfOpen", "breakerClosed", "probationEntered", "probationExited"}

// String returns the kind's name, such as "breakerOpened".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is a change of one replica's state, as Config.OnChange receives
// it. It carries no time: the Set takes the time from its callers, and
// the receiver knows when it is told.
type Event struct {
	Kind EventKind
	// Name is the replica's name, as given to New or Next: what
	// identifies it across generations (see Set.Next). Replica is its
	// index in the generation that reported the change (a breaker's:
	// the Set whose pick or Done moved it; probation's: the newest
	// generation, which the judge judges), which another generation may
	// give another replica: a receiver that keeps state per replica
	// across generations keys it by Name.
	Replica int
	Name    string
	// Generation is the breaker's generation after the change (breaker
	// events; see State.Generation). OnChange runs outside the Set's
	// locks, so two changes in quick succession may reach it in either
	// order: a receiver that keeps the breaker's state keeps the event of
	// the highest generation.
	Generation uint64
	// BreakerOpened only: the consecutive failures that opened it, whether
	// it was the half-open probe that failed (a reopening: Cooldown has
	// doubled), and how long the breaker refuses attempts.
	Failures int
	Probe    bool
	Cooldown time.Duration
	// Probation events only: why, in the words and figures that
	// /debug/replicas shows (ProbationState.Reason), such as "p50 41ms is
	// 8.2x peers' 5ms for 5s"; for a replica that Next takes off
	// probation, ReasonRemoved or ReasonProbationOff.
	Reason string
}

// The Reasons of the ProbationExited events of Next, which takes replicas
// off probation without a judgement.
const (
	ReasonRemoved      = "removed from the set" // left out of the next generation
	ReasonProbationOff = "probation turned off" // the next generation's Config turned it off
)

// changed reports e, its Name set, to s's OnChange, if any. Call it with
// no lock of the Set held: OnChange may log, and may call the Set.
func (s *Set) changed(e Event) {
	if f := s.cfg.OnChange; f != nil {
		f(e)
	}
}
