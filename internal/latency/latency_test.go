package latency

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var testQuantiles = []float64{0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1}

// exactQuantile is the nearest-rank quantile of sorted: the value of rank
// ceil(q*n), 1-based, with q<=0 giving the minimum and q>=1 the maximum.
func exactQuantile(sorted []int64, q float64) int64 {
	n := len(sorted)
	rank := int(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// checkQuantiles records vals into a Histogram and checks every quantile in
// qs against the exact nearest-rank answer.
func checkQuantiles(t *testing.T, vals []int64, qs []float64) {
	t.Helper()
	var h Histogram
	for _, v := range vals {
		h.Record(time.Duration(v))
	}
	s := h.Snapshot()
	sorted := slices.Clone(vals)
	for i, v := range sorted {
		sorted[i] = max(v, 0)
	}
	slices.Sort(sorted)
	for _, q := range qs {
		want := exactQuantile(sorted, q)
		got := int64(s.Quantile(q))
		if !withinBound(got, want) {
			t.Errorf("n=%d Quantile(%v) = %d, exact %d: error %.4f%% > %.4f%%",
				len(vals), q, got, want, 100*relErr(got, want), 100*RelativeError)
		}
	}
}

// withinBound reports whether got is within RelativeError of want, with 1ns
// of slack for tiny values. Above MaxBounded only the overflow contract
// holds: the answer is the maximum, which is at least as large as want.
func withinBound(got, want int64) bool {
	if want > int64(MaxBounded) {
		return got >= want
	}
	return math.Abs(float64(got-want)) <= RelativeError*float64(want)+1
}

func relErr(got, want int64) float64 {
	if want == 0 {
		return math.Abs(float64(got))
	}
	return math.Abs(float64(got-want)) / float64(want)
}

func TestQuantileLognormal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]int64, 100_000)
	for i := range vals {
		// median ~2ms with a heavy tail: the shape of real request latency
		vals[i] = int64(math.Exp(math.Log(2e6) + 1.2*r.NormFloat64()))
	}
	checkQuantiles(t, vals, testQuantiles)
}

func TestQuantileUniform(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	vals := make([]int64, 50_000)
	for i := range vals {
		vals[i] = r.Int64N(int64(time.Second))
	}
	checkQuantiles(t, vals, testQuantiles)
}

func TestQuantileAdversarial(t *testing.T) {
	var boundaries, powers []int64
	for i := 0; i < numBounded; i += 7 {
		lo, hi := bucketBounds(i)
		boundaries = append(boundaries, lo, hi-1, hi)
	}
	for k := 0; k < 63; k++ {
		p := int64(1) << k
		powers = append(powers, p-1, p, p+1)
	}
	repeat := func(v int64, n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	under32 := make([]int64, 0, 32*5)
	for v := range int64(32) {
		under32 = append(under32, repeat(v, 5)...)
	}
	cases := map[string][]int64{
		"identical":          repeat(int64(3*time.Millisecond+7), 1000),
		"identical tiny":     repeat(5, 10),
		"bucket boundaries":  boundaries,
		"powers of two ±1":   powers[:3*41], // up to 2^40+1; 2^40 and 2^40+1 overflow
		"two clusters":       append(repeat(int64(time.Microsecond), 500), repeat(int64(time.Minute), 500)...),
		"lopsided clusters":  append(repeat(int64(time.Microsecond), 9990), repeat(int64(time.Minute), 10)...),
		"single sample":      {int64(123456789)},
		"below 32ns":         under32,
		"zeros and negative": {0, -5, -int64(time.Second), 0, 1},
		"above the clamp":    {int64(MaxBounded) + 1, 1 << 45, 1 << 50, math.MaxInt64},
		"mixed with clamp":   append(repeat(int64(time.Millisecond), 2000), int64(time.Hour), 1<<50),
		"identical clamp":    repeat(int64(time.Hour), 100),
		"all powers":         powers,
		"single huge sample": {math.MaxInt64},
	}
	for name, vals := range cases {
		t.Run(name, func(t *testing.T) {
			checkQuantiles(t, vals, testQuantiles)
		})
	}
}

// Quantiles of samples that are exact (below 64ns, or all identical) must be
// exact, not just within the bound.
func TestQuantileExactWhereRepresentable(t *testing.T) {
	var h Histogram
	for v := range 64 {
		h.Record(time.Duration(v))
	}
	s := h.Snapshot()
	for rank := 1; rank <= 64; rank++ {
		q := float64(rank) / 64
		if got := s.Quantile(q); got != time.Duration(rank-1) {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, rank-1)
		}
	}
	var one Histogram
	for range 10 {
		one.Record(time.Hour + 3) // in the overflow bucket, yet exact via Min/Max
	}
	if got := one.Snapshot().Quantile(0.5); got != time.Hour+3 {
		t.Errorf("identical overflow samples: Quantile(0.5) = %v, want %v", got, time.Hour+3)
	}
}

