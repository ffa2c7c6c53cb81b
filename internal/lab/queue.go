package lab

import (
	"context"
	"errors"
	"sync"
)

// errQueueFull is returned by fixtureQueue.acquire when the queue is at its
// limit.
var errQueueFull = errors.New("lab: fixture queue full")

// fixtureQueue admits at most capacity requests into service at once; the
// others wait in FIFO order, or in two FIFOs (primaries, then hedges) when
// hedges are deprioritised. A released slot passes straight to the next
// waiter, so a newcomer never overtakes a waiting request. It is safe for
// concurrent use; every operation holds one mutex for a few instructions,
// and a waiting request blocks in its own goroutine only.
type fixtureQueue struct {
	capacity     int
	limit        int
	deprioritize bool

	mu      sync.Mutex
	busy    int              // slots in service; waiters exist only when busy == capacity
	waiting int              // requests in the FIFOs
	peak    int              // the largest waiting seen
	total   int64            // requests that ever waited
	fifos   [2]queueWaitList // [0] primaries (everyone unless deprioritize), [1] hedges
}

// queueWaiter is one waiting request, linked into a FIFO.
type queueWaiter struct {
	ready      chan struct{} // closed when granted a slot
	granted    bool
	list       *queueWaitList // nil once out of the FIFO
	prev, next *queueWaiter
}

type queueWaitList struct{ head, tail *queueWaiter }

func (l *queueWaitList) push(w *queueWaiter) {
	w.list, w.prev, w.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
}

func (l *queueWaitList) remove(w *queueWaiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.list, w.prev, w.next = nil, nil, nil
}

func (l *queueWaitList) pop() *queueWaiter {
	w := l.head
	if w != nil {
		l.remove(w)
	}
	return w
}

func newFixtureQueue(capacity, limit int, deprioritizeHedges bool) *fixtureQueue {
	return &fixtureQueue{capacity: capacity, limit: limit, deprioritize: deprioritizeHedges}
}

// acquire takes a slot for a request, waiting in the queue if none is free.
// queued reports whether the request had to wait. It fails with
// errQueueFull, without waiting, if limit requests already wait, and with
// ctx's error if ctx ends before the request gets a slot: the request then
// leaves the queue, and a slot granted to it at the last moment passes on.
// After a nil error the caller must release the slot.
func (q *fixtureQueue) acquire(ctx context.Context, hedge bool) (queued bool, err error) {
	q.mu.Lock()
	if q.busy < q.capacity {
		q.busy++
		q.mu.Unlock()
		return false, nil
	}
	if q.waiting >= q.limit {
		q.mu.Unlock()
		return false, errQueueFull
	}
	w := &queueWaiter{ready: make(chan struct{})}
	fifo := &q.fifos[0]
	if hedge && q.deprioritize {
		fifo = &q.fifos[1]
	}
	fifo.push(w)
	q.waiting++
	q.total++
	q.peak = max(q.peak, q.waiting)
	q.mu.Unlock()

	select {
	case <-w.ready:
		if ctx.Err() == nil {
			return true, nil
		}
	case <-ctx.Done():
	}
	q.mu.Lock()
	if w.granted {
		q.releaseLocked()
	} else {
		w.list.remove(w)
		q.waiting--
	}
	q.mu.Unlock()
	return true, ctx.Err()
}

// release returns a slot taken by acquire.
func (q *fixtureQueue) release() {
	q.mu.Lock()
	q.releaseLocked()
	q.mu.Unlock()
}

func (q *fixtureQueue) releaseLocked() {
	w := q.fifos[0].pop()
	if w == nil {
		w = q.fifos[1].pop()
	}
	if w == nil {
		q.busy--
		return
	}
	q.waiting--
	w.granted = true
	close(w.ready)
}

// queueState is a snapshot of a fixtureQueue.
type queueState struct {
	busy    int   // slots in service
	waiting int   // requests waiting now
	peak    int   // the most requests waiting at once
	total   int64 // requests that had to wait, counted as they joined the queue
}

func (q *fixtureQueue) state() queueState {
	q.mu.Lock()
	defer q.mu.Unlock()
	return queueState{busy: q.busy, waiting: q.waiting, peak: q.peak, total: q.total}
}
