package tied

import (
	"fmt"
	"testing"
	"time"
)

func TestMemoryForgetsAfterTTL(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := newMemory(10, time.Second)
	m.add("a", memoTombstone, t0)
	m.add("b", memoFinished, t0.Add(500*time.Millisecond))
	if k, ok := m.get("a", t0.Add(999*time.Millisecond)); !ok || k != memoTombstone {
		t.Errorf("a before its TTL: %v %v", k, ok)
	}
	if _, ok := m.get("a", t0.Add(time.Second)); ok {
		t.Error("a remembered at its TTL")
	}
	if k, ok := m.get("b", t0.Add(time.Second)); !ok || k != memoFinished {
		t.Errorf("b: %v %v", k, ok)
	}
	// Adding prunes what has expired.
	m.add("c", memoTombstone, t0.Add(1200*time.Millisecond))
	if m.len() != 2 || m.n != 2 {
		t.Errorf("remembered %d in %d slots, want 2", m.len(), m.n)
	}
}

func TestMemoryBounded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := newMemory(100, time.Hour)
	for i := range 1000 {
		m.add(fmt.Sprint(i), memoTombstone, t0)
		if i%3 == 0 {
			m.forget(fmt.Sprint(i)) // stale slots count against the bound too
		}
		if m.n > 100 || m.len() > 100 || len(m.ring) > 100 {
			t.Fatalf("after %d: %d slots of %d, %d remembered", i, m.n, len(m.ring), m.len())
		}
	}
	// The newest are kept, oldest first forgotten.
	if _, ok := m.get("998", t0); !ok {
		t.Error("newest forgotten")
	}
	if _, ok := m.get("901", t0); !ok {
		t.Error("901 forgotten")
	}
	if _, ok := m.get("899", t0); ok {
		t.Error("899 remembered beyond the bound")
	}
	// Re-adding a tie replaces it; its stale slot cannot evict the new one.
	m = newMemory(2, time.Hour)
	m.add("x", memoTombstone, t0)
	m.add("x", memoFinished, t0)
	m.add("y", memoTombstone, t0) // evicts x's first, stale slot
	if k, ok := m.get("x", t0); !ok || k != memoFinished {
		t.Errorf("x after its stale slot went: %v %v", k, ok)
	}
}
