package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"testing/synctest"
)

// The floor's GOGC puts the heap goal (live + (live + roots) × GOGC/100)
// at the floor while the live heap is small, and leaves GOGC at 100 once
// twice the live heap is above the floor.
func TestFloorPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, roots uint64
		want        int
	}{
		{8 * mib, 0, 500},                // 8 + 8 × 5 = 48
		{8 * mib, 2 * mib, 400},          // 8 + 10 × 4 = 48
		{16 * mib, 0, 200},               // 16 + 16 × 2 = 48
		{24 * mib, 0, 100},               // 24 + 24 = 48
		{40 * mib, 0, 100},               // 40 + 40 > 48: GOGC=100's rule
		{100 * mib, 0, 100},              // over the floor
		{0, 0, 1200},                     // before the first collection: the runtime's minimum goal, 4 MiB × 12
		{1 * mib, 64 << 10, 1200},        // capped likewise
		{3 * mib, 1 * mib, 1125},         // 3 + 4 × 11.25 = 48
		{47 * mib, 1 * mib, 100},         // nearly there: never below 100
		{48*mib - 1, 0, minFloorPercent}, // likewise
	} {
		if got := floorPercent(c.live, c.roots, 48*mib); got != c.want {
			t.Errorf("floorPercent(live %d MiB, roots %d MiB) = %d, want %d", c.live/mib, c.roots/mib, got, c.want)
		}
		// The goal at that GOGC reaches the floor, unless the cap holds
		// it at the runtime's minimum goal, which is the floor.
		p := uint64(floorPercent(c.live, c.roots, 48*mib))
		if goal := max(c.live+(c.live+c.roots)*p/100, heapMinimum*p/100); goal < 48*mib-mib/100 && 2*c.live < 48*mib {
			t.Errorf("live %d MiB: goal %d MiB at GOGC=%d, under the floor", c.live/mib, goal/mib, p)
		}
	}
}

// step sets GOGC only when the figure moves by a tenth or more: the live
// heap changes a little at every collection.
func TestFloorStep(t *testing.T) {
	const mib = 1 << 20
	live := uint64(8 * mib)
	var sets []int
	cur := 100
	f := newFloor(48*mib, func() (uint64, uint64) { return live, 0 }, func(p int) int { old := cur; cur = p; sets = append(sets, p); return old })
	if f.initial != 100 || len(sets) != 1 {
		t.Fatalf("newFloor: initial %d, sets %v", f.initial, sets)
	}
	sets = nil
	f.step() // 500
	live = 8*mib + mib/4
	f.step() // 485: within a tenth of 500
	live = 12 * mib
	f.step() // 300
	live = 30 * mib
	f.step() // 100
	f.step()
	if want := []int{500, 300, 100}; !equalInts(sets, want) {
		t.Errorf("GOGC set to %v, want %v", sets, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// With GOGC in the environment the operator chose: the floor leaves the
// collector alone. Without it, the floor sets GOGC while it runs and puts
// it back when it ends.
func TestKeepGCFloor(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	t.Run("GOGC set", func(t *testing.T) {
		t.Setenv("GOGC", "100")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { keepGCFloor(ctx, logger); close(done) }()
		<-done // returns at once, whatever ctx
		cancel()
		if p := debug.SetGCPercent(100); p != 100 {
			t.Errorf("GOGC %d after the floor, want 100 (untouched)", p)
		}
	})
	t.Run("GOGC unset", func(t *testing.T) {
		t.Setenv("GOGC", "")
		os.Unsetenv("GOGC")
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { keepGCFloor(ctx, logger); close(done) }()
			synctest.Wait() // its first step taken, it waits for the next
			// The test binary's live heap is far under the floor.
			s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
			metrics.Read(s)
			if p := s[0].Value.Uint64(); p <= 100 {
				t.Errorf("GOGC %d while the floor runs, want more than 100", p)
			}
			cancel()
			<-done
		})
		if p := debug.SetGCPercent(100); p != 100 {
			t.Errorf("GOGC %d once the floor ended, want 100 (as found)", p)
		}
	})
}
