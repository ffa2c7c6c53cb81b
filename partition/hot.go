package partition

import "slices"

// This file: selective replication. A round reads the sketch; a key whose
// decayed count, less its possible overestimate, exceeds HotShare × the
// mean per replica becomes hot, and stays hot while its count stays above
// half of that (hysteresis, so that a key near the threshold does not flap).

// minHotReads is the decayed count (reads in about a Window) a key needs
// before it can be hot: with little traffic every key that was read at all
// would otherwise pass a share of the mean.
const minHotReads = 16

// hotKey is a hot key as a round last saw it.
type hotKey struct {
	key       string
	hash      uint64
	partition int
	count     float64 // decayed reads, ≈ rate × Window
	replicas  []int32 // member indices: the partition's owners, then more
}

// updateHot reads the sketch at now (Unix ns) and returns the new hot set,
// most read first, with its replicas, and the sketch's decayed total.
// Called with mu held.
func (t *Table) updateHot(now int64) ([]hotKey, float64) {
	held, total := t.sketch.decayTo(now)
	if total <= 0 {
		return nil, total
	}
	enter := t.cfg.HotShare * total / float64(len(t.members))
	leave := enter / 2
	was := make(map[string]bool, len(t.hot))
	for _, h := range t.hot {
		was[h.key] = true
	}
	var next []hotKey
	for _, c := range held {
		if len(next) == t.cfg.HotKeys || c.count < leave {
			break // sorted by count: none further qualifies
		}
		lower := c.count - c.err
		if was[c.key] || lower > enter && lower >= minHotReads && t.homeOverBound(partitionOf(c.hash, t.parts)) {
			next = append(next, hotKey{key: c.key, hash: c.hash, partition: partitionOf(c.hash, t.parts), count: c.count})
		}
	}
	return t.routeHot(next), total
}

// routeHot gives each hot key its replicas: its partition's owners in
// force, then the most preferred others by the key's own rendezvous order
// (so two hot keys of one partition spread over different extra replicas),
// K in all. Called with mu held.
func (t *Table) routeHot(hs []hotKey) []hotKey {
	k := min(max(t.cfg.HotReplicas, t.r), len(t.members))
	for i := range hs {
		h := &hs[i]
		own := t.owners(h.partition)
		rs := make([]int32, k)
		copy(rs, own)
		rankTop(rs[len(own):], t.hashes, h.hash, func(m int32) bool { return slices.Contains(own, m) })
		h.replicas = rs
	}
	return hs
}

// sameRoutes reports whether two hot sets route the same keys to the same
// replicas.
func sameRoutes(a, b []hotKey) bool {
	return slices.EqualFunc(a, b, func(x, y hotKey) bool {
		return x.key == y.key && slices.Equal(x.replicas, y.replicas)
	})
}

// homeOverBound reports whether partition p's home carried more than
// LoadBound × the mean load in the last round's model: a key of it
// becomes hot (read from more replicas, each of which misses it once)
// only when its home needs the help. A shared partition has no home to
// help: its keys may become hot on their rate alone. Before a round has
// modelled the loads there is nothing to judge by, and no key becomes hot:
// the first second's counts are too few to tell a hot key from a lucky
// one. Called with mu held.
func (t *Table) homeOverBound(p int) bool {
	if t.shared[p] {
		return true
	}
	total := 0.0
	for _, l := range t.loads {
		total += l
	}
	if total <= 0 {
		return false
	}
	return t.loads[t.owners(p)[0]] > t.cfg.LoadBound*total/float64(len(t.loads))
}
