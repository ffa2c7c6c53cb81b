// This file: where a replica stands with probation, as Snapshot and
// /debug/replicas show it, and the words that explain it.

package replica

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ProbationStatus is where a replica stands with probation.
type ProbationStatus uint8

// Probation statuses.
const (
	// Serving: the replica takes primaries and hedges.
	Serving ProbationStatus = iota
	// Diverging: still serving, but its median latency is above Factor ×
	// its peers'; it goes on probation once that has lasted Window (unless
	// the cap holds it back).
	Diverging
	// OnProbation: no primaries or hedges unless no other replica is
	// available; only shadow requests.
	OnProbation
	// Recovering: on probation, but its shadows' median is below ExitFactor
	// × its peers'; it comes back once that has lasted Window.
	Recovering
)

var probationNames = [...]string{"serving", "diverging", "probation", "recovering"}

// String returns "serving", "diverging", "probation" or "recovering".
func (p ProbationStatus) String() string {
	if int(p) < len(probationNames) {
		return probationNames[p]
	}
	return "ProbationStatus(" + strconv.Itoa(int(p)) + ")"
}

// OnProbation reports whether the status keeps the replica out of the
// rotation: OnProbation or Recovering.
func (p ProbationStatus) OnProbation() bool { return p == OnProbation || p == Recovering }

// MarshalText encodes the status as its String.
func (p ProbationStatus) MarshalText() ([]byte, error) {
	if int(p) >= len(probationNames) {
		return nil, fmt.Errorf("replica: unknown probation status %d", uint8(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText decodes what MarshalText produces.
func (p *ProbationStatus) UnmarshalText(text []byte) error {
	for i, n := range probationNames {
		if string(text) == n {
			*p = ProbationStatus(i)
			return nil
		}
	}
	return fmt.Errorf("replica: unknown probation status %q", text)
}

// ProbationState is a replica's probation as a Snapshot shows it. Its JSON
// field names are stable.
type ProbationState struct {
	Status ProbationStatus `json:"status"`
	// Since is when the replica went on probation (OnProbation,
	// Recovering), when its divergence began (Diverging), or when it last
	// came off probation (Serving; zero if it never was on).
	Since time.Time `json:"since,omitzero"`
	// Reason explains the status in words, with the figures it was judged
	// on: why the replica went on probation, how long it has diverged or
	// recovered and whether the cap holds it back, or why it came off.
	Reason string `json:"reason,omitempty"`
	// P50Ms is the replica's median latency over its window at the last
	// judgement, PeersP50Ms the median of its serving peers' medians, and
	// Samples how many samples the former rests on; zero when unknown.
	P50Ms      float64 `json:"p50Ms"`
	PeersP50Ms float64 `json:"peersP50Ms"`
	Samples    int     `json:"samples"`
	// Entries and Exits count the replica's moves on and off probation.
	Entries uint64 `json:"entries"`
	Exits   uint64 `json:"exits"`
	// Shadows counts shadow tickets handed out for the replica.
	Shadows uint64 `json:"shadows"`
}

// probationState returns replica i's probation as of the last judgement,
// or nil when probation is off. It takes the judge's mu.
func (s *Set) probationState(i int) *ProbationState {
	if !s.cfg.Probation.Enabled {
		return nil
	}
	j := &s.lin.prob
	r := s.reps[i]
	j.mu.Lock()
	p := r.judged
	last, onProb, window, maxOn := j.last, int(s.lin.onProbation.Load()), time.Duration(j.window), j.maxOn
	j.mu.Unlock()
	st := &ProbationState{
		Status: p.status, P50Ms: p.p50 / 1e6, PeersP50Ms: p.peers / 1e6, Samples: p.n,
		Entries: p.entries, Exits: p.exits, Shadows: r.shadows.Load(),
	}
	switch p.status {
	case Serving:
		if p.exits > 0 {
			st.Since = s.timeAt(p.since)
		}
	case Diverging:
		st.Since = s.timeAt(p.hold)
	case OnProbation, Recovering:
		st.Since = s.timeAt(p.since)
	}
	st.Reason = reason(&p, last, onProb, maxOn, window)
	return st
}

// reason explains p's status as of the judgement at last, with onProb
// replicas on probation, at most maxOn, and the judge's window: the words
// of ProbationState.Reason, and of the Events of moves on and off
// probation. The judge's settings are passed in, read under its mu, for
// Next may change them.
func reason(p *probState, last int64, onProb, maxOn int, window time.Duration) string {
	switch p.status {
	case Serving:
		if p.exits > 0 {
			return "came off probation: " + judgement(p.moveP50, p.movePeers) +
				" for " + short(time.Duration(p.moveHeld)).String()
		}
	case Diverging:
		r := judgement(p.p50, p.peers) + " for " + short(time.Duration(last-p.hold)).String() +
			" of " + window.String()
		if p.capped {
			r += "; held back: " + strconv.Itoa(onProb) + " of at most " + strconv.Itoa(maxOn) +
				" replicas on probation already"
		}
		return r
	case OnProbation, Recovering:
		r := judgement(p.moveP50, p.movePeers) + " for " + short(time.Duration(p.moveHeld)).String()
		if p.status == Recovering {
			r += "; recovering: " + judgement(p.p50, p.peers) + " for " +
				short(time.Duration(last-p.hold)).String() + " of " + window.String()
		}
		return r
	}
	return ""
}

// judgement says how a median compares with its peers', such as "p50 41ms
// is 8.2x peers' 5ms".
func judgement(p50, peers float64) string {
	var b strings.Builder
	b.WriteString("p50 ")
	b.WriteString(short(time.Duration(p50)).String())
	if peers > 0 {
		b.WriteString(" is ")
		b.WriteString(strconv.FormatFloat(p50/peers, 'f', 1, 64))
		b.WriteString("x")
	} else {
		b.WriteString(" against")
	}
	b.WriteString(" peers' ")
	b.WriteString(short(time.Duration(peers)).String())
	return b.String()
}

// short rounds d to two significant digits, for words.
func short(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	u := time.Duration(1)
	for d/u >= 100 {
		u *= 10
	}
	return d.Round(u)
}
