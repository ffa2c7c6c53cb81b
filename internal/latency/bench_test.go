package latency

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// benchValues is a ring of lognormal latencies, so benchmarks touch a
// realistic spread of buckets rather than one hot counter.
var benchValues = func() []time.Duration {
	r := rand.New(rand.NewPCG(11, 12))
	vals := make([]time.Duration, 1024)
	for i := range vals {
		vals[i] = time.Duration(math.Exp(math.Log(2e6) + r.NormFloat64()))
	}
	return vals
}()

const benchMask = 1023

// goroutineSeed spreads RunParallel goroutines over different offsets.
var goroutineSeed atomic.Uint64

func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Record(benchValues[i&benchMask])
	}
}

func BenchmarkHistogramRecordParallel(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(goroutineSeed.Add(257))
		for ; pb.Next(); i++ {
			h.Record(benchValues[i&benchMask])
		}
	})
}

// BenchmarkHistogramRecordSharded is one goroutine recording into a
// Histogram that has switched to sharded recording: the price of the per-P
// shard token without any contention to win back.
func BenchmarkHistogramRecordSharded(b *testing.B) {
	var h Histogram
	h.sharded.Store(true)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Record(benchValues[i&benchMask])
	}
}

func BenchmarkWindowRecord(b *testing.B) {
	w := NewWindow(10*time.Second, 10)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.Record(benchValues[i&benchMask])
	}
}

func BenchmarkWindowRecordParallel(b *testing.B) {
	w := NewWindow(10*time.Second, 10)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(goroutineSeed.Add(257))
		for ; pb.Next(); i++ {
			w.Record(benchValues[i&benchMask])
		}
	})
}

// BenchmarkWindowRecordAt is the window's record path without the clock read,
// for callers that already hold the completion time.
func BenchmarkWindowRecordAt(b *testing.B) {
	w := NewWindow(10*time.Second, 10)
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.RecordAt(now, benchValues[i&benchMask])
	}
}

func BenchmarkWindowRecordAtParallel(b *testing.B) {
	w := NewWindow(10*time.Second, 10)
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(goroutineSeed.Add(257))
		for ; pb.Next(); i++ {
			w.RecordAt(now, benchValues[i&benchMask])
		}
	})
}

func BenchmarkWindowSnapshot(b *testing.B) {
	w := NewWindow(10*time.Second, 10)
	now := time.Now()
	for i := range 100_000 { // fill every slot
		w.RecordAt(now.Add(-time.Duration(i)*100*time.Microsecond), benchValues[i&benchMask])
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = w.SnapshotAt(now)
	}
}

// BenchmarkWindowCumulative reads a window whose slots are all sharded and
// full: the longest Cumulative holds the rotation mutex.
func BenchmarkWindowCumulative(b *testing.B) {
	w := NewWindow(10*time.Second, 10)
	for i := range w.slots {
		w.slots[i].h.sharded.Store(true)
	}
	now := time.Now()
	for i := range 100_000 {
		w.RecordAt(now.Add(-time.Duration(i)*100*time.Microsecond), benchValues[i&benchMask])
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = w.Cumulative()
	}
}

func BenchmarkQuantile(b *testing.B) {
	var h Histogram
	for _, v := range benchValues {
		h.Record(v)
	}
	s := h.Snapshot()
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Quantile(0.99)
	}
}
