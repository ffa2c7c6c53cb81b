package sim

import (
	"testing"
	"time"
)

// benchRun runs one whole simulation per op: ns/op is the wall time of a
// run, the figure that must stay in seconds.
func benchRun(b *testing.B, p Policy, o Options) {
	b.ReportAllocs()
	lat := lognormal(time.Millisecond, 1)
	for b.Loop() {
		if _, err := Run(p, lat, o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(o.Requests)*float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}

// Fan-out 2,000 × 10^4 requests (MethodAuto picks order statistics).
func BenchmarkFanout2000(b *testing.B) {
	benchRun(b, Policy{Fanout: 2000, Need: 1900, HedgeAfter: 3 * time.Millisecond}, Options{Requests: 10_000, Seed: 1})
}

// The same by drawing all 2·10^7 shards (and their hedges).
func BenchmarkFanout2000Exact(b *testing.B) {
	benchRun(b, Policy{Fanout: 2000, Need: 1900, HedgeAfter: 3 * time.Millisecond}, Options{Requests: 10_000, Seed: 1, Method: MethodExact})
}

// With a budget, which needs the exact method and its extra pass.
func BenchmarkFanout2000Budget(b *testing.B) {
	benchRun(b, Policy{Fanout: 2000, HedgeAfter: 3 * time.Millisecond, BudgetFraction: 0.05}, Options{Requests: 10_000, Seed: 1})
}

// Fan-out 60 × 10^6 requests (order statistics).
func BenchmarkFanout60Million(b *testing.B) {
	benchRun(b, Policy{Fanout: 60, HedgeAfter: 3 * time.Millisecond}, Options{Requests: 1_000_000, Seed: 1})
}

// The same by drawing all 6·10^7 shards (and their hedges).
func BenchmarkFanout60MillionExact(b *testing.B) {
	benchRun(b, Policy{Fanout: 60, HedgeAfter: 3 * time.Millisecond}, Options{Requests: 1_000_000, Seed: 1, Method: MethodExact})
}

// Fan-out 2,000 × 10^6 requests: only order statistics can do this in
// seconds (the exact method would draw 2·10^9 shards).
func BenchmarkFanout2000Million(b *testing.B) {
	benchRun(b, Policy{Fanout: 2000}, Options{Requests: 1_000_000, Seed: 1})
}

// Table 1 at the paper's fan-out of 2,000 with 10^5 requests per row.
func BenchmarkTable1Fanout2000(b *testing.B) {
	b.ReportAllocs()
	lat := lognormal(time.Millisecond, 1)
	for b.Loop() {
		if _, err := Table1(2000, lat, Options{Requests: 100_000, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
