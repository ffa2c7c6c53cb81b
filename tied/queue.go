package tied

import "github.com/tailgate-dev/tailgate/internal/fifo"

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

	lane  int               // the lane it waits in, while queued
	links fifo.Links[entry] // its place in that lane
}

// Links implements fifo's element: a lane links entries through themselves,
// so that removing one from the middle (a dropped copy, a client gone) is
// O(1) and allocates nothing.
func (e *entry) Links() *fifo.Links[entry] { return &e.links }

// lane is a FIFO of queued entries.
type lane = fifo.List[entry, *entry]
