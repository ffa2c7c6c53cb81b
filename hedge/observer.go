package hedge

import "time"

// Observer receives the events of every operation of a Hedger, for metrics
// and logs. Observe is called synchronously on the request path, possibly
// from several goroutines at once: it must be fast, safe for concurrent use,
// and must not keep the Event's Receipt or Gate pointer after it returns.
type Observer interface {
	Observe(Event)
}

// eventFilter is an optional interface of an Observer: Wants reports
// whether it wants events of a kind. The Hedger asks once, in New; an
// Observer without it gets every event. Declining EventReceipt spares the
// building of a Receipt for every operation.
type eventFilter interface {
	Wants(EventKind) bool
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventStart: an operation was admitted. Delay is the hedge delay in
	// force for it.
	EventStart EventKind = iota + 1
	// EventLaunch: an attempt was launched.
	EventLaunch
	// EventSuppress: a wanted hedge was not launched. Reason says why.
	EventSuppress
	// EventReport: an attempt returned. Elapsed is its own duration, Fate
	// what became of it, Err its error (or the acceptance verdict).
	EventReport
	// EventWin: an attempt won. Elapsed is the operation's latency.
	EventWin
	// EventReceipt: the operation's receipt is final.
	EventReceipt
	// EventGate: the overload gate shut, reopened, or changed the signals
	// that keep it shut. Gate is its new state. It is sent once per change,
	// by whichever operation's goroutine found it.
	EventGate
)

var eventNames = [...]string{"", "start", "launch", "suppress", "report", "win", "receipt", "gate"}

func (k EventKind) String() string {
	if k == 0 {
		return "unknown"
	}
	return enumName(eventNames[:], k)
}

// Event is one observation. Fields not relevant to the Kind are zero.
type Event struct {
	Kind EventKind
	// Class is the class of the Hedger that saw it, in its Classes (empty
	// for a Hedger of its own).
	Class   string
	Attempt Attempt
	Elapsed time.Duration
	Delay   time.Duration
	Reason  SuppressReason
	Fate    Fate
	Err     error
	Receipt *Receipt
	Gate    *GateState
}
