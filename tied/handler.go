package tied

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/jsonerr"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
)

// Handler returns middleware that serves the cancel endpoint at CancelPath
// and runs every other request through the Server's queue and workers
// before next:
//
//   - A request gets a worker at once if one is free and nobody waits;
//     otherwise it waits in the queue (hedge-marked requests behind the
//     others, unless NoHedgePriority). A full queue answers 503 with
//     Retry-After: 1.
//   - A tied copy (valid Tailgate-Tie, Tailgate-Tie-Peer in Peers) that gets a
//     worker sends, asynchronously, a cancel for its tie to its peer; it
//     runs whatever becomes of that message.
//   - A tied copy dropped for its twin, queued or on arrival, is answered
//     503 with Tailgate-Tie-Dropped and never reaches next.
//   - A queued request whose context ends (its client left, or a deadline
//     passed) leaves the queue and is not run: 504 after a deadline, 503
//     otherwise (the client is usually gone and sees nothing).
//
// next sees the request without Tailgate-Tie and Tailgate-Tie-Peer, under the
// request's own context, which net/http cancels when the client goes.
func (s *Server) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("tied: Handler(nil)")
	}
	return &handler{s: s, next: next}
}

type handler struct {
	s    *Server
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	if r.URL.Path == s.cancelPath {
		s.serveCancel(w, r)
		return
	}
	// Not pooled: an entry and its channel cost about 100ns, nothing
	// against an HTTP request's tens of microseconds.
	e := &entry{ready: make(chan struct{}, 1)}
	s.classify(r, e)
	if !s.admit(w, r, e) {
		return
	}
	s.run(w, r, e, h.next)
}

// classify reads r's tie and hedge marks into e and counts what it finds.
func (s *Server) classify(r *http.Request, e *entry) {
	if hv := r.Header[hedge.HedgeHeader]; len(hv) > 0 && hv[0] != "" && hv[0] != "0" {
		e.hedge = true
	}
	tv, pv := r.Header[tiedwire.TieHeader], r.Header[tiedwire.PeerHeader]
	if len(tv) == 0 && len(pv) == 0 {
		s.c.untied.Add(1)
		return
	}
	e.marked = true
	if len(tv) != 1 || len(pv) != 1 || !tiedwire.ValidTie(tv[0]) || len(pv[0]) > maxPeerLen {
		s.c.invalidTie.Add(1)
		s.c.untied.Add(1)
		return
	}
	u, ok := s.peers[pv[0]]
	if !ok && len(s.peers) > 0 {
		// Not in canonical form, perhaps: canonicalise and look again.
		if p, err := canonicalPeer(pv[0]); err == nil {
			u, ok = s.peers[p]
		}
	}
	if !ok {
		s.c.unknownPeer.Add(1)
		s.c.untied.Add(1)
		return
	}
	e.tie, e.cancel = tv[0], u
}

// admit gives e a worker, waiting in the queue if need be, and reports
// whether it should run; if not, the answer has been written.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, e *entry) bool {
	s.mu.Lock()
	if e.tie != "" {
		if s.ties[e.tie] != nil {
			// Both copies here, or a replay: the tie cannot work.
			e.tie, e.cancel = "", ""
			s.c.invalidTie.Add(1)
			s.c.untied.Add(1)
		} else {
			s.c.tied.Add(1)
			if k, ok := s.memory.get(e.tie, time.Now()); ok && k == memoTombstone {
				s.memory.forget(e.tie)
				s.mu.Unlock()
				s.c.droppedOnArrival.Add(1)
				writeDropped(w, tiedwire.DroppedOnArrival)
				return false
			}
		}
	}
	if s.running < s.workers && s.queued == 0 {
		s.running++
		e.state = stateRunning
		if e.tie != "" {
			s.ties[e.tie] = e
		}
		s.mu.Unlock()
		return true
	}
	if !s.enqueue(e) {
		s.mu.Unlock()
		s.c.queueFull.Add(1)
		writeFull(w)
		return false
	}
	s.mu.Unlock()
	return s.wait(w, r, e)
}

// enqueue queues e, making room by displacing the last queued hedge if e
// is not one and priority is on. It reports false if the queue is full.
// Called with s.mu held.
func (s *Server) enqueue(e *entry) bool {
	l := 0
	if e.hedge && s.priority {
		l = 1
	}
	if s.queued >= s.limit {
		v := s.lanes[1].Back()
		if l == 1 || v == nil {
			return false
		}
		s.unqueue(v)
		v.state = stateDisplaced
		v.ready <- struct{}{}
		s.c.displaced.Add(1)
	}
	e.state, e.lane = stateQueued, l
	s.lanes[l].Push(e)
	s.queued++
	s.peak = max(s.peak, s.queued)
	if e.tie != "" {
		s.ties[e.tie] = e
	}
	return true
}

// unqueue takes a queued e out of its lane and out of the ties. Called with
// s.mu held.
func (s *Server) unqueue(e *entry) {
	s.lanes[e.lane].Remove(e)
	s.queued--
	if e.tie != "" {
		delete(s.ties, e.tie)
	}
}

