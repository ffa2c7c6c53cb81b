package partition

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// partitionsOf returns, in order, the partitions member m owns first.
func partitionsOf(t *Table, m int32) []int {
	var ps []int
	for p := 0; p < t.parts; p++ {
		if t.owners(p)[0] == m {
			ps = append(ps, p)
		}
	}
	return ps
}

// withLoads sets the decayed load of each replica's first partitions (one
// owner each) and runs the round that may move; all other partitions get
// nothing.
func withLoads(tb testing.TB, tab *Table, loads [][]float64) []Move {
	tb.Helper()
	tab.RebalanceAt(t0) // the first round: starts the warm-up window
	for m, ls := range loads {
		ps := partitionsOf(tab, int32(m))
		if len(ps) < len(ls) {
			tb.Fatalf("replica %d owns %d partitions, test needs %d", m, len(ps), len(ls))
		}
		for i, l := range ls {
			tab.partLoad[ps[i]] = l
		}
	}
	return tab.RebalanceAt(t0.Add(DefaultWindow))
}

func TestRebalanceChoosesMoveTakingMostExcess(t *testing.T) {
	cases := []struct {
		name  string
		loads [][]float64 // per replica, its partitions' loads
		want  float64     // load of the partition moved off replica 0 to replica 2
	}{
		// mean 55, bound 68.75: A's excess is 26.25 and C has room 38.75.
		// 50 would push C over the bound; 30 takes all the excess, 10 less.
		{"largest that fits the receiver", [][]float64{{50, 30, 10, 5}, {40}, {30}}, 30},
		// mean 66, bound 82.5, excess 15.5: 40, 30 and 28 all take it;
		// the smallest of them burdens C least.
		{"smallest of those that take all", [][]float64{{40, 30, 28}, {60}, {40}}, 28},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tab := mustNew(t, names(3), Config{Owners: 1, PartitionsPerReplica: 4})
			moves := withLoads(t, tab, c.loads)
			if len(moves) != 1 {
				t.Fatalf("moves %+v, want one", moves)
			}
			m := moves[0]
			if m.From != names(3)[0] || m.To != names(3)[2] {
				t.Errorf("move %s → %s, want r0 → r2", m.From, m.To)
			}
			// The round decayed every load by e⁻¹ (a window since the first).
			if got := tab.partLoad[m.Partition] * math.E; math.Abs(got-c.want) > 1e-9 {
				t.Errorf("moved partition %d of load %v, want the one of %v", m.Partition, got, c.want)
			}
			if !strings.Contains(m.Reason, "r0.test load") || !strings.Contains(m.Reason, "above the bound 1.25×") {
				t.Errorf("reason %q does not explain the move", m.Reason)
			}
			if got := tab.OwnersAt(keyOf(t, tab, m.Partition), t0).Replicas; !slices.Equal(got, []string{m.To}) {
				t.Errorf("owners of the moved partition %v, want [%s]", got, m.To)
			}
			s := tab.Snapshot()
			if s.MovesTotal != 1 || s.Moved != 1 || len(s.RecentMoves) != 1 {
				t.Errorf("snapshot counts moves %d, moved %d, recent %d; want 1, 1, 1", s.MovesTotal, s.Moved, len(s.RecentMoves))
			}
			if s.LoadMaxOverMean > DefaultLoadBound {
				t.Errorf("after the move max/mean %.3f above the bound", s.LoadMaxOverMean)
			}
		})
	}
}

func TestRebalanceNeverPushesReceiverOverBound(t *testing.T) {
	// One huge partition on A: moving it would only move the hot spot.
	tab := mustNew(t, names(3), Config{Owners: 1, PartitionsPerReplica: 4})
	if moves := withLoads(t, tab, [][]float64{{100}, {10}, {10}}); len(moves) != 0 {
		t.Errorf("moves %+v, want none: any receiver would exceed the bound", moves)
	}
}

// skewedFeed records, for each second up to end, reads of one key per
// partition at a rate that puts most load on the partitions replica r0
// owns, running a round each second. It returns the moves with their
// round's time.
func skewedFeed(tb testing.TB, tab *Table, from, end time.Time) []Move {
	keys := make([]string, tab.parts)
	for p := range keys {
		keys[p] = keyOf(tb, tab, p)
	}
	heavy := map[int]bool{}
	for p := 0; p < tab.parts; p++ {
		heavy[p] = slices.Contains(tab.cur.Load().owners[p], names(8)[0])
	}
	var moves []Move
	for now := from; !now.After(end); now = now.Add(time.Second) {
		for p, k := range keys {
			n := 10
			if heavy[p] {
				n = 20
			}
			for range n {
				tab.RecordAt(k, "", now)
			}
		}
		moves = append(moves, tab.RebalanceAt(now)...)
	}
	return moves
}

