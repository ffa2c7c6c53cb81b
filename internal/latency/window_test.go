package latency

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// t0 is a synthetic clock origin on an epoch boundary for every slot width
// used below (whole seconds).
var t0 = time.Unix(1_700_000_000, 0)

func TestNewWindowDefaults(t *testing.T) {
	for _, tc := range []struct {
		span      time.Duration
		slots     int
		wantSpan  time.Duration
		wantSlots int
	}{
		{0, 0, 10 * time.Second, 10},
		{-time.Second, -1, 10 * time.Second, 10},
		{time.Minute, 6, time.Minute, 6},
		{time.Minute, 1000, time.Minute, MaxSlots},
		{10 * time.Second, 3, 9999999999, 3}, // rounded down to whole slots
		{5, 10, 10, 10},                      // at least 1ns per slot
	} {
		w := NewWindow(tc.span, tc.slots)
		if w.Span() != tc.wantSpan || len(w.slots) != tc.wantSlots {
			t.Errorf("NewWindow(%v, %d): span %v slots %d, want %v and %d",
				tc.span, tc.slots, w.Span(), len(w.slots), tc.wantSpan, tc.wantSlots)
		}
	}
}

func TestWindowAgesOut(t *testing.T) {
	w := NewWindow(10*time.Second, 10) // 1s slots
	w.RecordAt(t0, 5*time.Millisecond)
	w.RecordAt(t0.Add(500*time.Millisecond), 7*time.Millisecond)

	for _, tc := range []struct {
		at   time.Duration
		want uint64
	}{
		{0, 2}, // slot granularity: now's whole epoch counts
		{999 * time.Millisecond, 2},
		{9*time.Second + 999*time.Millisecond, 2}, // the slot is the oldest still covered
		{10 * time.Second, 0},                     // a full span later: aged out
		{time.Hour, 0},
		{-time.Second, 0}, // a snapshot before the samples sees none of them
	} {
		if got := w.SnapshotAt(t0.Add(tc.at)).Count(); got != tc.want {
			t.Errorf("SnapshotAt(t0+%v).Count() = %d, want %d", tc.at, got, tc.want)
		}
	}
	if got := w.Cumulative().Count(); got != 2 {
		t.Errorf("Cumulative().Count() = %d, want 2", got)
	}
}

func TestWindowRotationClearsStaleSlot(t *testing.T) {
	w := NewWindow(4*time.Second, 4)
	w.RecordAt(t0, time.Second) // slot of epoch e
	w.RecordAt(t0.Add(time.Second), 2*time.Millisecond)
	// Epoch e+4 reuses the slot of epoch e: its old sample must be gone.
	now := t0.Add(4 * time.Second)
	w.RecordAt(now, 3*time.Millisecond)
	s := w.SnapshotAt(now)
	if s.Count() != 2 || s.Max() != 3*time.Millisecond || s.Min() != 2*time.Millisecond {
		t.Fatalf("after rotation: count %d min %v max %v, want 2, 2ms, 3ms", s.Count(), s.Min(), s.Max())
	}
	if c := w.Cumulative(); c.Count() != 3 || c.Max() != time.Second {
		t.Fatalf("cumulative: count %d max %v, want 3 and 1s", c.Count(), c.Max())
	}
}

func TestWindowDropsOldSamples(t *testing.T) {
	w := NewWindow(4*time.Second, 4)
	now := t0.Add(10 * time.Second)
	w.RecordAt(now, time.Millisecond)

	// Same slot as now, one span earlier: the slot has moved on.
	w.RecordAt(now.Add(-4*time.Second), time.Hour)
	// A slot never used, but a full span before the newest epoch.
	w.RecordAt(now.Add(-5*time.Second), time.Hour)
	if s := w.SnapshotAt(now); s.Count() != 1 || s.Max() != time.Millisecond {
		t.Fatalf("old samples leaked into the window: count %d max %v", s.Count(), s.Max())
	}
	// A late sample still inside the span is kept.
	w.RecordAt(now.Add(-3*time.Second), 2*time.Millisecond)
	if s := w.SnapshotAt(now); s.Count() != 2 {
		t.Fatalf("in-span late sample dropped: count %d, want 2", s.Count())
	}
	if c := w.Cumulative(); c.Count() != 4 || c.Max() != time.Hour {
		t.Fatalf("cumulative must keep dropped samples: count %d max %v", c.Count(), c.Max())
	}
}

