package partition

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// zipfStream returns n reads of keys drawn from a Zipf distribution of
// exponent s over distinct keys, and each key's exact count.
func zipfStream(n, distinct int, s float64, seed uint64) ([]string, map[string]int) {
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, seed+1)), s, 1, uint64(distinct-1))
	keys := make([]string, distinct)
	for i := range keys {
		keys[i] = fmt.Sprintf("item-%d", i)
	}
	stream := make([]string, n)
	counts := map[string]int{}
	for i := range stream {
		stream[i] = keys[z.Uint64()]
		counts[stream[i]]++
	}
	return stream, counts
}

func trueTop(counts map[string]int, n int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	return keys[:n]
}

func TestSketchFindsTrueTopKeysOfZipfStream(t *testing.T) {
	for _, s := range []float64{1.1, 1.5} {
		stream, counts := zipfStream(200_000, 100_000, s, 7)
		sk := newSketch(DefaultSketchSize, float64(DefaultWindow))
		now := t0.UnixNano() // one instant: no decay, so counts compare exactly
		for _, k := range stream {
			sk.record(hashString(k), k, now)
		}
		held, total := sk.decayTo(now)
		if len(held) > DefaultSketchSize {
			t.Fatalf("sketch holds %d keys, bound %d", len(held), DefaultSketchSize)
		}
		if total != float64(len(stream)) {
			t.Errorf("total %v, want %d", total, len(stream))
		}
		const top = DefaultHotKeys
		var got []string
		for _, c := range held[:top] {
			got = append(got, c.key)
			// Space-Saving's guarantee: the true count lies in [count-err, count].
			if n := float64(counts[c.key]); n > c.count || n < c.count-c.err {
				t.Errorf("s=%v: %s counted %v (err %v), true %v", s, c.key, c.count, c.err, n)
			}
		}
		want := trueTop(counts, top)
		if !slices.Equal(got, want) {
			t.Errorf("s=%v: sketch's top %d\n%v\nwant\n%v", s, top, got, want)
		}
		t.Logf("s=%v: %d distinct keys read, top %d found exactly with %d counters", s, len(counts), top, DefaultSketchSize)
	}
}

func TestSketchDecaysOldReads(t *testing.T) {
	sk := newSketch(64, float64(time.Second))
	for range 100 {
		sk.record(hashString("old"), "old", t0.UnixNano())
	}
	later := t0.Add(3 * time.Second)
	for range 10 {
		sk.record(hashString("new"), "new", later.UnixNano())
	}
	held, total := sk.decayTo(later.UnixNano())
	// 100 reads three time constants ago weigh 100/e³ ≈ 4.98.
	byKey := map[string]float64{}
	for _, c := range held {
		byKey[c.key] = c.count
	}
	if got := byKey["old"]; got < 4.9 || got > 5.1 {
		t.Errorf("old count %v, want ≈ 4.98", got)
	}
	if got := byKey["new"]; got < 9.99 || got > 10.01 {
		t.Errorf("new count %v, want 10", got)
	}
	if total < 14.9 || total > 15.1 {
		t.Errorf("total %v, want ≈ 14.98", total)
	}
}

func TestSketchEvictionKeepsTableConsistent(t *testing.T) {
	// A small sketch under a stream of many keys evicts constantly; every
	// held key must still be found by its hash (backward-shift deletion).
	sk := newSketch(16, float64(time.Second))
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 50_000 {
		k := fmt.Sprintf("k%d", rng.IntN(500))
		sk.record(hashString(k), k, t0.UnixNano()+int64(i))
	}
	for i := range sk.shards {
		sh := &sk.shards[i]
		for j := 0; j < sh.n; j++ {
			if got := sh.find(sh.hashes[j]); got != int32(j) {
				t.Fatalf("shard %d: counter %d (%s) found at %d", i, j, sh.keys[j], got)
			}
			if sh.heap[sh.pos[j]].i != int32(j) {
				t.Fatalf("shard %d: heap position of %d wrong", i, j)
			}
		}
		for j := 1; j < len(sh.heap); j++ {
			if sh.less(j, (j-1)/2) {
				t.Fatalf("shard %d: heap order broken at %d", i, j)
			}
		}
		used := 0
		for _, e := range sh.table {
			if e != 0 {
				used++
			}
		}
		if used != sh.n {
			t.Fatalf("shard %d: %d table entries for %d counters", i, used, sh.n)
		}
	}
}
