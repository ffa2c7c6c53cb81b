package hedge

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ReceiptVersion is the version of the Receipt JSON schema. Fields are only
// ever added within a version; a change of meaning bumps it.
const ReceiptVersion = 1

// Receipt accounts for one operation: who won, what every attempt did, which
// hedges were not sent and why, and what happened to the losers after the
// winner, including work that finished anyway. It is final when delivered:
// either every loser has reported or the observation window has closed.
//
// For every receipt, CancellationsRequested == CancellationsObserved +
// LateCompletions + Unobserved.
type Receipt struct {
	Version int     `json:"version"`
	Outcome Outcome `json:"outcome"`
	// Delay is the hedge delay that was in force for the operation.
	Delay Millis `json:"delayMs"`
	// WinnerAttempt is the index of the winning attempt, -1 if none won.
	WinnerAttempt int `json:"winnerAttempt"`
	// WinnerTarget is the target index of the winner, -1 if none won.
	WinnerTarget int `json:"winnerTarget"`
	// WinnerTargetName is the winner's target name when targets are named.
	WinnerTargetName string `json:"winnerTargetName,omitempty"`
	// WinnerLatency is the time from the start of the operation to the
	// winner's result.
	WinnerLatency Millis `json:"winnerLatencyMs"`
	// AttemptsLaunched counts attempts sent, the primary included.
	AttemptsLaunched int `json:"attemptsLaunched"`
	// HedgesSuppressed counts wanted hedges that were not sent, by reason.
	HedgesSuppressed Suppressions `json:"hedgesSuppressed"`
	// CancellationsRequested counts attempts still running when the
	// operation ended, all of which were told to stop.
	CancellationsRequested int `json:"cancellationsRequested"`
	// CancellationsObserved counts those that then returned an error within
	// the observation window: they stopped.
	CancellationsObserved int `json:"cancellationsObserved"`
	// LateCompletions counts those that then returned a result without an
	// error within the window: their work finished after the winner.
	LateCompletions int `json:"lateCompletions"`
	// Unobserved counts those still running when the window closed.
	Unobserved int `json:"unobserved"`
	// Attempts describes every attempt in launch order.
	Attempts []AttemptRecord `json:"attempts"`
}

// Outcome is how an operation ended.
type Outcome uint8

const (
	// OutcomeWon means an attempt produced an acceptable result.
	OutcomeWon Outcome = iota
	// OutcomeFailed means every attempt failed or was not acceptable.
	OutcomeFailed
	// OutcomeCanceled means the caller's context ended first, or the
	// policy's Timeout passed.
	OutcomeCanceled
)

var outcomeNames = [...]string{"won", "failed", "canceled"}

func (o Outcome) String() string { return enumName(outcomeNames[:], o) }

// MarshalText encodes the outcome as its name.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText decodes an outcome name.
func (o *Outcome) UnmarshalText(b []byte) error { return enumParse("outcome", outcomeNames[:], b, o) }

// Fate is what became of one attempt.
type Fate uint8

const (
	// FateRunning: the attempt had not reported when the record was read.
	// A final receipt never holds it; Unobserved replaces it.
	FateRunning Fate = iota
	// FateWon: the attempt's result was returned to the caller.
	FateWon
	// FateFailed: the attempt returned an error before the operation ended.
	FateFailed
	// FateRejected: the attempt returned a result the acceptance check
	// refused, before the operation ended.
	FateRejected
	// FateCanceled: told to stop, it returned an error within the window.
	FateCanceled
	// FateLate: told to stop, it finished its work anyway within the window.
	FateLate
	// FateUnobserved: told to stop, it had not returned when the window
	// closed.
	FateUnobserved
)

var fateNames = [...]string{"running", "won", "failed", "rejected", "canceled", "late", "unobserved"}

func (f Fate) String() string { return enumName(fateNames[:], f) }

