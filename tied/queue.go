package tied

// state is where a request stands in a Server. Transitions happen under the
// Server's mutex; a queued request learns of the one that ends its wait
// through its ready channel, which carries exactly one value per wait.
type state uint8

const (
	stateNew       state = iota
	stateQueued          // waiting in a lane
	stateRunning         // holds a worker
	stateDropped         // removed from the queue: its twin started
	stateDisplaced       // removed from the queue to make room for a first copy
)

// entry is one request in a Server: queued, then running, or dropped.
// Entries are pooled; their ready channel is empty whenever they are idle.
type entry struct {
	tie    string // "" for an untied request
	cancel string // the peer's cancel URL up to the tie, for a tied copy
	hedge  bool   // marked with hedge.HedgeHeader
	marked bool   // carried tie headers, valid or not
	state  state
	ready  chan struct{} // one value: the wait is over (see state)

	lane       *lane // nil unless queued
	prev, next *entry
}

func (s *Server) getEntry() *entry {
	if e, ok := s.entries.Get().(*entry); ok {
		return e
	}
	return &entry{ready: make(chan struct{}, 1)}
}

func (s *Server) putEntry(e *entry) {
	*e = entry{ready: e.ready}
	s.entries.Put(e)
}

// lane is a FIFO of queued entries, linked through the entries themselves
// so that removal from the middle (a dropped copy, a client gone) is O(1).
type lane struct{ head, tail *entry }

func (l *lane) push(e *entry) {
	e.lane, e.prev, e.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
}

func (l *lane) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.lane, e.prev, e.next = nil, nil, nil
}