func TestRebalanceRespectsWarmupCooldownAndCap(t *testing.T) {
	tab := mustNew(t, names(8), Config{HotKeys: -1})
	moves := skewedFeed(t, tab, t0, t0.Add(120*time.Second))
	if len(moves) == 0 {
		t.Fatal("no moves off the overloaded replica")
	}
	if moves[0].At.Before(t0.Add(DefaultWindow)) {
		t.Errorf("first move at %v, before a window of load", moves[0].At.Sub(t0))
	}
	perRound := map[time.Time]int{}
	var rounds []time.Time
	for _, m := range moves {
		if perRound[m.At] == 0 {
			rounds = append(rounds, m.At)
		}
		perRound[m.At]++
	}
	for i, at := range rounds {
		if perRound[at] > DefaultMovesPerRound {
			t.Errorf("%d moves in the round at %v, cap %d", perRound[at], at.Sub(t0), DefaultMovesPerRound)
		}
		if i > 0 && at.Sub(rounds[i-1]) < DefaultCooldown {
			t.Errorf("rounds with moves %v apart, cooldown %v", at.Sub(rounds[i-1]), DefaultCooldown)
		}
	}
	s := tab.Snapshot()
	t.Logf("%d moves in %d rounds; model load max/mean %.3f", len(moves), len(rounds), s.LoadMaxOverMean)
	if s.LoadMaxOverMean > DefaultLoadBound {
		t.Errorf("after two minutes max/mean %.3f, want ≤ %v", s.LoadMaxOverMean, DefaultLoadBound)
	}
	if s.MovesTotal != uint64(len(moves)) || s.Rounds != 121 {
		t.Errorf("snapshot counts %d moves in %d rounds, want %d in 121", s.MovesTotal, s.Rounds, len(moves))
	}
}

func TestRebalanceOff(t *testing.T) {
	tab := mustNew(t, names(8), Config{MovesPerRound: -1, HotKeys: -1})
	if moves := skewedFeed(t, tab, t0, t0.Add(30*time.Second)); len(moves) != 0 {
		t.Errorf("rebalancing off, yet %d moves", len(moves))
	}
	// The feed is skewed enough to need moves: without them r0 stays over.
	if s := tab.Snapshot(); s.LoadMaxOverMean <= DefaultLoadBound {
		t.Errorf("max/mean %.3f without rebalancing: the feed is not skewed", s.LoadMaxOverMean)
	}
}

func TestMembershipKeepsOrDropsMoves(t *testing.T) {
	tab := mustNew(t, names(3), Config{Owners: 1, PartitionsPerReplica: 4})
	moves := withLoads(t, tab, [][]float64{{50, 30, 10, 5}, {40}, {30}})
	if len(moves) != 1 {
		t.Fatalf("moves %+v, want one", moves)
	}
	p, key := moves[0].Partition, keyOf(t, tab, moves[0].Partition)
	// Removing r1, which the move does not name and which hashing did not
	// give p to: the move stays.
	if err := tab.SetReplicas([]string{names(3)[0], names(3)[2]}); err != nil {
		t.Fatal(err)
	}
	if got := tab.OwnersAt(key, t0).Replicas; !slices.Equal(got, []string{names(3)[2]}) {
		t.Errorf("after removing r1, owners of moved partition %d are %v, want [r2]", p, got)
	}
	// Removing r2, the receiver: the move is dropped, p goes back to r0.
	if err := tab.SetReplicas([]string{names(3)[0], names(3)[1]}); err != nil {
		t.Fatal(err)
	}
	if got := tab.OwnersAt(key, t0).Replicas; !slices.Equal(got, []string{names(3)[0]}) {
		t.Errorf("after removing r2, owners of partition %d are %v, want [r0]", p, got)
	}
	if s := tab.Snapshot(); s.Moved != 0 {
		t.Errorf("snapshot counts %d moved partitions, want 0", s.Moved)
	}
}

// A partition's reads are its home's: with two owners, the model gives the
// home all of them (not half), and a move hands the home to the other
// owner when it is the least loaded, the old home staying an owner.
func TestRebalanceHandsHomeToAnotherOwner(t *testing.T) {
	tab := mustNew(t, names(2), Config{PartitionsPerReplica: 4, HotKeys: -1})
	// r0 is the home of its partitions' 52 reads, r1 of 20: mean 36, bound
	// 45. Split over both owners, each would carry 36 and nothing move.
	moves := withLoads(t, tab, [][]float64{{30, 12, 10}, {20}})
	if len(moves) != 1 {
		t.Fatalf("moves %+v, want one", moves)
	}
	m := moves[0]
	if m.From != names(2)[0] || m.To != names(2)[1] || !strings.Contains(m.Reason, "its home to its owner "+names(2)[1]) {
		t.Errorf("move %+v, want r0's home to its owner r1", m)
	}
	// r0 sheds down to halfway between the mean and the bound, 40.5: 12
	// takes all of that excess of 11.5, 10 not, 30 would push r1 over it.
	if got := tab.partLoad[m.Partition] * math.E; math.Abs(got-12) > 1e-9 {
		t.Errorf("moved partition of load %v, want 12", got)
	}
	if got := tab.OwnersAt(keyOf(t, tab, m.Partition), t0).Replicas; !slices.Equal(got, []string{names(2)[1], names(2)[0]}) {
		t.Errorf("owners after the move %v, want [r1 r0]", got)
	}
	s := tab.Snapshot()
	if want := 40 / math.E / DefaultWindow.Seconds(); math.Abs(s.Replicas[0].Load-want) > 1e-9 || s.Moved != 1 {
		t.Errorf("r0's model load %v/s, moved %d; want %v (40/e per window), 1", s.Replicas[0].Load, s.Moved, want)
	}
}

