package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// gcFloor is the least heap goal serve lets the garbage collector aim
// for, unless the environment sets GOGC: a collection then runs after
// about gcFloor less the live heap of allocation, rather than after one
// live heap's worth (GOGC=100's rule). A proxied read allocates about
// 6 KB on the gateway's side (gateway BenchmarkProxiedRead: net/http's
// request and response parsing, the contexts, the read's own state), and
// the gateway's live heap is about 8 MB, so at 3,000 reads/s GOGC=100
// collects two to three times a second; each collection stops the world
// twice and runs its mark for 5 to 20 ms on a busy host, and the reads in
// flight meanwhile make the gateway's tail: in docs/performance.md
// ("The gateway's own tail"), 57-100% of the reads above the p99.9 of a
// run overlapped one. At 48 MiB the gateway collects about every 2 s at
// that rate, for some 40 MB more of heap under load. When the live heap
// is over half the floor (thousands of connections), GOGC=100's rule
// applies as before: the floor adds nothing there. GOMEMLIMIT, a
// deployment setting, still bounds the goal from above; GOGC in the
// environment (a number, or off) turns the floor off.
const gcFloor = 48 << 20

// gcFloorPoll is how often the floor looks at the live heap: the
// collector measures it once per cycle, about every second under load.
const gcFloorPoll = 200 * time.Millisecond

// keepGCFloor keeps the heap goal at gcFloor or above until ctx ends, by
// setting GOGC from the live heap the last collection found, and then
// puts GOGC back as it found it. It does nothing when GOGC is set in the
// environment: the operator chose.
func keepGCFloor(ctx context.Context, logger *slog.Logger) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	f := newFloor(gcFloor, readHeap, debug.SetGCPercent)
	defer f.set(f.initial)
	logger.Debug("garbage collector: heap goal floor", "floor", gcFloor)
	t := time.NewTicker(gcFloorPoll)
	defer t.Stop()
	for {
		f.step()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// floor sets GOGC so that the heap goal stays at floor or above (see
// keepGCFloor); read and set are the runtime's, or a test's.
type floor struct {
	floor   uint64
	read    func() (live, roots uint64)
	set     func(percent int) int
	percent int // as last set
	initial int // as found
}

func newFloor(at uint64, read func() (live, roots uint64), set func(int) int) *floor {
	f := &floor{floor: at, read: read, set: set}
	f.initial = set(minFloorPercent) // reads the setting in force; step sets the floor's
	f.percent = minFloorPercent
	return f
}

// minFloorPercent: the floor never sets GOGC below the default's 100.
const minFloorPercent = 100

// heapMinimum is the runtime's least heap goal at GOGC=100, which it
// scales with GOGC: the floor's GOGC stays at or under floor's multiple
// of it, or a live heap of a few bytes (before the first collection)
// would set a goal far above the floor.
const heapMinimum = 4 << 20

// step sets GOGC for the live heap the last collection measured, when it
// differs by a tenth or more from the one set: the runtime recomputes the
// goal of the cycle under way at once.
func (f *floor) step() {
	live, roots := f.read()
	p := floorPercent(live, roots, f.floor)
	if d := p - f.percent; d*10 >= f.percent || -d*10 >= f.percent {
		f.set(p)
		f.percent = p
	}
}

// floorPercent returns the GOGC whose heap goal is at least floor for a
// live heap of live bytes with roots bytes of stacks and globals: the
// runtime aims at live + (live + roots) × GOGC/100.
func floorPercent(live, roots, floor uint64) int {
	if live >= floor {
		return minFloorPercent
	}
	base := max(live+roots, 1)
	p := (floor - live) * 100 / base
	return int(min(max(p, minFloorPercent), max(floor*100/heapMinimum, minFloorPercent)))
}

// readHeap reads the live heap the last collection found and the roots
// (stacks and globals) the collector scans with it.
func readHeap() (live, roots uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(s)
	for i := range s {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0, 0
		}
	}
	return s[0].Value.Uint64(), s[1].Value.Uint64() + s[2].Value.Uint64()
}