// MarshalText encodes the fate as its name.
func (f Fate) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText decodes a fate name.
func (f *Fate) UnmarshalText(b []byte) error { return enumParse("fate", fateNames[:], b, f) }

// AttemptRecord describes one attempt of an operation.
type AttemptRecord struct {
	Index      int     `json:"index"`
	Target     int     `json:"target"`
	TargetName string  `json:"targetName,omitempty"`
	Trigger    Trigger `json:"trigger"`
	// Start is when the attempt was launched, from the operation's start.
	Start Millis `json:"startMs"`
	// Duration is how long the attempt ran until it reported; zero when it
	// never did.
	Duration Millis `json:"durationMs"`
	Fate     Fate   `json:"fate"`
	// Error is the attempt's error, or the acceptance check's verdict.
	Error string `json:"error,omitempty"`
}

// Suppressions counts hedges that were wanted but not sent, by reason.
type Suppressions struct {
	Budget      int `json:"budget"`
	Gate        int `json:"gate"`
	Deadline    int `json:"deadline"`
	MaxAttempts int `json:"maxAttempts"`
	NoTarget    int `json:"noTarget"`
	Capacity    int `json:"capacity"`
}

// Total is the number of suppressed hedges.
func (s Suppressions) Total() int {
	return s.Budget + s.Gate + s.Deadline + s.MaxAttempts + s.NoTarget + s.Capacity
}

func (s *Suppressions) add(r SuppressReason) {
	switch r {
	case SuppressBudget:
		s.Budget++
	case SuppressGate:
		s.Gate++
	case SuppressDeadline:
		s.Deadline++
	case SuppressMaxAttempts:
		s.MaxAttempts++
	case SuppressNoTarget:
		s.NoTarget++
	case SuppressCapacity:
		s.Capacity++
	}
}

// SuppressReason says why a wanted hedge was not sent.
type SuppressReason uint8

const (
	// SuppressBudget: the duplicate-work budget had no credit.
	SuppressBudget SuppressReason = iota + 1
	// SuppressGate: the overload gate was closed.
	SuppressGate
	// SuppressDeadline: the remaining deadline was shorter than an attempt's
	// expected latency.
	SuppressDeadline
	// SuppressMaxAttempts: the operation had used all its attempts.
	SuppressMaxAttempts
	// SuppressNoTarget: no target was available for the hedge.
	SuppressNoTarget
	// SuppressCapacity: the caller's admission hook had no capacity.
	SuppressCapacity
)

var suppressNames = [...]string{"", "budget", "gate", "deadline", "maxAttempts", "noTarget", "capacity"}

// SuppressReasons lists every reason, for metrics that pre-declare labels.
var SuppressReasons = []SuppressReason{SuppressBudget, SuppressGate, SuppressDeadline, SuppressMaxAttempts, SuppressNoTarget, SuppressCapacity}

func (r SuppressReason) String() string {
	if r == 0 {
		return "unknown"
	}
	return enumName(suppressNames[:], r)
}

// enumName returns the name of v, one of the small enums of this package.
func enumName[E ~uint8](names []string, v E) string {
	if int(v) < len(names) {
		return names[v]
	}
	return "unknown"
}

// enumParse sets *v to the enum value called b.
func enumParse[E ~uint8](kind string, names []string, b []byte, v *E) error {
	for i, n := range names {
		if n == string(b) {
			*v = E(i)
			return nil
		}
	}
	return fmt.Errorf("hedge: unknown %s %q", kind, b)
}

// Millis is a duration that encodes in JSON as a number of milliseconds with
// up to six decimals, so nanosecond values round-trip exactly.
type Millis time.Duration

// Duration converts m back to a time.Duration.
func (m Millis) Duration() time.Duration { return time.Duration(m) }

// String formats m as a time.Duration does ("10ms", "1.5s"), so that
// printing a receipt's figures shows durations, not a count of
// nanoseconds; JSON keeps its number of milliseconds.
func (m Millis) String() string { return time.Duration(m).String() }

