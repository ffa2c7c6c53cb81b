// Package fifo is an intrusive first-in, first-out list. Its elements carry
// their own links (they hold a Links and return it from a Links method), so
// that one can leave from the middle, as a request whose client has gone
// or a copy dropped for its twin does, in constant time and without
// allocating. A List is not safe for concurrent use: its users guard it
// with the mutex that guards the rest of their state.
package fifo

// Links are an element's place in a List. The zero value is an element in
// no list.
type Links[T any] struct {
	prev, next *T
	in         bool
}

// In reports whether the element is in a list.
func (l *Links[T]) In() bool { return l.in }

// List is a FIFO of *T linked through the Links each element holds. The
// zero List is empty.
type List[T any, P interface {
	*T
	Links() *Links[T]
}] struct {
	head, tail *T
	n          int
}

// Len returns the number of elements in l.
func (l *List[T, P]) Len() int { return l.n }

// Push adds e, which must be in no list, at the tail.
func (l *List[T, P]) Push(e P) {
	k := e.Links()
	k.prev, k.next, k.in = l.tail, nil, true
	if l.tail != nil {
		P(l.tail).Links().next = e
	} else {
		l.head = e
	}
	l.tail = e
	l.n++
}

// Remove takes e, which must be in l, out of it.
func (l *List[T, P]) Remove(e P) {
	k := e.Links()
	if k.prev != nil {
		P(k.prev).Links().next = k.next
	} else {
		l.head = k.next
	}
	if k.next != nil {
		P(k.next).Links().prev = k.prev
	} else {
		l.tail = k.prev
	}
	*k = Links[T]{}
	l.n--
}

// Pop removes and returns the element at the head, or nil if l is empty.
func (l *List[T, P]) Pop() P {
	e := P(l.head)
	if e != nil {
		l.Remove(e)
	}
	return e
}

// Front returns the element at the head without removing it, or nil.
func (l *List[T, P]) Front() P { return P(l.head) }

// Back returns the element at the tail without removing it, or nil.
func (l *List[T, P]) Back() P { return P(l.tail) }
