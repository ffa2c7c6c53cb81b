package tied

import (
	"strings"
	"time"
)

// memoKind says what a Server remembers about a tie no copy of which is
// queued or running here.
type memoKind uint8

const (
	// memoTombstone: a cancel came for a tie not (yet) here; a copy that
	// arrives is dropped.
	memoTombstone memoKind = iota
	// memoFinished: a copy of the tie ran here to completion; a cancel that
	// comes for it means both copies executed.
	memoFinished
)

// memory is a bounded set of remembered ties, each forgotten ttl after it
// was remembered, or earlier, oldest first, when limit ties are remembered.
// Since every entry lives for the same ttl, insertion order is expiry order:
// a ring of insertions, popped from the front, does both. A tie removed
// from the map leaves a stale slot in the ring, recognised by its sequence
// number, which still counts against limit until it reaches the front, so
// the memory used stays bounded by limit whatever the pattern.
// Not safe for concurrent use: the Server's mutex guards it.
type memory struct {
	ttl   time.Duration
	limit int
	m     map[string]memo
	ring  []memoSlot // circular; grows by doubling up to limit
	head  int
	n     int
	seq   uint64
}

type memo struct {
	kind    memoKind
	seq     uint64
	expires time.Time
}

type memoSlot struct {
	key     string
	seq     uint64
	expires time.Time
}

func newMemory(limit int, ttl time.Duration) *memory {
	return &memory{ttl: ttl, limit: limit, m: make(map[string]memo)}
}

// add remembers key as k at now, replacing what was remembered of it.
func (m *memory) add(key string, k memoKind, now time.Time) {
	m.prune(now)
	if m.n == m.limit {
		m.popFront()
	}
	if m.n == len(m.ring) {
		m.grow()
	}
	m.seq++
	exp := now.Add(m.ttl)
	// The key may share memory with a whole request; it outlives it.
	key = strings.Clone(key)
	m.ring[(m.head+m.n)%len(m.ring)] = memoSlot{key: key, seq: m.seq, expires: exp}
	m.n++
	m.m[key] = memo{kind: k, seq: m.seq, expires: exp}
}

// get reports what is remembered of key at now.
func (m *memory) get(key string, now time.Time) (memoKind, bool) {
	if len(m.m) == 0 {
		return 0, false
	}
	mm, ok := m.m[key]
	if !ok || !now.Before(mm.expires) {
		return 0, false
	}
	return mm.kind, true
}

// forget removes key; its ring slot turns stale.
func (m *memory) forget(key string) { delete(m.m, key) }

// len reports how many ties are remembered, expired ones not yet pruned
// included.
func (m *memory) len() int { return len(m.m) }

// prune forgets the ties expired at now.
func (m *memory) prune(now time.Time) {
	for m.n > 0 && !now.Before(m.ring[m.head].expires) {
		m.popFront()
	}
}

func (m *memory) popFront() {
	s := &m.ring[m.head]
	if mm, ok := m.m[s.key]; ok && mm.seq == s.seq {
		delete(m.m, s.key)
	}
	*s = memoSlot{}
	m.head = (m.head + 1) % len(m.ring)
	m.n--
}

func (m *memory) grow() {
	size := min(max(2*len(m.ring), 64), m.limit)
	ring := make([]memoSlot, size)
	for i := range m.n {
		ring[i] = m.ring[(m.head+i)%len(m.ring)]
	}
	m.ring, m.head = ring, 0
}
