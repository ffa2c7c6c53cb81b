package hedge

import (
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/latency"
)

// lateness is how late hedge-delay timers fire in this process: the
// scheduling delay that the host and the Go runtime add to everything the
// process does, its reads' answers included. A Hedger keeps one; the
// Hedgers of a Classes share theirs, since it is the process's, not a
// class's, and the busier classes then measure it for the quiet ones.
//
// It serves two ends. Timers are armed early by its median (lead), so
// that a hedge goes out at its delay in the typical case rather than after
// it. (Not its mean: lateness is skewed, mostly tens of microseconds and
// now and then milliseconds, and a lead of the mean sent most hedges early;
// over a class whose reads all take about 20ms, half a millisecond early
// is the difference between its p90 and its p70, twice the hedges.) And an
// adaptive delay never drops below jitterFactor times its 99th percentile
// (floor): a read that is late by no more than the process's own lateness
// may be late only because the process was busy, a hedge sent for it
// meets the same lateness, and the hedges add the load that made it late.
// On replicas that answer at once, a cache tier, the adaptive delay would
// otherwise sit at a millisecond and hedge the process's own jitter.
type lateness struct {
	win *latency.Window // recent lateness samples
	// median is the samples' median as of medianAt (unix ns), refreshed
	// at most every latenessRefresh by note; 0 until latenessMinSamples.
	median   atomic.Int64
	medianAt atomic.Int64
}

const (
	// latenessSpan is how far back the samples go.
	latenessSpan = 10 * time.Second
	// latenessMinSamples: fewer samples than this set no floor and no
	// lead.
	latenessMinSamples = 32
	// latenessRefresh: how often note recomputes the median.
	latenessRefresh = 100 * time.Millisecond
	// jitterFactor and floorQuantile: the floor is jitterFactor times
	// the lateness's floorQuantile. (Its p90 was tried: over the lab's
	// classes workload it let the point reads' delay down to their p90,
	// and with the searches' hedges the budget ran dry and the point
	// reads' stragglers went unhedged.)
	jitterFactor  = 2
	floorQuantile = 0.99
)

func newLateness() *lateness {
	return &lateness{win: latency.NewWindow(latenessSpan, 10)}
}

// note records that a delay timer armed for some time fired lag after it.
func (l *lateness) note(now time.Time, lag time.Duration) {
	l.win.RecordAt(now, max(lag, 0))
	at := l.medianAt.Load()
	if now.UnixNano()-at < int64(latenessRefresh) || !l.medianAt.CompareAndSwap(at, now.UnixNano()) {
		return
	}
	if s := l.win.SnapshotAt(now); s.Count() >= latenessMinSamples {
		l.median.Store(int64(s.Quantile(0.5)))
	} else {
		l.median.Store(0)
	}
}

// lead is how early to arm a delay timer: the median lateness, but never
// more than an eighth of the delay, so a hedge never goes out much before
// the delay even when the estimate is off, and a short delay (a tied
// request's 1ms, which gives the first copy time to start and cancel its
// twin) stays close to what it says.
func (l *lateness) lead(delay time.Duration) time.Duration {
	return min(time.Duration(l.median.Load()), delay/8)
}

// floor returns the least adaptive delay at now: jitterFactor times the
// floorQuantile of recent lateness, zero while too few timers have fired
// to say.
func (l *lateness) floor(now time.Time) time.Duration {
	s := l.win.SnapshotAt(now)
	if s.Count() < latenessMinSamples {
		return 0
	}
	return jitterFactor * s.Quantile(floorQuantile)
}