// wait blocks until the queued e gets a worker, is dropped or displaced, or
// its context ends, and reports whether it should run; if not, the answer
// has been written.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, e *entry) bool {
	ctx := r.Context()
	select {
	case <-e.ready:
	case <-ctx.Done():
		s.mu.Lock()
		if e.state == stateQueued {
			s.unqueue(e)
			s.mu.Unlock()
			s.c.abandoned.Add(1)
			writeGone(w, ctx.Err())
			return false
		}
		s.mu.Unlock()
		<-e.ready // it was decided meanwhile, and told
	}
	// The state was written before the send on e.ready.
	switch e.state {
	case stateRunning:
		if err := ctx.Err(); err != nil {
			// Granted a worker as the client left: pass the worker on.
			s.release(e)
			s.c.abandoned.Add(1)
			writeGone(w, err)
			return false
		}
		return true
	case stateDropped:
		writeDropped(w, tiedwire.DroppedQueued)
	default: // stateDisplaced, counted when it happened
		writeFull(w)
	}
	return false
}

// run runs e's request on the worker it holds, then passes the worker on.
func (s *Server) run(w http.ResponseWriter, r *http.Request, e *entry, next http.Handler) {
	defer s.finish(e) // also if next panics, so the worker is never lost
	s.c.dequeued.Add(1)
	if e.cancel != "" {
		s.sendCancel(e.tie, e.cancel)
	}
	if e.marked {
		// Tie headers concern this hop only.
		r = r.WithContext(r.Context())
		r.Header = r.Header.Clone()
		delete(r.Header, tiedwire.TieHeader)
		delete(r.Header, tiedwire.PeerHeader)
	}
	next.ServeHTTP(w, r)
}

// finish passes e's worker on, remembers that its tie ran, and recycles e.
func (s *Server) finish(e *entry) {
	s.mu.Lock()
	if e.tie != "" {
		delete(s.ties, e.tie)
		s.memory.add(e.tie, memoFinished, time.Now())
	}
	s.handOff()
	s.mu.Unlock()
}

// release passes the worker of e, which will not run, on.
func (s *Server) release(e *entry) {
	s.mu.Lock()
	if e.tie != "" {
		delete(s.ties, e.tie)
	}
	s.handOff()
	s.mu.Unlock()
}

// handOff gives a freed worker to the next queued request: the first of the
// first lane, else the first of the second. Called with s.mu held.
func (s *Server) handOff() {
	n := s.lanes[0].Pop()
	if n == nil {
		n = s.lanes[1].Pop()
	}
	if n == nil {
		s.running--
		return
	}
	s.queued--
	n.state = stateRunning
	n.ready <- struct{}{}
}

// serveCancel serves the cancel endpoint.
func (s *Server) serveCancel(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.c.cancelsRefused.Add(1)
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "tied: cancel takes POST")
		return
	}
	if s.token != "" && !tokenOK(r.Header[tiedwire.TokenHeader], s.token) {
		s.c.cancelsRefused.Add(1)
		writeError(w, http.StatusForbidden, "tied: cancel token missing or wrong")
		return
	}
	tie, ok := tieParam(r.URL.RawQuery)
	if !ok {
		s.c.cancelsRefused.Add(1)
		writeError(w, http.StatusBadRequest, "tied: cancel needs one query parameter tie=<id> with a valid tie")
		return
	}
	s.c.cancelsRecv.Add(1)
	outcome := s.cancel(tie, time.Now())
	w.Header().Set(tiedwire.CancelOutcomeHeader, outcome)
	w.WriteHeader(http.StatusNoContent)
}

// cancel applies a cancel for tie received at now and returns its outcome.
func (s *Server) cancel(tie string, now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.ties[tie]; e != nil {
		if e.state == stateQueued {
			s.unqueue(e)
			e.state = stateDropped
			e.ready <- struct{}{}
			s.c.droppedByTwin.Add(1)
			return tiedwire.CancelDropped
		}
		s.c.bothExecuted.Add(1)
		return tiedwire.CancelStarted
	}
	switch k, ok := s.memory.get(tie, now); {
	case ok && k == memoFinished:
		// Counted once: a repeated cancel leaves a tombstone instead.
		s.memory.forget(tie)
		s.c.bothExecuted.Add(1)
		return tiedwire.CancelStarted
	case ok: // already a tombstone
		return tiedwire.CancelRemembered
	}
	s.memory.add(tie, memoTombstone, now)
	return tiedwire.CancelRemembered
}

// tieParam extracts the tie from a query that must be exactly "tie=<id>".
// The id needs no unescaping: a tie identity holds unreserved characters only.
func tieParam(q string) (string, bool) {
	tie, ok := strings.CutPrefix(q, "tie=")
	return tie, ok && tiedwire.ValidTie(tie)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	jsonerr.Write(w, code, msg)
}

func writeDropped(w http.ResponseWriter, when string) {
	w.Header().Set(tiedwire.DroppedHeader, when)
	writeError(w, http.StatusServiceUnavailable, "tied: copy dropped ("+when+"): its twin started on another server")
}

func writeFull(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "tied: overloaded: queue full")
}

func writeGone(w http.ResponseWriter, err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		writeError(w, http.StatusGatewayTimeout, "tied: deadline passed while queued")
		return
	}
	writeError(w, http.StatusServiceUnavailable, "tied: request cancelled while queued")
}
