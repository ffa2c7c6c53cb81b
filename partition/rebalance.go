package partition

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// This file: the rebalancing round. Loads are decayed read counts (a steady
// rate r reads as r × Window). The rebalancer acts on a model, not on what
// replicas served: a partition's reads, its hot keys' taken out, on its
// home (its first owner, where its keys' primaries go), and each hot key's
// split evenly over its replicas. The model follows a move at once, where
// a served rate would lag it by a Window and invite a second move for the
// same excess.
//
// A move hands a partition's home to another replica: to one of its other
// owners (the two swap places, so the old home stays an owner and takes
// hedges), or to a replica outside them (which takes the old home's
// place). Either way the partition's keys stay warm in one cache, the new
// home's, once it has read them: the load bound is kept by where homes
// are, not by splitting a key's primaries between caches.

// Move is one partition's home moved from one replica to another.
type Move struct {
	Partition int       `json:"partition"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
}

// RebalanceAt runs one round at now: it folds the reads RecordAt counted
// since the last round into the decayed loads, updates the hot set, and,
// unless the cooldown since the last round that moved something (or the
// first Window after the first round) is running, moves up to
// MovesPerRound partitions off replicas above LoadBound × the mean load. It
// returns the moves made, each with its reason. Callers call it
// periodically, about once a second; it is off the request path (it
// allocates, and takes the Table's lock).
func (t *Table) RebalanceAt(now time.Time) []Move {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fold(now)
	changed := false
	if t.sketch != nil {
		hot, _ := t.updateHot(now.UnixNano())
		changed = !sameRoutes(hot, t.hot)
		t.hot = hot
	}
	nonHot, reshared := t.model()
	changed = changed || reshared
	moves := t.rebalance(now, nonHot)
	if len(moves) > 0 {
		changed = true
		t.hot = t.routeHot(t.hot) // the owners of a hot key's partition may have moved
	}
	if changed {
		t.publish()
	}
	t.hotUntil.Store(now.Add(t.cfg.Window).UnixNano())
	t.total.rounds++
	t.last = now
	return moves
}

// fold adds the reads counted since the last round to the decayed loads,
// as if they had arrived evenly since then. Called with mu held.
func (t *Table) fold(now time.Time) {
	decay, spread := 1.0, 1.0
	if t.first.IsZero() {
		t.first = now
	} else if dt := now.Sub(t.last); dt > 0 {
		x := float64(dt) / float64(t.cfg.Window)
		decay = math.Exp(-x)
		spread = -math.Expm1(-x) / x
	}
	for p := range t.counts {
		t.partLoad[p] = t.partLoad[p]*decay + float64(t.counts[p].Swap(0))*spread
	}
	for _, s := range t.served {
		s.load = s.load*decay + float64(s.n.Swap(0))*spread
	}
}

// model sets t.loads, each member's load under the assignment in force,
// and returns each partition's load less its hot keys', and whether a
// partition became shared or stopped being so. A partition's reads are
// its home's, or split over its owners when it is shared; the other
// owners take only its hedges, which the model leaves out (a budgeted few
// percent, and they follow the slow reads rather than the keys). Called
// with mu held.
func (t *Table) model() ([]float64, bool) {
	nonHot := slices.Clone(t.partLoad)
	for _, h := range t.hot {
		nonHot[h.partition] = max(nonHot[h.partition]-h.count, 0)
	}
	changed := t.share(nonHot)
	clear(t.loads)
	for p, l := range nonHot {
		own := t.owners(p)
		if !t.shared[p] {
			t.loads[own[0]] += l
			continue
		}
		for _, m := range own {
			t.loads[m] += l / float64(len(own))
		}
	}
	for _, h := range t.hot {
		share := h.count / float64(len(h.replicas))
		for _, m := range h.replicas {
			t.loads[m] += share
		}
	}
	return nonHot, changed
}

// share decides which partitions are shared: one whose own reads (its hot
// keys' apart) exceed LoadBound × the mean load per replica has no home
// within the bound wherever it goes, so its primaries spread over its
// owners, until its reads fall below the mean (hysteresis). With one owner
// there is nothing to share with. It reports whether any changed. Called
// with mu held.
func (t *Table) share(nonHot []float64) bool {
	total := 0.0
	for _, l := range t.partLoad {
		total += l
	}
	mean := total / float64(len(t.members))
	changed := false
	for p, l := range nonHot {
		was := t.shared[p]
		switch {
		case t.r < 2 || mean <= 0:
			t.shared[p] = false
		case !was && l > t.cfg.LoadBound*mean && l >= minHotReads:
			t.shared[p] = true
		case was && l < mean:
			t.shared[p] = false
		}
		changed = changed || t.shared[p] != was
	}
	return changed
}

// rebalance makes the round's moves, updating t.eff and t.loads. Called
// with mu held.
func (t *Table) rebalance(now time.Time, nonHot []float64) []Move {
	n := len(t.members)
	switch {
	case t.cfg.MovesPerRound < 0, n < 2: // off, or nowhere to move to
		return nil
	case now.Sub(t.first) < t.cfg.Window: // the loads do not cover a window yet
		return nil
	case !t.lastMove.IsZero() && now.Sub(t.lastMove) < t.cfg.Cooldown:
		return nil
	}
	sum := 0.0
	for _, l := range t.loads {
		sum += l
	}
	mean := sum / float64(n)
	if mean <= 0 {
		return nil
	}
	bound := t.cfg.LoadBound * mean
	// A replica over the bound sheds down to halfway between the mean and
	// the bound, to receivers that stay below it too, where such a move
	// exists: a home's load is all of its partitions' (not a share that
	// picks between owners even out), and one shed only to the bound
	// would sit on it, for the noise of a window to put it back over.
	target := mean + (bound-mean)/2
	var moves []Move
	for len(moves) < t.cfg.MovesPerRound {
		x := 0
		for m, l := range t.loads {
			if l > t.loads[x] {
				x = m
			}
		}
		if t.loads[x] <= bound {
			break
		}
		p, y, share, ok := t.bestMove(int32(x), target, nonHot)
		if !ok {
			if p, y, share, ok = t.bestMove(int32(x), bound, nonHot); !ok {
				break
			}
		}
		own := t.owners(p)
		how := "its home to " + t.members[y]
		if k := slices.Index(own, y); k > 0 {
			// y owns p already (it took p's hedges): the two swap places.
			own[k] = int32(x)
			how = "its home to its owner " + t.members[y]
		}
		own[0] = y
		reason := fmt.Sprintf("replica %s load %.2f× mean, above the bound %.2f×: partition %d (%.2f× mean) %s at %.2f× mean",
			t.members[x], t.loads[x]/mean, t.cfg.LoadBound, p, share/mean, how, t.loads[y]/mean)
		t.loads[x] -= share
		t.loads[y] += share
		moves = append(moves, Move{Partition: p, From: t.members[x], To: t.members[y], Reason: reason, At: now})
	}
	if len(moves) > 0 {
		t.lastMove = now
		t.total.moves += uint64(len(moves))
		t.moves = append(t.moves, moves...)
		t.moves = t.moves[max(len(t.moves)-maxRecentMoves, 0):]
	}
	return moves
}

// bestMove chooses the move that takes the most of x's excess over level
// with one partition x is the home of: the receivers are tried least
// loaded first, and for the first that can take any of them without going
// above level, the partition taking the most excess wins (the smallest of
// those that take all of it, so the receiver gets no more than needed;
// then the lowest number). Called with mu held.
func (t *Table) bestMove(x int32, level float64, nonHot []float64) (p int, y int32, share float64, ok bool) {
	type cand struct {
		p     int
		share float64
	}
	var cands []cand
	for q := 0; q < t.parts; q++ {
		// A shared partition's home takes only its share, and no
		// replica could take all of it within the bound.
		if s := nonHot[q]; s > 0 && t.owners(q)[0] == x && !t.shared[q] {
			cands = append(cands, cand{q, s})
		}
	}
	receivers := make([]int32, 0, len(t.members)-1)
	for m := range t.members {
		if int32(m) != x {
			receivers = append(receivers, int32(m))
		}
	}
	slices.SortFunc(receivers, func(a, b int32) int {
		return cmp.Or(cmp.Compare(t.loads[a], t.loads[b]), cmp.Compare(a, b))
	})
	excess := t.loads[x] - level
	for _, r := range receivers {
		room := level - t.loads[r]
		if room <= 0 {
			break // the rest are loaded more
		}
		best, bestTaken, bestShare := -1, 0.0, 0.0
		for _, c := range cands {
			if c.share > room {
				continue
			}
			taken := min(c.share, excess)
			if best < 0 || taken > bestTaken || taken == bestTaken && c.share < bestShare {
				best, bestTaken, bestShare = c.p, taken, c.share
			}
		}
		if best >= 0 {
			return best, r, bestShare, true
		}
	}
	return 0, 0, 0, false
}