func TestQuantileEdgeArguments(t *testing.T) {
	var empty Snapshot
	for _, q := range []float64{-1, 0, 0.5, 1, 2, math.NaN()} {
		if got := empty.Quantile(q); got != 0 {
			t.Errorf("empty Quantile(%v) = %v, want 0", q, got)
		}
	}
	var h Histogram
	h.Record(time.Millisecond)
	h.Record(time.Second)
	s := h.Snapshot()
	for q, want := range map[float64]time.Duration{
		-1: time.Millisecond, math.NaN(): time.Millisecond, math.Inf(-1): time.Millisecond,
		1: time.Second, 7: time.Second, math.Inf(1): time.Second,
		math.SmallestNonzeroFloat64: time.Millisecond,
	} {
		if got := s.Quantile(q); got != want {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
		}
	}
}

func TestBucketIndexBounds(t *testing.T) {
	check := func(v int64) {
		t.Helper()
		i := bucketIndex(v)
		lo, hi := bucketBounds(i)
		if v < lo || (v >= hi && hi != math.MaxInt64) {
			t.Fatalf("value %d in bucket %d = [%d, %d)", v, i, lo, hi)
		}
		if i < overflowIndex {
			if mid := bucketValue(i); math.Abs(float64(mid-v)) > RelativeError*float64(v) {
				t.Fatalf("value %d: bucket midpoint %d exceeds the bound", v, mid)
			}
		}
	}
	// Every value below 2^16, then powers of two and their neighbours, then
	// random values across the whole range.
	prev := -1
	for v := range int64(1 << 16) {
		check(v)
		i := bucketIndex(v)
		if i < prev || i > prev+1 {
			t.Fatalf("index not monotonic and dense at %d: %d after %d", v, i, prev)
		}
		prev = i
	}
	for k := range 63 {
		p := int64(1) << k
		for _, v := range []int64{p - 1, p, p + 1} {
			check(v)
		}
	}
	check(math.MaxInt64)
	r := rand.New(rand.NewPCG(5, 6))
	vals := make([]int64, 20_000)
	for i := range vals {
		vals[i] = r.Int64() >> r.IntN(63) // spread over all magnitudes
		check(vals[i])
	}
	slices.Sort(vals)
	for i := 1; i < len(vals); i++ {
		if bucketIndex(vals[i]) < bucketIndex(vals[i-1]) {
			t.Fatalf("index not monotonic: %d -> %d, %d -> %d",
				vals[i-1], bucketIndex(vals[i-1]), vals[i], bucketIndex(vals[i]))
		}
	}
}

func TestBucketLayout(t *testing.T) {
	// Adjacent buckets tile [0, MaxBounded] without gaps or overlap.
	var next int64
	for i := range numBounded {
		lo, hi := bucketBounds(i)
		if lo != next || hi <= lo {
			t.Fatalf("bucket %d = [%d, %d), want lower %d", i, lo, hi, next)
		}
		if bucketIndex(lo) != i || bucketIndex(hi-1) != i {
			t.Fatalf("bucket %d = [%d, %d) does not map back to itself", i, lo, hi)
		}
		next = hi
	}
	if next != int64(MaxBounded)+1 {
		t.Fatalf("bounded buckets end at %d, want %d", next, int64(MaxBounded)+1)
	}
	if got := bucketIndex(int64(MaxBounded) + 1); got != overflowIndex {
		t.Fatalf("bucketIndex(MaxBounded+1) = %d, want overflow %d", got, overflowIndex)
	}
	if RelativeError != 1.0/(2*subCount) || MaxBounded != 1<<boundedBits-1 {
		t.Fatalf("exported constants out of step with the layout")
	}
	// Coverage required by the design: 1µs to at least 1 minute, bounded.
	if MaxBounded < time.Minute {
		t.Fatalf("MaxBounded = %v, want >= 1m", MaxBounded)
	}
}

func TestSnapshotStats(t *testing.T) {
	var h Histogram
	s := h.Snapshot()
	if s.Count() != 0 || s.Sum() != 0 || s.Min() != 0 || s.Max() != 0 || s.Mean() != 0 {
		t.Fatalf("empty snapshot = %+v", *s)
	}
	vals := []time.Duration{3 * time.Millisecond, time.Microsecond, -time.Second, 2 * time.Hour, 17}
	for _, v := range vals {
		h.Record(v)
	}
	s = h.Snapshot()
	wantSum := 3*time.Millisecond + time.Microsecond + 2*time.Hour + 17
	if s.Count() != 5 {
		t.Errorf("Count = %d, want 5", s.Count())
	}
	if s.Sum() != wantSum {
		t.Errorf("Sum = %v, want %v", s.Sum(), wantSum)
	}
	if s.Min() != 0 {
		t.Errorf("Min = %v, want 0 (negative recorded as 0)", s.Min())
	}
	if s.Max() != 2*time.Hour {
		t.Errorf("Max = %v, want 2h", s.Max())
	}
	if s.Mean() != wantSum/5 {
		t.Errorf("Mean = %v, want %v", s.Mean(), wantSum/5)
	}
}

