package replica

import "time"

// State is a replica's state, for an admin endpoint and for tests. Its JSON
// field names are stable.
type State struct {
	// Name is the replica's name as given to New.
	Name string `json:"name"`
	// Breaker is the stored breaker state. An open breaker whose cooldown is
	// over stays open until a pick takes its probe; Available tells.
	Breaker BreakerState `json:"breaker"`
	// Generation counts the breaker's changes of state.
	Generation uint64 `json:"generation"`
	// Available reports whether the replica would admit a request now.
	Available bool `json:"available"`
	// OpenUntil is when an open breaker admits its probe; zero unless open.
	OpenUntil time.Time `json:"openUntil,omitzero"`
	// EWMA is the peak-EWMA latency as picks see it now (decayed since the
	// last sample); zero before the first sample.
	EWMA time.Duration `json:"-"`
	// EWMAMs is EWMA in milliseconds.
	EWMAMs float64 `json:"ewmaMs"`
	// InFlight is the number of tickets taken and not yet given back.
	InFlight int64 `json:"inFlight"`
	// Successes, Failures and Canceled count outcomes given to Done, stale
	// ones included.
	Successes uint64 `json:"successes"`
	Failures  uint64 `json:"failures"`
	Canceled  uint64 `json:"canceled"`
	// Stale counts outcomes, of any kind, whose ticket's generation was no
	// longer current, so that they did not move the breaker.
	Stale uint64 `json:"staleOutcomes"`
	// Picks counts tickets handed out.
	Picks uint64 `json:"picks"`
	// ConsecutiveFailures counts current-generation failures since the last
	// current-generation success.
	ConsecutiveFailures int `json:"consecutiveFailures"`
	// Probation is the replica's latency probation as of the last
	// judgement; nil when probation is off.
	Probation *ProbationState `json:"probation,omitempty"`
}

// Snapshot returns the state of every replica at now, in index order. Each
// replica's breaker fields are read together; counters are read one by one,
// so a snapshot taken while attempts finish may be slightly torn (an outcome
// counted while its attempt still shows in flight).
func (s *Set) Snapshot(now time.Time) []State {
	off := s.offset(now)
	out := make([]State, len(s.reps))
	for i, r := range s.reps {
		r.mu.Lock()
		w := r.word.Load()
		until := r.openUntil.Load()
		consecutive := r.consecutive
		e := s.ewmaAt(r, off)
		r.mu.Unlock()
		available, _ := r.admits(off)
		st := State{
			Name:                r.name,
			Breaker:             stateOf(w),
			Generation:          genOf(w),
			Available:           available,
			EWMA:                time.Duration(e + 0.5),
			EWMAMs:              e / float64(time.Millisecond),
			InFlight:            r.inflight.Load(),
			Successes:           r.successes.Load(),
			Failures:            r.failures.Load(),
			Canceled:            r.canceled.Load(),
			Stale:               r.stale.Load(),
			Picks:               r.picks.Load(),
			ConsecutiveFailures: consecutive,
		}
		if st.Breaker == Open {
			st.OpenUntil = s.timeAt(until)
		}
		st.Probation = s.probationState(i)
		out[i] = st
	}
	return out
}

// Available reports how many replicas would admit a request at now, for a
// readiness check: zero means every pick would fail. Replicas on probation
// count: PickPrimary falls back to them when nothing else is available.
func (s *Set) Available(now time.Time) int {
	off := s.offset(now)
	n := 0
	for _, r := range s.reps {
		if ok, _ := r.admits(off); ok {
			n++
		}
	}
	return n
}