// A move to a replica outside the owners makes it the home, in the old
// home's place.
func TestRebalanceHandsHomeOutsideTheOwners(t *testing.T) {
	tab := mustNew(t, names(3), Config{PartitionsPerReplica: 4, HotKeys: -1})
	moves := withLoads(t, tab, [][]float64{{50, 30, 10, 5}, {40}, {30}})
	if len(moves) != 1 {
		t.Fatalf("moves %+v, want one", moves)
	}
	m := moves[0]
	before := tab.base[m.Partition*tab.r : (m.Partition+1)*tab.r]
	after := tab.owners(m.Partition)
	want := slices.Clone(before)
	if k := slices.Index(before, 2); k > 0 {
		want[0], want[k] = 2, 0 // r2 owned it: a swap
	} else {
		want[0] = 2
	}
	if m.From != names(3)[0] || m.To != names(3)[2] || !slices.Equal(after, want) {
		t.Errorf("move %+v: owners %v → %v, want %v", m, before, after, want)
	}
}

// A replica just over the bound sheds down to halfway between the mean
// and the bound, not to the bound, where it would sit for the noise of a
// window to put it back over.
func TestRebalanceShedsToHalfwayBelowTheBound(t *testing.T) {
	tab := mustNew(t, names(2), Config{Owners: 1, PartitionsPerReplica: 4, HotKeys: -1})
	// r0 12, r1 6: mean 9, bound 11.25, halfway 10.125. To the bound, the
	// partition of 1 would do (r0 at 11); to halfway, the one of 3.
	moves := withLoads(t, tab, [][]float64{{8, 3, 1}, {6}})
	if len(moves) != 1 {
		t.Fatalf("moves %+v, want one", moves)
	}
	if got := tab.partLoad[moves[0].Partition] * math.E; math.Abs(got-3) > 1e-9 {
		t.Errorf("moved the partition of load %v, want 3", got)
	}
	if s := tab.Snapshot(); math.Abs(s.LoadMaxOverMean-1) > 1e-9 {
		t.Errorf("model max/mean %v after the move, want 1", s.LoadMaxOverMean)
	}
}

// A partition whose own reads exceed the bound has no home within it
// wherever it goes: its reads spread over its owners (Shared), the model
// splits it, and it gets a home again once its reads fall below the mean.
func TestPartitionTooHotForOneHomeIsShared(t *testing.T) {
	tab := mustNew(t, names(3), Config{PartitionsPerReplica: 4, HotKeys: -1, MovesPerRound: -1})
	tab.RebalanceAt(t0)
	for p := range tab.partLoad {
		tab.partLoad[p] = 10
	}
	tab.partLoad[5] = 200 // 310 in all, mean 103.3, bound 129.2
	tab.RebalanceAt(t0.Add(time.Second))
	key := keyOf(t, tab, 5)
	o := tab.OwnersAt(key, t0)
	s := tab.Snapshot()
	if !o.Shared || o.Hot || !slices.Equal(s.Shared, []int{5}) {
		t.Fatalf("owners %+v, shared %v; want partition 5 shared", o, s.Shared)
	}
	if o := tab.OwnersAt(keyOf(t, tab, 4), t0); o.Shared {
		t.Errorf("partition 4 (10 reads) shared: %+v", o)
	}
	// Its owners take half each in the model.
	decay := math.Exp(-0.1)
	own := tab.owners(5)
	for m := range tab.members {
		want := 0.0
		for p := range tab.parts {
			o := tab.owners(p)
			switch {
			case p == 5 && slices.Contains(o, int32(m)):
				want += 100 * decay
			case p != 5 && o[0] == int32(m):
				want += 10 * decay
			}
		}
		if math.Abs(tab.loads[m]-want) > 1e-6 {
			t.Errorf("%s: model load %v, want %v (owners of 5: %v)", tab.members[m], tab.loads[m], want, own)
		}
	}
	// Down to 70 (63 once decayed, against a mean of 51 and a bound of
	// 64): still shared; to 40 (36, the mean 39): a home again.
	tab.partLoad[5] = 70
	tab.RebalanceAt(t0.Add(2 * time.Second))
	if !tab.OwnersAt(key, t0).Shared {
		t.Error("partition 5 lost its sharing between the mean and the bound")
	}
	tab.partLoad[5] = 40
	tab.RebalanceAt(t0.Add(3 * time.Second))
	if o := tab.OwnersAt(key, t0); o.Shared || len(tab.Snapshot().Shared) != 0 {
		t.Errorf("partition 5 below the mean still shared: %+v", o)
	}
}
