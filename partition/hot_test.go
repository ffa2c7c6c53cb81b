package partition

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// feed records one second of reads ending at now: rates[key] reads of each
// key, plus cold reads of distinct keys up to total, then runs a round.
func feed(t *Table, now time.Time, total int, rates map[string]int) []Move {
	n := 0
	for k, r := range rates {
		for range r {
			t.RecordAt(k, "", now)
		}
		n += r
	}
	for i := n; i < total; i++ {
		t.RecordAt(fmt.Sprintf("cold-%d", i), "", now)
	}
	return t.RebalanceAt(now)
}

func TestHotKeySpreadsOverKReplicasThenCools(t *testing.T) {
	tab := mustNew(t, names(8), Config{MovesPerRound: -1})
	// 1000 reads/s over 8 replicas: 125/s each, so a key is hot above
	// 0.25 × 125 = 31.25/s and cools below 15.6/s.
	now := t0
	for range 5 {
		now = now.Add(time.Second)
		feed(tab, now, 1000, map[string]int{"hot": 300, "warm": 20})
	}
	o := tab.OwnersAt("hot", now)
	owners := tab.cur.Load().owners[o.Partition]
	if !o.Hot || len(o.Replicas) != DefaultHotReplicas {
		t.Fatalf("hot key at 300/s: %+v, want hot over %d replicas", o, DefaultHotReplicas)
	}
	if !slices.Equal(o.Replicas[:len(owners)], owners) {
		t.Errorf("hot replicas %v do not start with the partition's owners %v", o.Replicas, owners)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(o.Replicas)))) != len(o.Replicas) {
		t.Errorf("hot replicas repeat: %v", o.Replicas)
	}
	if tab.OwnersAt("warm", now).Hot {
		t.Error("a key at 20/s, below the threshold, is hot")
	}
	if hk := tab.Snapshot().HotKeys; len(hk) != 1 || hk[0].Key != "hot" || hk[0].Rate < 100 {
		// After 5 s of a 10 s window a steady 300/s reads as 300(1-e^-0.5) ≈ 118/s.
		t.Errorf("snapshot hot keys %+v, want hot at ≥ 100/s", hk)
	}

	// Hysteresis: at 20/s, between the thresholds, the hot key stays hot
	// (its count settles at 200 > 156) and the warm one stays cold.
	for range 60 {
		now = now.Add(time.Second)
		feed(tab, now, 1000, map[string]int{"hot": 20, "warm": 20})
	}
	if !tab.OwnersAt("hot", now).Hot || tab.OwnersAt("warm", now).Hot {
		t.Error("hysteresis: the hot key at 20/s must stay hot and the warm one cold")
	}
	// At 5/s its count falls from 200 towards 50 and crosses the cooling
	// threshold, 156, after 10 ln(150/106) ≈ 3.5 s: the 4th round.
	cooled := time.Duration(0)
	for s := 1; s <= 60 && cooled == 0; s++ {
		now = now.Add(time.Second)
		feed(tab, now, 1000, map[string]int{"hot": 5})
		if !tab.OwnersAt("hot", now).Hot {
			cooled = time.Duration(s) * time.Second
		}
	}
	if cooled != 4*time.Second {
		t.Errorf("cooled after %v, want 4s", cooled)
	}
	if len(tab.Snapshot().HotKeys) != 0 {
		t.Error("snapshot still lists hot keys")
	}
}

func TestHotKeysAreCappedHottestFirst(t *testing.T) {
	tab := mustNew(t, names(8), Config{HotKeys: 2, MovesPerRound: -1})
	now := t0
	for range 10 {
		now = now.Add(time.Second)
		feed(tab, now, 1000, map[string]int{"a": 200, "b": 150, "c": 100})
	}
	var got []string
	for _, h := range tab.Snapshot().HotKeys {
		got = append(got, h.Key)
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("hot keys %v, want [a b]", got)
	}
	if tab.OwnersAt("c", now).Hot {
		t.Error("c is hot beyond the cap")
	}
}

func TestHotRoutesLapseWhenRoundsStop(t *testing.T) {
	tab := mustNew(t, names(8), Config{MovesPerRound: -1})
	now := t0
	for range 5 {
		now = now.Add(time.Second)
		feed(tab, now, 1000, map[string]int{"hot": 300})
	}
	if !tab.OwnersAt("hot", now.Add(DefaultWindow-time.Nanosecond)).Hot {
		t.Fatal("not hot within a window of the last round")
	}
	if o := tab.OwnersAt("hot", now.Add(DefaultWindow)); o.Hot || len(o.Replicas) != DefaultOwners {
		t.Errorf("a window after the last round: %+v, want the partition's owners", o)
	}
}

func TestHotKeysOffSkipsSketch(t *testing.T) {
	tab := mustNew(t, names(8), Config{HotKeys: -1})
	now := t0
	for range 5 {
		now = now.Add(time.Second)
		feed(tab, now, 1000, map[string]int{"hot": 900})
	}
	if tab.sketch != nil || tab.OwnersAt("hot", now).Hot {
		t.Error("hot keys off, yet a sketch or a hot key")
	}
}

// A key above the hot share whose home is within the load bound stays on
// its home: spreading it would cost a miss on each other replica for no
// balance gained. A key whose home is over the bound does spread.
func TestKeyHotOnlyWhenItsHomeNeedsHelp(t *testing.T) {
	tab := mustNew(t, names(8), Config{MovesPerRound: -1})
	// 1000 reads/s over 8 replicas: 125/s each; the hot share is 31.25/s
	// and the bound 156/s.
	now := t0
	for range 5 {
		now = now.Add(time.Second)
		feed(tab, now, 1000, nil)
	}
	// A key whose home carries at most 0.7 × the mean: at 60/s more it
	// stays within the bound.
	tab.mu.Lock()
	mean := 0.0
	for _, l := range tab.loads {
		mean += l / float64(len(tab.loads))
	}
	single := ""
	for k := 0; single == ""; k++ {
		key := fmt.Sprintf("single-%d", k)
		if tab.loads[tab.owners(tab.Partition(key))[0]] <= 0.7*mean {
			single = key
		}
	}
	tab.mu.Unlock()
	for range 5 {
		now = now.Add(time.Second)
		feed(tab, now, 1000, map[string]int{single: 60})
	}
	if o := tab.OwnersAt(single, now); o.Hot {
		t.Fatalf("a key of 60/s on a home within the bound is hot: %+v", o)
	}
	for range 5 {
		now = now.Add(time.Second)
		feed(tab, now, 1000, map[string]int{single: 60, "heavy": 300})
	}
	if o := tab.OwnersAt("heavy", now); !o.Hot {
		t.Fatalf("a key of 300/s is not hot: %+v", o)
	}
}
