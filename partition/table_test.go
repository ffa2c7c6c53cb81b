package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNewRefusesBadConfig(t *testing.T) {
	cases := []struct {
		cfg   Config
		field string
	}{
		{Config{PartitionsPerReplica: -1}, "PartitionsPerReplica"},
		{Config{PartitionsPerReplica: MaxPartitions}, "partitions"},
		{Config{Owners: -2}, "Owners"},
		{Config{Owners: MaxOwners + 1}, "Owners"},
		{Config{LoadBound: 1}, "LoadBound"},
		{Config{LoadBound: math.NaN()}, "LoadBound"},
		{Config{LoadBound: math.Inf(1)}, "LoadBound"},
		{Config{Cooldown: -time.Second}, "Cooldown"},
		{Config{Window: -time.Second}, "Window"},
		{Config{HotShare: -0.1}, "HotShare"},
		{Config{HotReplicas: -1}, "HotReplicas"},
		{Config{HotReplicas: MaxHotReplicas + 1}, "HotReplicas"},
		{Config{SketchSize: -1}, "SketchSize"},
		{Config{HotKeys: 300}, "SketchSize"},
		{Config{HotKeys: MaxHotKeys + 1, SketchSize: MaxSketchSize}, "HotKeys"},
	}
	for _, c := range cases {
		_, err := New(names(4), c.cfg)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("New(%+v): %v, want ErrInvalid naming %s", c.cfg, err, c.field)
		}
	}
	for _, bad := range [][]string{nil, {""}, {"a", "a"}} {
		if _, err := New(bad, Config{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	tab := mustNew(t, names(8), Config{})
	if tab.Partitions() != 160 {
		t.Errorf("P = %d, want 20 × 8", tab.Partitions())
	}
	o := tab.OwnersAt("some/key", t0)
	if len(o.Replicas) != 2 || o.Replicas[0] == o.Replicas[1] || o.Hot {
		t.Errorf("owners %+v, want two distinct, not hot", o)
	}
	if o.Partition != tab.Partition("some/key") {
		t.Error("OwnersAt and Partition disagree")
	}
	// Negative switches are not errors.
	mustNew(t, names(8), Config{MovesPerRound: -1, HotKeys: -1})
}

func TestPartitionIsStableAcrossTables(t *testing.T) {
	// The hash is fixed: two gateways (two Tables) agree, and so does a
	// future version (these values are pinned).
	a := mustNew(t, names(8), Config{})
	b := mustNew(t, names(8), Config{})
	for i := range 100 {
		k := fmt.Sprintf("/items/%d", i)
		if a.Partition(k) != b.Partition(k) {
			t.Fatalf("tables disagree on %s", k)
		}
	}
	if got := []int{a.Partition(""), a.Partition("/items/2"), a.Partition("a-much-longer-key-of-more-than-16-bytes")}; fmt.Sprint(got) != pinned {
		t.Errorf("partitions %v changed from %s: every deployed assignment would move", got, pinned)
	}
}

const pinned = "[9 143 153]"

func TestServedLoadAndSnapshotJSON(t *testing.T) {
	// Rebalancing off: r0 serves 3× r1, and its homes would move.
	tab := mustNew(t, names(2), Config{HotKeys: -1, MovesPerRound: -1})
	now := t0
	for range 30 {
		now = now.Add(time.Second)
		for i := range 30 {
			tab.RecordAt(fmt.Sprint(i), names(2)[0], now)
		}
		for i := range 10 {
			tab.RecordAt(fmt.Sprint(i), names(2)[1], now)
		}
		tab.RecordAt("x", "unknown", now) // counts for its partition only
		tab.RebalanceAt(now)
	}
	s := tab.Snapshot()
	// 30 s of a 10 s window: within 1 - e⁻³ ≈ 95% of the rates.
	if r := s.Replicas[0].Served; r < 28 || r > 30.1 {
		t.Errorf("r0 served %.2f/s, want ≈ 30", r)
	}
	if r := s.Replicas[1].Served; r < 9.3 || r > 10.1 {
		t.Errorf("r1 served %.2f/s, want ≈ 10", r)
	}
	if m := s.ServedMaxOverMean; m < 1.49 || m > 1.51 {
		t.Errorf("served max/mean %.3f, want 1.5", m)
	}
	if s.Rounds != 30 || s.Partitions != 40 || s.Owners != 2 || len(s.Assignment) != 40 {
		t.Errorf("snapshot %+v", s)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"assignment":`, `"replicas":`, `"recentMoves":[]`, `"hotKeys":[]`, `"loadMaxOverMean":`, `"movesTotal":0`} {
		if !strings.Contains(string(b), f) {
			t.Errorf("snapshot JSON lacks %s: %s", f, b[:200])
		}
	}
}

func TestRequestPathDoesNotAllocate(t *testing.T) {
	tab := mustNew(t, names(8), Config{})
	now := t0
	for range 3 {
		now = now.Add(time.Second)
		feed(tab, now, 1000, map[string]int{"hot": 300})
	}
	keys := []string{"hot", "cold-1", "a-key-that-is-longer-than-sixteen-bytes"}
	replica := names(8)[3]
	for _, k := range keys {
		if n := testing.AllocsPerRun(100, func() { tab.OwnersAt(k, now) }); n != 0 {
			t.Errorf("OwnersAt(%q) allocates %v", k, n)
		}
		if n := testing.AllocsPerRun(100, func() { tab.RecordAt(k, replica, now) }); n != 0 {
			t.Errorf("RecordAt(%q) allocates %v", k, n)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	tab := mustNew(t, names(8), Config{Cooldown: time.Nanosecond, Window: time.Second})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("k%d", i%(50+g))
				if i%3 == 0 {
					k = "hot"
				}
				o := tab.OwnersAt(k, t0)
				tab.RecordAt(k, o.Replicas[0], t0.Add(time.Duration(i)*time.Microsecond))
			}
		})
	}
	now := t0
	for i := range 200 {
		now = now.Add(100 * time.Millisecond)
		tab.RebalanceAt(now)
		if i%50 == 0 {
			tab.SetReplicas(names(8 + i/50))
		}
		_ = tab.Snapshot()
	}
	close(stop)
	wg.Wait()
}

func TestPartitionSpreadsStructuredKeys(t *testing.T) {
	// Keys that differ in a digit or two, of every length from 1 to 24
	// bytes (the hash reads short strings and tails in overlapping
	// words): no two of them hash alike, and every partition gets its
	// share within 15% (5 standard deviations).
	tab := mustNew(t, names(8), Config{})
	counts := make([]int, tab.Partitions())
	seen := map[uint64]string{}
	n := 0
	for _, form := range []string{"%d", "/i/%d", "/items/%d", "/users/%d/profile", "k%07d-suffix-xx"} {
		for i := range 20_000 {
			k := fmt.Sprintf(form, i)
			h := hashString(k)
			if prev, dup := seen[h]; dup {
				t.Fatalf("%q and %q hash alike", prev, k)
			}
			seen[h] = k
			counts[tab.Partition(k)]++
			n++
		}
	}
	want := float64(n) / float64(len(counts))
	for p, c := range counts {
		if math.Abs(float64(c)-want) > 0.15*want {
			t.Errorf("partition %d has %d keys, want %.0f ± 15%%", p, c, want)
		}
	}
}

// A key with a home is cold on its first read and after 15-30 s unread,
// warm in between; a read that spilled to another owner is followed there
// while the key stays warm. A shared or hot key is neither.
func TestOwnersColdAndSpilled(t *testing.T) {
	tab := mustNew(t, names(4), Config{})
	now := t0
	o := tab.OwnersAt("k", now)
	if !o.Cold || o.Spilled != 0 {
		t.Fatalf("first read: cold %v spilled %d; want cold", o.Cold, o.Spilled)
	}
	if o = tab.OwnersAt("k", now.Add(time.Second)); o.Cold || o.Spilled != 0 {
		t.Fatalf("read again: cold %v spilled %d; want warm, at home", o.Cold, o.Spilled)
	}
	tab.SpilledAt("k", 1, now.Add(time.Second))
	if o = tab.OwnersAt("k", now.Add(2*time.Second)); o.Cold || o.Spilled != 1 {
		t.Fatalf("after a spill: cold %v spilled %d; want warm, at owner 1", o.Cold, o.Spilled)
	}
	// Read every 14 s, it stays warm and where it spilled to.
	at := now.Add(2 * time.Second)
	for range 5 {
		at = at.Add(recentEpoch - time.Second)
		if o = tab.OwnersAt("k", at); o.Cold || o.Spilled != 1 {
			t.Fatalf("read at %v: cold %v spilled %d; want warm, at owner 1", at.Sub(now), o.Cold, o.Spilled)
		}
	}
	// Unread for two epochs, it is cold again, and home.
	if o = tab.OwnersAt("k", at.Add(2*recentEpoch)); !o.Cold || o.Spilled != 0 {
		t.Fatalf("after 30 s unread: cold %v spilled %d; want cold, home", o.Cold, o.Spilled)
	}
	if o = tab.OwnersAt("other", at); !o.Cold {
		t.Fatal("another key is cold on its first read")
	}
}
