package replica

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// BreakerState is the state of a replica's circuit breaker.
type BreakerState uint8

// Breaker states.
const (
	// Closed admits every request and counts consecutive failures.
	Closed BreakerState = iota
	// Open rejects every request until its cooldown is over.
	Open
	// HalfOpen admits a single probe at a time; its outcome closes or
	// reopens the breaker.
	HalfOpen
)

// String returns "closed", "open" or "half-open".
func (b BreakerState) String() string {
	switch b {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "BreakerState(" + strconv.Itoa(int(b)) + ")"
}

// MarshalText encodes the state as its String, so JSON shows "half-open"
// rather than 2.
func (b BreakerState) MarshalText() ([]byte, error) {
	if b > HalfOpen {
		return nil, fmt.Errorf("replica: unknown breaker state %d", uint8(b))
	}
	return []byte(b.String()), nil
}

// UnmarshalText decodes what MarshalText produces, for clients of the admin
// view.
func (b *BreakerState) UnmarshalText(text []byte) error {
	for s := Closed; s <= HalfOpen; s++ {
		if string(text) == s.String() {
			*b = s
			return nil
		}
	}
	return fmt.Errorf("replica: unknown breaker state %q", text)
}

// Outcome is how an attempt ended, as far as the replica's health goes.
type Outcome uint8

// Outcomes.
const (
	// Success is a usable answer (an HTTP status below 500).
	Success Outcome = iota
	// Failure is a transport error or a 5xx.
	Failure
	// Canceled means the attempt was cancelled (it lost a hedge race, or
	// the client left). It says nothing about the replica's health, so it
	// is neutral for the breaker; its latency counts only as a lower bound
	// (the attempt took at least that long, the time was cut short by us).
	Canceled
)

// String returns "success", "failure" or "canceled".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Canceled:
		return "canceled"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// The breaker's state word: generation, probe bit and state in one uint64,
// so that a pick reads all three in one atomic load and claims the probe
// slot, or moves an open breaker to half-open, with one compare-and-swap.
const (
	stateMask = 0b11
	probeBit  = 0b100
	genShift  = 3
)

func pack(gen uint64, st BreakerState, probe bool) uint64 {
	w := gen<<genShift | uint64(st)
	if probe {
		w |= probeBit
	}
	return w
}

func genOf(w uint64) uint64         { return w >> genShift }
func stateOf(w uint64) BreakerState { return BreakerState(w & stateMask) }
func probeOut(w uint64) bool        { return w&probeBit != 0 }

// Ticket is handed out with each pick and given back with Done. It records
// the replica, the breaker generation at pick time, whether the attempt is
// the half-open probe, and when the attempt started. It is a small value:
// copying it is free and it never allocates. The zero Ticket stands for no
// attempt; Done ignores it.
type Ticket struct {
	start int64  // ns since the Set's epoch
	gen   uint64 // breaker generation when picked
	// id packs the replica's index + 1 (the low 32 bits; 0 in the zero
	// Ticket), the Set's generation (the next 16; see Set.gen), which
	// catches a ticket given back to another generation, and the kind
	// (ticketProbe, ticketShadow). One word rather than three fields: a
	// pick returns the ticket in registers, and with a fourth and a
	// fifth field picks took 15-25% longer (BenchmarkPickPrimaryDone).
	id uint64
}

// The parts of Ticket.id.
const (
	idSetShift   = 32
	idKindShift  = 48
	ticketProbe  = 1 << (idKindShift + iota) // the half-open breaker's probe
	ticketShadow                             // a shadow request
)

// ticketID packs a Ticket's id for replica i of generation set.
func ticketID(i int, set uint16) uint64 { return uint64(uint32(i)+1) | uint64(set)<<idSetShift }

// rep returns the ticket's replica index + 1, 0 for the zero Ticket.
func (t Ticket) rep() uint32 { return uint32(t.id) }

// set returns the generation of the Set that handed the ticket out.
func (t Ticket) set() uint16 { return uint16(t.id >> idSetShift) }

// Replica returns the index of the replica the ticket is for, or -1 for the
// zero Ticket.
func (t Ticket) Replica() int { return int(t.rep()) - 1 }

// generation returns the breaker generation the ticket was taken in. Its
// outcome can move the breaker only while that generation is current.
func (t Ticket) generation() uint64 { return t.gen }

// probe reports whether the ticket is the single probe of a half-open
// breaker: its outcome decides whether the breaker closes or reopens.
func (t Ticket) probe() bool { return t.id&ticketProbe != 0 }

// shadow reports whether the ticket is for a shadow request (a Pick with
// Role Shadow): a duplicate sent to a replica on probation to measure it,
// whose answer nobody reads.
func (t Ticket) shadow() bool { return t.id&ticketShadow != 0 }

// admits reports whether r would admit a request at off (ns since epoch),
// and whether that request would be the breaker's probe. It changes
// nothing; admit does.
func (r *replica) admits(off int64) (ok, probe bool) {
	w := r.word.Load()
	switch stateOf(w) {
	case Closed:
		return true, false
	case Open:
		return off >= r.openUntil.Load(), true
	default:
		return !probeOut(w), true
	}
}

// admit takes a ticket for replica i at off if its breaker admits a request:
// always when closed; when open and the cooldown is over, by moving it to
// half-open (a new generation) and taking the probe slot; when half-open and
// the probe slot is free, by taking it. The compare-and-swap makes two
// concurrent picks unable to both take the probe.
func (s *Set) admit(i int, off int64) (Ticket, bool) {
	r := s.reps[i]
	for {
		w := r.word.Load()
		gen, probe := genOf(w), false
		switch stateOf(w) {
		case Closed:
		case Open:
			if off < r.openUntil.Load() {
				return Ticket{}, false
			}
			gen++
			if !r.word.CompareAndSwap(w, pack(gen, HalfOpen, true)) {
				continue
			}
			probe = true
			if s.cfg.OnChange != nil {
				s.changed(Event{Kind: BreakerHalfOpen, Replica: i, Name: r.name, Generation: gen})
			}
		default:
			if probeOut(w) {
				return Ticket{}, false
			}
			if !r.word.CompareAndSwap(w, w|probeBit) {
				continue
			}
			probe = true
		}
		r.inflight.Add(1)
		r.picks.Add(1)
		t := Ticket{start: off, gen: gen, id: ticketID(i, s.gen)}
		if probe {
			t.id |= ticketProbe
		}
		return t, true
	}
}

// Done returns the ticket of a finished attempt with its outcome, at time
// now. It always decrements the replica's in-flight count and counts the
// outcome. Success and Failure feed now minus the ticket's start into the
// replica's peak-EWMA latency, even when stale: a late hedge loser's latency
// is real. The breaker moves only if the ticket's generation is still
// current; a stale outcome (an attempt picked before the breaker last
// changed state) is counted as stale and otherwise ignored, so a slow loser
// cannot reopen a breaker that a probe just closed, nor close one that
// failures just opened. In the closed state a Success resets the count of
// consecutive failures and a Failure adds to it, opening the breaker at
// the threshold. The probe's Success closes the breaker, its Failure
// reopens it with a doubled cooldown, and its Canceled frees the probe slot
// for the next pick.
//
// With probation on, a Success, or a Canceled whose lower bound fed the
// EWMA, is also a latency sample for probation, and Done judges the
// replicas' latency when a judgement is due (every Window/10), outside the
// replica's lock.
//
// Done on the zero Ticket does nothing. Every other ticket must be given
// back exactly once (defer it): a ticket never returned leaves the replica
// looking busy forever, and for a probe keeps the breaker half-open with
// its slot taken; a ticket returned twice corrupts the in-flight count and,
// if it was a cancelled probe, may decide the next probe's fate. A ticket
// goes back to the Set that handed it out, not to another generation (see
// Next): indexes differ between generations. Done panics for an unknown
// Outcome or a ticket of another Set (of another generation, or out of
// range).
func (s *Set) Done(t Ticket, o Outcome, now time.Time) {
	if t.rep() == 0 {
		return
	}
	if o > Canceled {
		panic(fmt.Sprintf("replica: Done with unknown outcome %d", uint8(o)))
	}
	i := int(t.rep()) - 1
	if i >= len(s.reps) || t.set() != s.gen {
		panic(fmt.Sprintf("replica: Done with a ticket for replica %d of generation %d given to generation %d of %d replicas", i, t.set(), s.gen, len(s.reps)))
	}
	r := s.reps[i]
	off := s.offset(now)
	switch o {
	case Success:
		r.successes.Add(1)
	case Failure:
		r.failures.Add(1)
	default:
		r.canceled.Add(1)
	}
	r.inflight.Add(-1)
	r.mu.Lock()
	c := s.settle(r, t, o, off)
	r.mu.Unlock()
	if c.Kind != 0 && s.cfg.OnChange != nil {
		c.Replica, c.Name = i, r.name
		s.changed(c)
	}
	if s.cfg.Probation.Enabled {
		// Outside r.mu: the judge takes every replica's in turn.
		s.lin.prob.maybeJudge(s.lin, off)
	}
}

// settle is Done's part under r.mu (held by the caller): the latency
// sample and the breaker. It returns the breaker's change, if it moved
// (Kind 0 if not), for Done to report once r.mu is released.
func (s *Set) settle(r *replica, t Ticket, o Outcome, off int64) Event {
	rtt := float64(max(off-t.start, 0))
	sample := o == Success
	if o != Canceled {
		s.observe(r, rtt, off)
	} else if rtt > s.ewmaAt(r, off) {
		// A cancelled attempt took at least rtt. Counting that lower bound
		// keeps a replica whose every attempt hangs until a hedge wins from
		// looking fast (its latency would otherwise never be sampled);
		// below the current estimate, the bound says nothing new.
		s.observe(r, rtt, off)
		sample = true
	}
	if sample && s.cfg.Probation.Enabled {
		// Probation judges latency only: a failure's time (a fast 500, a
		// refused connection) says nothing of it; failures are the
		// breaker's business.
		r.recent.add(off, int64(rtt))
	}
	w := r.word.Load()
	if genOf(w) != t.gen {
		r.stale.Add(1)
		return Event{}
	}
	gen := genOf(w)
	switch stateOf(w) {
	case Closed:
		switch o {
		case Success:
			r.consecutive = 0
		case Failure:
			r.consecutive++
			if r.consecutive >= s.cfg.FailureThreshold {
				return s.open(r, w, off, false)
			}
		}
	case HalfOpen:
		// A current ticket in half-open is the probe: non-probe tickets are
		// only handed out while closed, and every change of state starts a
		// new generation.
		switch o {
		case Success:
			r.consecutive = 0
			r.cooldown = s.cfg.Cooldown
			r.word.CompareAndSwap(w, pack(gen+1, Closed, false))
			return Event{Kind: BreakerClosed, Generation: gen + 1}
		case Failure:
			r.consecutive++
			r.cooldown = min(r.cooldown*2, s.cfg.MaxCooldown)
			if r.cooldown < 0 { // overflowed doubling
				r.cooldown = s.cfg.MaxCooldown
			}
			return s.open(r, w, off, true)
		default:
			r.word.CompareAndSwap(w, w&^probeBit)
		}
	}
	// Open: no ticket is ever handed out in an open generation (a pick moves
	// the breaker to half-open first), so there is nothing to do.
	return Event{}
}

// open opens r's breaker, which is in state word w, for r.cooldown from off,
// and returns the change (probe: the half-open probe failed). Called with
// r.mu held. openUntil is stored before the word so that any reader who
// sees the breaker open also sees when it reopens.
//
// The compare-and-swaps in Done and open cannot fail: picks change the word
// only when it is open, or half-open with the probe slot free, and a current
// ticket exists in neither case; other writers hold r.mu.
func (s *Set) open(r *replica, w uint64, off int64, probe bool) Event {
	r.openUntil.Store(satAdd(off, r.cooldown))
	r.word.CompareAndSwap(w, pack(genOf(w)+1, Open, false))
	return Event{Kind: BreakerOpened, Generation: genOf(w) + 1, Failures: r.consecutive, Probe: probe, Cooldown: r.cooldown}
}

// observe feeds a latency sample (ns) taken at off into r's peak-EWMA, as
// Finagle and Linkerd do: a sample above the average replaces it at once, so
// a replica that turns slow is avoided from its first slow answer, and
// lower samples pull it down with weight 1-exp(-Δt/DecayTime), Δt being the
// time since the previous sample. Called with r.mu held.
func (s *Set) observe(r *replica, rtt float64, off int64) {
	e := math.Float64frombits(r.ewma.Load())
	last := r.lastUpdate.Load()
	if rtt >= e {
		e = rtt
	} else {
		// rtt < e implies an earlier sample, so last is a real time.
		w := decay(float64(max(off-last, 0)) / s.tau)
		e = e*w + rtt*(1-w)
	}
	r.ewma.Store(math.Float64bits(e))
	// Concurrent Done calls may arrive with times slightly out of order;
	// never moving lastUpdate back keeps a decay from being counted twice.
	r.lastUpdate.Store(max(last, off))
}

// decay returns exp(-x), x >= 0. Picks and outcomes ask for it with x the
// time since a replica's last sample over DecayTime (10 s): under load a
// few microseconds over seconds, where three terms of the series are
// exact to float64's precision (the first left out is x⁴/24 < 5e-14 for
// x < 1e-3) at a fraction of math.Exp's cost (two calls per request were
// 3% of a request's in BenchmarkInMemory).
func decay(x float64) float64 {
	if x < 1e-3 {
		return 1 - x*(1-x*(0.5-x/6))
	}
	return math.Exp(-x)
}

// ewmaAt returns r's peak-EWMA latency (ns) as seen at off: the stored value
// decayed toward zero for the time since its last sample, as Finagle and
// Linkerd decay it when they read it. Without this, one spike would price a
// replica out of every pick for good: it would never be chosen, so no lower
// sample could ever bring its average down.
func (s *Set) ewmaAt(r *replica, off int64) float64 {
	e := math.Float64frombits(r.ewma.Load())
	if e == 0 {
		return 0
	}
	if dt := off - r.lastUpdate.Load(); dt > 0 {
		e *= decay(float64(dt) / s.tau)
	}
	return e
}