func TestWindowRegimeChange(t *testing.T) {
	w := NewWindow(10*time.Second, 10)
	// 30s of fast responses, then 10s of slow ones, 100 per second.
	for ms := 0; ms < 40_000; ms += 10 {
		if ms == 35_000 {
			// Halfway through the slow phase the window holds both regimes.
			s := w.SnapshotAt(t0.Add(35*time.Second - time.Nanosecond))
			if s.Count() != 1000 || !near(s.Quantile(0.5), 2*time.Millisecond) || !near(s.Quantile(0.51), 200*time.Millisecond) {
				t.Errorf("mixed window: count %d p50 %v p51 %v, want 1000, 2ms, 200ms",
					s.Count(), s.Quantile(0.5), s.Quantile(0.51))
			}
		}
		d := 2 * time.Millisecond
		if ms >= 30_000 {
			d = 200 * time.Millisecond
		}
		w.RecordAt(t0.Add(time.Duration(ms)*time.Millisecond), d)
	}
	s := w.SnapshotAt(t0.Add(40*time.Second - time.Nanosecond))
	if s.Count() != 1000 || s.Min() != 200*time.Millisecond {
		t.Errorf("window count %d min %v, want 1000 and 200ms", s.Count(), s.Min())
	}
	if p01 := s.Quantile(0.01); p01 != 200*time.Millisecond {
		t.Errorf("window p1 = %v, want 200ms (the recent regime only)", p01)
	}
	c := w.Cumulative()
	if c.Count() != 4000 {
		t.Errorf("cumulative count = %d, want 4000", c.Count())
	}
	if p50 := c.Quantile(0.5); !near(p50, 2*time.Millisecond) {
		t.Errorf("cumulative p50 = %v, want 2ms", p50)
	}
}

func near(got, want time.Duration) bool { return withinBound(int64(got), int64(want)) }

func TestWindowNegativeEpochs(t *testing.T) {
	// Times before 1970 must map to valid slots and still age out.
	w := NewWindow(3*time.Second, 3)
	before := time.Unix(-10, 500)
	w.RecordAt(before, time.Millisecond)
	w.RecordAt(before.Add(time.Second), 2*time.Millisecond)
	if got := w.SnapshotAt(before.Add(time.Second)).Count(); got != 2 {
		t.Fatalf("count = %d, want 2", got)
	}
	if got := w.SnapshotAt(before.Add(4 * time.Second)).Count(); got != 0 {
		t.Fatalf("count after span = %d, want 0", got)
	}
}

func TestWindowRealClock(t *testing.T) {
	w := NewWindow(time.Hour, 4)
	w.Record(time.Millisecond)
	w.Record(-time.Millisecond)
	s := w.Snapshot()
	if s.Count() != 2 || s.Min() != 0 || s.Max() != time.Millisecond {
		t.Fatalf("count %d min %v max %v, want 2, 0, 1ms", s.Count(), s.Min(), s.Max())
	}
	// A time stripped of its monotonic reading is placed by the wall clock,
	// which agrees with the monotonic placement here (no clock step).
	if got := w.SnapshotAt(time.Now().Round(0)).Count(); got != 2 {
		t.Fatalf("wall-clock snapshot count = %d, want 2", got)
	}
}

