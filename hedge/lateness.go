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
// It serves two ends. Timers are armed early by its mean (lead), so that
// a hedge goes out at its delay on average rather than after it. And an
// adaptive delay never drops below jitterFactor times its 99th percentile
// (floor): a read that is late by no more than the process's own lateness
// may be late only because the process was busy, a hedge sent for it
// meets the same lateness, and the hedges add the load that made it late.
// On replicas that answer at once, a cache tier, the adaptive delay would
// otherwise sit at a millisecond and hedge the process's own jitter.
type lateness struct {
	mean atomic.Int64    // EWMA of the lateness, ns
	win  *latency.Window // recent lateness samples
}

const (
	// latenessWeight: each firing moves the mean by 1/8 of its error, so
	// that it follows the machine within a few dozen hedges.
	latenessWeight = 8
	// latenessSpan is how far back the samples behind the floor go.
	latenessSpan = 10 * time.Second
	// latenessMinSamples: fewer samples than this set no floor.
	latenessMinSamples = 32
	// jitterFactor: the floor is this many times the lateness's p99.
	jitterFactor = 2
)

func newLateness() *lateness {
	return &lateness{win: latency.NewWindow(latenessSpan, 10)}
}

// note records that a delay timer armed for some time fired lag after it.
// Concurrent updates of the mean may lose one another: it is an estimate.
func (l *lateness) note(now time.Time, lag time.Duration) {
	lag = max(lag, 0)
	cur := l.mean.Load()
	l.mean.Store(cur + (int64(lag)-cur)/latenessWeight)
	l.win.RecordAt(now, lag)
}

// lead is how early to arm a delay timer: the mean lateness, but never
// more than an eighth of the delay, so a hedge never goes out much before
// the delay even when the estimate is off, and a short delay (a tied
// request's 1ms, which gives the first copy time to start and cancel its
// twin) stays close to what it says.
func (l *lateness) lead(delay time.Duration) time.Duration {
	return min(time.Duration(max(l.mean.Load(), 0)), delay/8)
}

// floor returns the least adaptive delay at now: jitterFactor times the
// 99th percentile of recent lateness, zero while too few timers have
// fired to say.
func (l *lateness) floor(now time.Time) time.Duration {
	s := l.win.SnapshotAt(now)
	if s.Count() < latenessMinSamples {
		return 0
	}
	return jitterFactor * s.Quantile(0.99)
}
