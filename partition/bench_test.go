package partition

import (
	"fmt"
	"testing"
	"time"
)

// benchKeys are typical read paths, a thousand of them.
func benchKeys() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("/items/%d", i*7919)
	}
	return keys
}

// warmTable is an 8-replica Table with defaults that has seen a skewed
// stream, so that the hot set is not empty.
func warmTable(b *testing.B) *Table {
	tab := mustNew(b, names(8), Config{})
	now := t0
	for range 5 {
		now = now.Add(time.Second)
		feed(tab, now, 2000, map[string]int{"/items/0": 500})
	}
	if len(tab.Snapshot().HotKeys) == 0 {
		b.Fatal("no hot key")
	}
	return tab
}

func BenchmarkOwnersAt(b *testing.B) {
	tab, keys := warmTable(b), benchKeys()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tab.OwnersAt(keys[i&1023], t0.Add(5*time.Second))
		i++
	}
}

// BenchmarkRecordAt: "zipf" is a realistic stream (exponent 1.1 over 10k
// keys: the sketch mostly finds the key held), "evicting" the worst case
// (1024 keys in turn over 256 counters: every read evicts the least
// counted). The clock advances 1 ms every 1024 reads, as at a million
// reads a second.
func BenchmarkRecordAt(b *testing.B) {
	zipf, _ := zipfStream(1<<16, 10_000, 1.1, 11)
	for _, c := range []struct {
		name string
		keys []string
	}{{"zipf", zipf}, {"evicting", benchKeys()}} {
		b.Run(c.name, func(b *testing.B) {
			tab := warmTable(b)
			replica := names(8)[3]
			now := t0.Add(5 * time.Second)
			mask := len(c.keys) - 1
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i&1023 == 0 {
					now = now.Add(time.Millisecond)
				}
				tab.RecordAt(c.keys[i&mask], replica, now)
				i++
			}
		})
	}
}

// The request path under parallel load: what contention on the partition
// counters and the sketch's shard locks costs.
func BenchmarkRecordAtParallel(b *testing.B) {
	tab, keys := warmTable(b), benchKeys()
	replica := names(8)[3]
	now := t0.Add(5 * time.Second)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			tab.RecordAt(keys[i&1023], replica, now)
			i++
		}
	})
}

func BenchmarkRebalanceAt(b *testing.B) {
	for _, n := range []int{8, 1000} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			tab := mustNew(b, names(n), Config{})
			keys := benchKeys()
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Second)
				for _, k := range keys {
					tab.RecordAt(k, "", now)
				}
				tab.RebalanceAt(now)
			}
		})
	}
}