// A snapshot must skip a slot that is being cleared (untagged) and a slot
// tagged with an epoch after now.
func TestWindowSnapshotSkipsUntaggedSlots(t *testing.T) {
	w := NewWindow(4*time.Second, 4)
	w.RecordAt(t0, time.Millisecond)
	w.RecordAt(t0.Add(time.Second), time.Millisecond)
	w.slots[w.slotOf(w.epoch(w.nanos(t0)))].epoch.Store(noEpoch)
	if got := w.SnapshotAt(t0.Add(time.Second)).Count(); got != 1 {
		t.Fatalf("count = %d, want 1 (untagged slot skipped)", got)
	}
	if got := w.SnapshotAt(t0).Count(); got != 0 {
		t.Fatalf("count = %d, want 0 (future slot skipped)", got)
	}
}

// TestWindowMatchesModel replays random, mostly increasing timestamps (with
// late and very late samples, across 1970 and across epoch edges) against a
// plain model of the window: a sample is kept unless its epoch is a whole
// span older than the newest epoch kept so far, and a slot holds the samples
// of the newest epoch kept for it.
func TestWindowMatchesModel(t *testing.T) {
	for _, tc := range []struct {
		span  time.Duration
		slots int
		start time.Time
	}{
		{time.Second, 10, t0},
		{4 * time.Second, 4, time.Unix(-10, 0)}, // crosses 1970
		{3 * time.Second, 7, t0},                // width not a power of ten
		{60, 60, t0},                            // 1ns slots
	} {
		w := NewWindow(tc.span, tc.slots)
		width, n := int64(w.Span())/int64(tc.slots), int64(tc.slots)
		floorDiv := func(a int64) int64 {
			e := a / width
			if a%width < 0 {
				e--
			}
			return e
		}
		r := rand.New(rand.NewPCG(uint64(tc.slots), 5))
		var kept []modelSample
		var all Histogram
		newest := int64(math.MinInt64)
		ns := tc.start.UnixNano()
		for i := range 20_000 {
			ns += r.Int64N(width/3 + 1) // forward, at most a third of a slot
			at := ns
			switch i % 10 {
			case 0:
				at -= r.Int64N(2 * int64(w.Span())) // late, maybe too late
			case 1:
				at = floorDiv(ns)*width - r.Int64N(2) // on or just before an edge
			}
			v := r.Int64N(int64(time.Second))
			w.RecordAt(time.Unix(0, at), time.Duration(v))
			all.Record(time.Duration(v))
			e := floorDiv(at)
			if e+n > newest {
				kept = append(kept, modelSample{e, v})
				newest = max(newest, e)
			}
			if i%97 != 0 {
				continue
			}
			// Compare a snapshot at a time near now.
			now := ns - r.Int64N(width+1)
			want := modelSnapshot(kept, floorDiv(now), n)
			if got := w.SnapshotAt(time.Unix(0, now)); *got != *want {
				t.Fatalf("span %v/%d step %d: window count %d sum %v min %v max %v, model %d %v %v %v",
					tc.span, tc.slots, i, got.Count(), got.Sum(), got.Min(), got.Max(),
					want.Count(), want.Sum(), want.Min(), want.Max())
			}
		}
		if got, want := w.Cumulative(), all.Snapshot(); *got != *want {
			t.Fatalf("span %v/%d: cumulative count %d sum %v, want %d %v",
				tc.span, tc.slots, got.Count(), got.Sum(), want.Count(), want.Sum())
		}
	}
}

type modelSample struct{ epoch, v int64 }

// modelSnapshot is the window at epoch now according to the model: per slot,
// the samples of the newest kept epoch for it, if that epoch is among the
// slots epochs ending at now.
func modelSnapshot(kept []modelSample, now, n int64) *Snapshot {
	slotEpoch := map[int64]int64{}
	for _, s := range kept {
		r := ((s.epoch % n) + n) % n
		if e, ok := slotEpoch[r]; !ok || s.epoch > e {
			slotEpoch[r] = s.epoch
		}
	}
	var h Histogram
	for _, s := range kept {
		r := ((s.epoch % n) + n) % n
		if s.epoch == slotEpoch[r] && s.epoch > now-n && s.epoch <= now {
			h.Record(time.Duration(s.v))
		}
	}
	return h.Snapshot()
}

