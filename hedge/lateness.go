package hedge

import (
	"time"

	"github.com/tailgate-dev/tailgate/internal/latency"
)

// lateness is how late hedge-delay timers fire in this process: the
// scheduling delay that the host and the Go runtime add to everything the
// process does, its reads' answers included. A Hedger keeps one; the
// Hedgers of a Classes share theirs, since it is the process's, not a
// class's, and the busier classes then measure it for the quiet ones.
//
// It sets a floor under the adaptive delay: never below jitterFactor
// times its 90th percentile. A read that is late by no more than the
// process's usual lateness may be late only because the process was busy,
// a hedge sent for it meets the same lateness, and the hedges add the
// load that made it late. On replicas that answer at once, a cache tier,
// the adaptive delay would otherwise sit at a millisecond and hedge the
// process's own jitter. The rarer, longer stalls are not in the floor:
// a timer that fires after one waits for the answers that came in
// meanwhile to be read (stallGrace, in operation.go) instead of raising
// every read's delay for the ten seconds the stall stays in the window.
//
// Timers are not armed early to make up for it. They were, by its mean
// and then its median, so that a hedge would go out at its delay rather
// than after it; but lateness is not the same for every timer (a point
// read's 2ms timers fired later than a search's 21ms ones, in the same
// process), and over a class whose reads all take about the same time a
// fraction of a millisecond early is the difference between its p90 and
// its p80: lab classes' /search sent 16-18% of its reads a hedge at "p90",
// against 8.5-9.2% with no lead, for the same wins. A hedge a little after
// its delay costs a fraction of a millisecond; one before it costs budget
// that another read's straggler needed.
type lateness struct {
	win *latency.Window // recent lateness samples
}

const (
	// latenessSpan is how far back the samples go.
	latenessSpan = 10 * time.Second
	// latenessMinSamples: fewer samples than this set no floor.
	latenessMinSamples = 32
	// jitterFactor and floorQuantile: the floor is jitterFactor times
	// the lateness's floorQuantile. Its p99 was the floor until the
	// stall grace: a few timers that fired late by a stall of the host
	// held a class's delay high for the seconds they stayed in the
	// window; the grace deals with those where they happen. Without a
	// floor, a cache tier's reads were hedged on the process's own jitter.
	// The measurements: docs/performance.md, Latency classes.
	jitterFactor  = 2
	floorQuantile = 0.90
)

func newLateness() *lateness {
	return &lateness{win: latency.NewWindow(latenessSpan, 10)}
}

// note records that a delay timer armed for some time fired lag after it.
func (l *lateness) note(now time.Time, lag time.Duration) {
	l.win.RecordAt(now, max(lag, 0))
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
