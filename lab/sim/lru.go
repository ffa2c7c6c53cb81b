package sim

// LRU is a cache of at most a fixed number of keys that evicts the least
// recently used one: what a cache server keeps in memory, in the lab's
// models (a fixture's cache and the simulator's virtual caches). Its
// entries live in one slice linked by indices, so a lookup costs one map
// access and a few index writes, and nothing is allocated once it is full.
// It is not safe for concurrent use.
type LRU[K comparable] struct {
	index map[K]int32
	nodes []lruNode[K] // nodes[0] is the list's sentinel
}

type lruNode[K comparable] struct {
	key        K
	prev, next int32
}

// NewLRU returns an empty LRU of capacity keys (at least 1).
func NewLRU[K comparable](capacity int) *LRU[K] {
	capacity = max(capacity, 1)
	c := &LRU[K]{index: make(map[K]int32, capacity), nodes: make([]lruNode[K], 1, capacity+1)}
	return c
}

// Cap is the most keys it holds.
func (c *LRU[K]) Cap() int { return cap(c.nodes) - 1 }

// Len is how many keys it holds.
func (c *LRU[K]) Len() int { return len(c.nodes) - 1 }

// Contains reports whether k is cached, without touching it.
func (c *LRU[K]) Contains(k K) bool {
	_, ok := c.index[k]
	return ok
}

// Touch looks k up and makes it the most recently used key: it reports a
// hit when k was cached, and otherwise caches it, evicting the least
// recently used key when full.
func (c *LRU[K]) Touch(k K) (hit bool) {
	if i, ok := c.index[k]; ok {
		c.unlink(i)
		c.pushFront(i)
		return true
	}
	var i int32
	if len(c.nodes) < cap(c.nodes) {
		c.nodes = append(c.nodes, lruNode[K]{})
		i = int32(len(c.nodes) - 1)
	} else {
		i = c.nodes[0].prev // the least recently used
		c.unlink(i)
		delete(c.index, c.nodes[i].key)
	}
	c.nodes[i].key = k
	c.index[k] = i
	c.pushFront(i)
	return false
}

func (c *LRU[K]) unlink(i int32) {
	n := &c.nodes[i]
	c.nodes[n.prev].next = n.next
	c.nodes[n.next].prev = n.prev
}

func (c *LRU[K]) pushFront(i int32) {
	head := c.nodes[0].next
	c.nodes[i].prev, c.nodes[i].next = 0, head
	c.nodes[head].prev = i
	c.nodes[0].next = i
}