// Before the first rotation no slot is tagged; the fast path must not take
// the untagged slot for one whose epoch starts at the Unix epoch (noEpoch
// times an even width wraps around to 0).
func TestWindowFirstSampleAtUnixEpoch(t *testing.T) {
	w := NewWindow(4*time.Second, 4)
	at := time.Unix(0, 5)
	w.RecordAt(at, time.Millisecond)
	if got := w.SnapshotAt(at).Count(); got != 1 {
		t.Fatalf("count = %d, want 1", got)
	}
}

func TestWindowRecentAt(t *testing.T) {
	w := NewWindow(10*time.Second, 10) // 1s slots
	if w.SlotWidth() != time.Second {
		t.Fatalf("SlotWidth() = %v, want 1s", w.SlotWidth())
	}
	for i := range 5 { // one sample in each of the epochs t0 .. t0+4s, i+1 ms long
		w.RecordAt(t0.Add(time.Duration(i)*time.Second), time.Duration(i+1)*time.Millisecond)
	}
	now := t0.Add(4*time.Second + 300*time.Millisecond)
	for _, tc := range []struct {
		span     time.Duration
		count    uint64
		min, max time.Duration
	}{
		{0, 1, 5 * time.Millisecond, 5 * time.Millisecond}, // now's epoch alone
		{time.Second, 1, 5 * time.Millisecond, 5 * time.Millisecond},
		{time.Second + 1, 2, 4 * time.Millisecond, 5 * time.Millisecond}, // rounded up to two slots
		{3 * time.Second, 3, 3 * time.Millisecond, 5 * time.Millisecond},
		{time.Hour, 5, time.Millisecond, 5 * time.Millisecond}, // capped at the window
	} {
		s := w.RecentAt(now, tc.span)
		if s.Count() != tc.count || s.Min() != tc.min || s.Max() != tc.max {
			t.Errorf("RecentAt(now, %v): count %d, min %v, max %v; want %d, %v, %v",
				tc.span, s.Count(), s.Min(), s.Max(), tc.count, tc.min, tc.max)
		}
	}
	// A completed epoch on its own: the one before now's.
	if s := w.RecentAt(now.Add(-w.SlotWidth()), w.SlotWidth()); s.Count() != 1 || s.Max() != 4*time.Millisecond {
		t.Errorf("the epoch before now's: count %d, max %v; want 1, 4ms", s.Count(), s.Max())
	}
	if got, want := *w.RecentAt(now, w.Span()), *w.SnapshotAt(now); got != want {
		t.Error("RecentAt(now, Span()) differs from SnapshotAt(now)")
	}
}

func TestWindowEpochAt(t *testing.T) {
	w := NewWindow(10*time.Second, 10)
	e := w.EpochAt(t0)
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{{0, 0}, {999 * time.Millisecond, 0}, {time.Second, 1}, {25 * time.Second, 25}, {-time.Nanosecond, -1}} {
		if got := w.EpochAt(t0.Add(tc.at)) - e; got != tc.want {
			t.Errorf("EpochAt(t0+%v) = e%+d, want e%+d", tc.at, got, tc.want)
		}
	}
}

func TestWindowRecentIntoReusesMemory(t *testing.T) {
	w := NewWindow(10*time.Second, 10)
	for i := range 5 {
		w.RecordAt(t0.Add(time.Duration(i)*time.Second), time.Duration(i+1)*time.Millisecond)
	}
	now := t0.Add(4 * time.Second)
	var dst Snapshot
	dst.Merge(w.RecentAt(now, time.Hour)) // something to empty first
	w.RecentInto(&dst, now, 2*time.Second)
	if got, want := dst, *w.RecentAt(now, 2*time.Second); got != want {
		t.Errorf("RecentInto: count %d max %v; want count %d max %v", got.Count(), got.Max(), want.Count(), want.Max())
	}
	if n := testing.AllocsPerRun(10, func() { w.RecentInto(&dst, now, 2*time.Second) }); n != 0 {
		t.Errorf("RecentInto allocates %v times", n)
	}
}