func TestMergeEqualsUnion(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var a, b, union Histogram
	for i := range 10_000 {
		v := time.Duration(r.Int64N(int64(time.Second)))
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v * 7)
			v *= 7
		}
		union.Record(v)
	}
	got := a.Snapshot()
	got.Merge(b.Snapshot())
	got.Merge(nil)
	got.Merge(new(Snapshot))
	if want := union.Snapshot(); *got != *want {
		t.Fatalf("merge differs from union: count %d/%d sum %v/%v min %v/%v max %v/%v",
			got.Count(), want.Count(), got.Sum(), want.Sum(), got.Min(), want.Min(), got.Max(), want.Max())
	}
	// Merging into an empty snapshot copies; merging a snapshot with itself doubles.
	var empty Snapshot
	empty.Merge(got)
	if empty != *got {
		t.Fatal("merge into empty snapshot is not a copy")
	}
	n := got.Count()
	got.Merge(got)
	if got.Count() != 2*n || got.Min() != empty.Min() || got.Max() != empty.Max() {
		t.Fatalf("self-merge: count %d, want %d", got.Count(), 2*n)
	}
}

func TestReset(t *testing.T) {
	var h Histogram
	for i := range 100 {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	h.Reset()
	if s := h.Snapshot(); *s != (Snapshot{}) {
		t.Fatalf("after Reset: count %d sum %v min %v max %v", s.Count(), s.Sum(), s.Min(), s.Max())
	}
	h.Record(5 * time.Second)
	if s := h.Snapshot(); s.Count() != 1 || s.Min() != 5*time.Second || s.Max() != 5*time.Second {
		t.Fatalf("after Reset and Record: count %d min %v max %v", s.Count(), s.Min(), s.Max())
	}
}

func TestBuckets(t *testing.T) {
	var h Histogram
	vals := []time.Duration{5, 5, 100, time.Millisecond, time.Millisecond + 1, time.Hour, 2 * time.Hour}
	for _, v := range vals {
		h.Record(v)
	}
	s := h.Snapshot()
	var total uint64
	prevUpper := time.Duration(-1)
	s.Buckets(func(lower, upper time.Duration, count uint64) {
		if count == 0 || lower >= upper || lower < prevUpper {
			t.Errorf("bad bucket [%v, %v) count %d after upper %v", lower, upper, count, prevUpper)
		}
		n := 0
		for _, v := range vals {
			if lower <= v && v < upper {
				n++
			}
		}
		if uint64(n) != count {
			t.Errorf("bucket [%v, %v) count %d, want %d", lower, upper, count, n)
		}
		total += count
		prevUpper = upper
	})
	if total != s.Count() {
		t.Errorf("buckets sum to %d, want %d", total, s.Count())
	}
	if prevUpper != 2*time.Hour+1 {
		t.Errorf("last bucket ends at %v, want Max+1", prevUpper)
	}
	var huge Histogram
	huge.Record(math.MaxInt64)
	huge.Snapshot().Buckets(func(lower, upper time.Duration, count uint64) {
		if upper != math.MaxInt64 || lower != MaxBounded+1 || count != 1 {
			t.Errorf("overflow bucket [%v, %v) count %d", lower, upper, count)
		}
	})
}

func TestConcurrentRecord(t *testing.T) {
	const goroutines, perG = 8, 5000
	var h Histogram
	w := NewWindow(time.Minute, 6)
	now := time.Unix(1_700_000_000, 0)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() { // readers racing the writers must not trip -race
		for {
			select {
			case <-stop:
				return
			default:
				_ = h.Snapshot().Quantile(0.99)
				_ = w.SnapshotAt(now).Quantile(0.99)
			}
		}
	})
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for range perG {
				d := time.Duration(r.Int64N(int64(time.Second)))
				h.Record(d)
				w.RecordAt(now, d)
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	const want = goroutines * perG
	if got := h.Snapshot().Count(); got != want {
		t.Errorf("Histogram count = %d, want %d", got, want)
	}
	if got := w.SnapshotAt(now).Count(); got != want {
		t.Errorf("Window count = %d, want %d", got, want)
	}
	if got := w.Cumulative().Count(); got != want {
		t.Errorf("Window cumulative count = %d, want %d", got, want)
	}
}

// Concurrent recorders moving through many epochs exercise rotation under
// -race. Samples may be dropped from the window, never from Cumulative.
func TestConcurrentRotation(t *testing.T) {
	const goroutines, perG = 4, 3000
	w := NewWindow(time.Second, 10)
	base := time.Unix(1_700_000_000, 0)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				now := base.Add(time.Duration(i+g) * time.Millisecond)
				w.RecordAt(now, time.Duration(i)*time.Microsecond)
				if i%500 == 0 {
					_ = w.SnapshotAt(now)
				}
			}
		})
	}
	wg.Wait()
	if got := w.Cumulative().Count(); got != goroutines*perG {
		t.Errorf("cumulative count = %d, want %d", got, goroutines*perG)
	}
	end := base.Add((perG + goroutines) * time.Millisecond)
	if got := w.SnapshotAt(end).Count(); got == 0 || got > goroutines*1000 {
		t.Errorf("window count = %d, want the last second's worth (<= %d)", got, goroutines*1000)
	}
}