// MarshalJSON writes m as an exact decimal number of milliseconds.
func (m Millis) MarshalJSON() ([]byte, error) {
	return appendMillis(nil, int64(m)), nil
}

func appendMillis(b []byte, ns int64) []byte {
	u := uint64(ns)
	if ns < 0 {
		b = append(b, '-')
		u = -u
	}
	b = strconv.AppendUint(b, u/1e6, 10)
	if frac := u % 1e6; frac != 0 {
		var digits [7]byte
		s := strconv.AppendUint(digits[:0], frac+1e6, 10) // 1xxxxxx: keeps leading zeros
		b = append(b, '.')
		b = append(b, strings.TrimRight(string(s[1:]), "0")...)
	}
	return b
}

// UnmarshalJSON reads a number of milliseconds. Decimals beyond the
// nanosecond are rounded; values beyond the range of time.Duration are an
// error.
func (m *Millis) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if ns, ok := parseExactMillis(s); ok {
		*m = Millis(ns)
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return fmt.Errorf("hedge: milliseconds %q: not a number", s)
	}
	ns := math.Round(f * 1e6)
	if ns >= math.MaxInt64 || ns < math.MinInt64 {
		return fmt.Errorf("hedge: milliseconds %q out of range", s)
	}
	*m = Millis(int64(ns))
	return nil
}

// parseExactMillis parses "[-]digits[.digits]" with at most six decimals
// exactly, without a trip through float64.
func parseExactMillis(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 6 || !allDigits(whole) || !allDigits(frac) {
		return 0, false
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > math.MaxInt64/1_000_000 {
		return 0, false
	}
	var f uint64
	for i := range 6 {
		f *= 10
		if i < len(frac) {
			f += uint64(frac[i] - '0')
		}
	}
	ns := w*1e6 + f
	if ns > math.MaxInt64 {
		return 0, false
	}
	if neg {
		return -int64(ns), true
	}
	return int64(ns), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// tally is what an operation counts for its receipt, compactly: most
// operations never build one.
type tally struct {
	suppressed [len(suppressNames)]uint8
	// At most MaxAttemptsCap each.
	requested, observed, late, unobserved uint8
}

func (o *operation[T]) buildReceipt() Receipt {
	t := &o.tally
	r := Receipt{
		Version:                ReceiptVersion,
		Outcome:                o.outcome,
		Delay:                  Millis(o.delay),
		WinnerAttempt:          -1,
		WinnerTarget:           -1,
		AttemptsLaunched:       int(o.launched),
		CancellationsRequested: int(t.requested),
		CancellationsObserved:  int(t.observed),
		LateCompletions:        int(t.late),
		Unobserved:             int(t.unobserved),
		Attempts:               make([]AttemptRecord, o.launched),
	}
	for i := range o.launched {
		x := o.rec(int(i))
		a := x.ctx.a
		r.Attempts[i] = AttemptRecord{
			Index:      a.Index,
			Target:     a.Target,
			TargetName: o.targetName(a.Target),
			Trigger:    a.Trigger,
			Start:      Millis(x.start),
			Duration:   Millis(x.duration),
			Fate:       x.fate,
		}
		switch {
		case x.fate == FateCanceled:
			r.Attempts[i].Error = x.err.Error()
		case x.verdict != nil:
			r.Attempts[i].Error = x.verdict.Error()
		}
	}
	for reason, n := range t.suppressed {
		for range n {
			r.HedgesSuppressed.add(SuppressReason(reason))
		}
	}
	if o.outcome == OutcomeWon {
		w := &r.Attempts[o.winner]
		r.WinnerAttempt, r.WinnerTarget, r.WinnerTargetName = w.Index, w.Target, w.TargetName
		x := o.rec(int(o.winner)) // it won at its start plus its duration
		r.WinnerLatency = Millis(x.start + x.duration)
	}
	return r
}
