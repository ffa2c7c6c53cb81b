package partition

import (
	"slices"
	"testing"
)

// churn compares two assignments of the same partitions: the share of
// partitions whose owner set changed, whose primary changed, and of owner
// slots (partition, owner) that are new.
func churn(before, after [][]string) (sets, primaries, slots float64) {
	var nSets, nPrim, nSlots, total int
	for p := range before {
		if before[p][0] != after[p][0] {
			nPrim++
		}
		changed := false
		for _, o := range after[p] {
			total++
			if !slices.Contains(before[p], o) {
				nSlots++
				changed = true
			}
		}
		if changed || len(before[p]) != len(after[p]) {
			nSets++
		}
	}
	n := float64(len(before))
	return float64(nSets) / n, float64(nPrim) / n, float64(nSlots) / float64(total)
}

func TestAddingNinthReplicaMovesAboutOneNth(t *testing.T) {
	for _, owners := range []int{1, 2} {
		tab := mustNew(t, names(8), Config{Owners: owners})
		before := tab.Snapshot().Assignment
		if err := tab.SetReplicas(names(9)); err != nil {
			t.Fatal(err)
		}
		after := tab.Snapshot().Assignment
		sets, prim, slots := churn(before, after)
		t.Logf("R=%d, P=%d, 8→9 replicas: owner sets changed %.3f, primaries %.3f, owner slots %.3f (1/N = %.3f)",
			owners, len(before), sets, prim, slots, 1.0/9)
		n := 8.0
		if slots > 1.5/n || prim > 1.5/n {
			t.Errorf("R=%d: %.3f of owner slots and %.3f of primaries moved, want ≤ 1.5/N = %.3f", owners, slots, prim, 1.5/n)
		}
		// Each of the new replica's R slots is in a different partition, so
		// at least R/(N+1) of the owner sets must change for it to get its
		// share; rendezvous hashing changes no more than that, within noise.
		if sets > 1.5*float64(owners)/n {
			t.Errorf("R=%d: %.3f of owner sets changed, want ≤ 1.5 R/N = %.3f", owners, sets, 1.5*float64(owners)/n)
		}
		// Only the new replica gains: nothing moves between the old ones.
		for p := range before {
			for _, o := range after[p] {
				if !slices.Contains(before[p], o) && o != names(9)[8] {
					t.Fatalf("R=%d: partition %d gained old replica %s: %v → %v", owners, p, o, before[p], after[p])
				}
			}
		}
	}
}

func TestRemovingReplicaMovesOnlyItsPartitions(t *testing.T) {
	tab := mustNew(t, names(9), Config{})
	before := tab.Snapshot().Assignment
	gone := names(9)[4]
	if err := tab.SetReplicas(slices.Delete(names(9), 4, 5)); err != nil {
		t.Fatal(err)
	}
	after := tab.Snapshot().Assignment
	for p := range before {
		if slices.Contains(after[p], gone) {
			t.Fatalf("partition %d still owned by removed %s", p, gone)
		}
		if !slices.Contains(before[p], gone) && !slices.Equal(before[p], after[p]) {
			t.Errorf("partition %d not owned by %s changed: %v → %v", p, gone, before[p], after[p])
		}
	}
	// And back: the same assignment as before, since it is a pure function
	// of the members.
	if err := tab.SetReplicas(names(9)); err != nil {
		t.Fatal(err)
	}
	if got := tab.Snapshot().Assignment; !slices.EqualFunc(got, before, slices.Equal) {
		t.Error("re-adding the replica did not restore the assignment")
	}
}

func TestAssignmentSpreadsPartitionsEvenly(t *testing.T) {
	tab := mustNew(t, names(8), Config{PartitionsPerReplica: 200})
	for _, r := range tab.Snapshot().Replicas {
		// 2 × 200 slots each on average: rendezvous hashing is binomial,
		// a deviation of 15% is more than 5 standard deviations.
		if r.Partitions < 340 || r.Partitions > 460 {
			t.Errorf("%s owns %d partitions, want 400 ± 15%%", r.Name, r.Partitions)
		}
	}
}

func TestFewerReplicasThanOwnersOwnEverything(t *testing.T) {
	tab := mustNew(t, names(1), Config{Owners: 3})
	if o := tab.OwnersAt("k", t0); len(o.Replicas) != 1 {
		t.Fatalf("owners %v, want the one replica", o.Replicas)
	}
	if err := tab.SetReplicas(names(4)); err != nil {
		t.Fatal(err)
	}
	if o := tab.OwnersAt("k", t0); len(o.Replicas) != 3 {
		t.Fatalf("owners %v, want 3", o.Replicas)
	}
}

func TestSetReplicasRefusesBadLists(t *testing.T) {
	tab := mustNew(t, names(3), Config{})
	for _, bad := range [][]string{nil, {"a", ""}, {"a", "b", "a"}} {
		if err := tab.SetReplicas(bad); err == nil {
			t.Errorf("SetReplicas(%q) accepted", bad)
		}
	}
	if got := len(tab.Snapshot().Replicas); got != 3 {
		t.Errorf("a refused list changed the members: %d", got)
	}
}
