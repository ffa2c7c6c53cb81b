package latency

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// TestLayout checks the padding the sharding relies on and logs the memory
// a Histogram and a Window take.
func TestLayout(t *testing.T) {
	var h Histogram
	// The read-mostly header (min, max, the sharded flag) must not share a
	// 64-byte line with shard 0's counters, whatever the alignment.
	if gap := unsafe.Offsetof(h.shards) - (unsafe.Offsetof(h.sharded) + unsafe.Sizeof(h.sharded)); gap < 64 {
		t.Errorf("header and shard 0 only %d bytes apart", gap)
	}
	// Nor may one shard's counters or sum share a line with the next shard's.
	var s shard
	if pad := unsafe.Sizeof(s) - (unsafe.Offsetof(s.sum) + unsafe.Sizeof(s.sum)); pad < 64 {
		t.Errorf("shards only %d bytes apart", pad)
	}
	w := NewWindow(10*time.Second, 10)
	slot := unsafe.Sizeof(w.slots[0])
	t.Logf("Histogram %d bytes (%d shards of %d); Window struct %d bytes + %d per slot",
		unsafe.Sizeof(h), numShards, unsafe.Sizeof(s), unsafe.Sizeof(*w), slot)
	for _, n := range []int{defaultSlots, MaxSlots} {
		t.Logf("Window with %d slots: %d KiB", n, (int(unsafe.Sizeof(*w))+n*int(slot))/1024)
	}
}

// hammer records perG samples from each of goroutines goroutines into
// record, and returns them all, sorted.
func hammer(goroutines, perG int, record func(g int, d time.Duration)) []int64 {
	all := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 77))
			vals := make([]int64, perG)
			for i := range vals {
				// lognormal around 2ms, a few negative and a few huge
				v := int64(2e6 * r.ExpFloat64() * r.ExpFloat64())
				switch i % 997 {
				case 0:
					v = -int64(g)
				case 1:
					v = int64(time.Hour) + int64(g)
				}
				vals[i] = v
				record(g, time.Duration(v))
			}
			all[g] = vals
		})
	}
	wg.Wait()
	out := slices.Concat(all...)
	for i, v := range out {
		out[i] = max(v, 0)
	}
	slices.Sort(out)
	return out
}

// checkExact checks that s holds exactly the samples in sorted: count, sum,
// min and max exact, quantiles within the bound.
func checkExact(t *testing.T, s *Snapshot, sorted []int64) {
	t.Helper()
	var sum int64
	for _, v := range sorted {
		sum += v
	}
	if s.Count() != uint64(len(sorted)) || int64(s.Sum()) != sum ||
		int64(s.Min()) != sorted[0] || int64(s.Max()) != sorted[len(sorted)-1] {
		t.Fatalf("count/sum/min/max = %d/%d/%d/%d, want %d/%d/%d/%d",
			s.Count(), s.Sum(), s.Min(), s.Max(), len(sorted), sum, sorted[0], sorted[len(sorted)-1])
	}
	for _, q := range testQuantiles {
		want := exactQuantile(sorted, q)
		if got := int64(s.Quantile(q)); !withinBound(got, want) {
			t.Errorf("Quantile(%v) = %d, exact %d", q, got, want)
		}
	}
}

// checkConsistent checks what a snapshot torn by concurrent recording must
// still satisfy: Count never goes back, and every counted sample (all
// non-negative here) is reflected in Min, Max and Sum.
func checkConsistent(t *testing.T, s *Snapshot, prevCount uint64) {
	t.Helper()
	if s.Count() < prevCount {
		t.Errorf("count went back from %d to %d", prevCount, s.Count())
	}
	if s.Count() == 0 {
		return
	}
	first := true
	var lastLower time.Duration
	s.Buckets(func(lower, upper time.Duration, _ uint64) {
		if first && s.Min() >= upper {
			t.Errorf("min %v above the lowest counted bucket [%v, %v)", s.Min(), lower, upper)
		}
		first = false
		lastLower = lower
	})
	if s.Max() < lastLower {
		t.Errorf("max %v below the highest counted bucket from %v", s.Max(), lastLower)
	}
	if s.Sum() < time.Duration(s.Count())*s.Min() {
		t.Errorf("sum %v below count %d times min %v", s.Sum(), s.Count(), s.Min())
	}
}

// Several goroutines hammering one Histogram, sharded from the start or left
// to switch by itself, while a reader takes snapshots: afterwards every
// sample is there exactly once.
func TestConcurrentRecordSharded(t *testing.T) {
	for _, sharded := range []bool{true, false} {
		name := "switching"
		if sharded {
			name = "sharded"
		}
		t.Run(name, func(t *testing.T) {
			var h Histogram
			h.sharded.Store(sharded)
			stop := make(chan struct{})
			var reader sync.WaitGroup
			reader.Go(func() {
				var prev uint64
				for {
					select {
					case <-stop:
						return
					default:
						s := h.Snapshot()
						checkConsistent(t, s, prev)
						prev = s.Count()
					}
				}
			})
			sorted := hammer(8, 20_000, func(_ int, d time.Duration) { h.Record(d) })
			close(stop)
			reader.Wait()
			checkExact(t, h.Snapshot(), sorted)
			var per [numShards]uint64
			for k := range h.shards {
				for i := range h.shards[k].counts {
					per[k] += h.shards[k].counts[i].Load()
				}
			}
			t.Logf("GOMAXPROCS %d, sharded %v, samples per shard %v",
				runtime.GOMAXPROCS(0), h.sharded.Load(), per)
		})
	}
}

// Two goroutines recording flat out into one Histogram collide sooner or
// later, and the Histogram then switches to sharded recording. The switch
// needs two goroutines truly running at once, so it is not guaranteed.
func TestHistogramSwitchesToSharded(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two Ps")
	}
	var h Histogram
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for i := 0; i < 2_000_000 && !h.sharded.Load(); i++ {
				h.Record(time.Duration(i + g))
			}
		})
	}
	wg.Wait()
	if !h.sharded.Load() {
		t.Skip("no collision observed")
	}
	// Once sharded, a Histogram stays sharded, also across Reset.
	h.Reset()
	h.Record(time.Millisecond)
	if s := h.Snapshot(); !h.sharded.Load() || s.Count() != 1 || s.Sum() != time.Millisecond {
		t.Fatalf("after Reset: sharded %v count %d sum %v", h.sharded.Load(), s.Count(), s.Sum())
	}
}

// A Window hammered from several goroutines, its slots sharded, through many
// rotations: Cumulative holds every sample exactly, and the window the most
// recent ones.
func TestConcurrentWindowSharded(t *testing.T) {
	w := NewWindow(time.Second, 10)
	for i := range w.slots {
		w.slots[i].h.sharded.Store(true)
	}
	base := time.Unix(1_700_000_000, 0)
	const goroutines, perG = 4, 20_000
	sorted := hammer(goroutines, perG, func(g int, d time.Duration) {
		// Samples are stamped pseudo-randomly over 2s of synthetic time, so
		// slots rotate under recorders and many samples come too late for
		// the window and go straight to the accumulator.
		now := base.Add(time.Duration(int(d)%perG) * 100 * time.Microsecond)
		w.RecordAt(now, d)
		if int(d)%1000 == 0 {
			_ = w.SnapshotAt(now)
			_ = w.Cumulative()
		}
	})
	checkExact(t, w.Cumulative(), sorted)
	end := base.Add(2 * time.Second)
	if s := w.SnapshotAt(end); s.Count() > uint64(len(sorted)) {
		t.Fatalf("window count %d > %d recorded", s.Count(), len(sorted))
	}
}
