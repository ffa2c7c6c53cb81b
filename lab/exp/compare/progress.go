package compare

import (
	"sync/atomic"
)

// progress reports a side's progress from its own goroutine while the side
// runs. Reads call add as they complete, which only counts and wakes it, so
// that a slow Progress delays neither a read nor its measured latency.
type progress struct {
	report                func(done, total int)
	prior, samples, total int
	n                     atomic.Int64
	wake, stop, stopped   chan struct{}
}

// startProgress starts reporting to report (nil: nothing to do) the side
// after prior reads, which makes samples of total. It reports about every
// tenth of the side, never its last read: the caller reports the side's
// end once the side is over.
func startProgress(report func(done, total int), prior, samples, total int) *progress {
	if report == nil {
		return nil
	}
	p := &progress{report: report, prior: prior, samples: samples, total: total,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go p.run()
	return p
}

func (p *progress) run() {
	defer close(p.stopped)
	step := max((p.samples+9)/10, 1)
	next := step
	for {
		select {
		case <-p.wake:
		case <-p.stop:
			return
		}
		if n := int(p.n.Load()); n >= next && n < p.samples {
			p.report(p.prior+n, p.total)
			next = (n/step + 1) * step
		}
	}
}

// add counts a completed read.
func (p *progress) add() {
	if p == nil {
		return
	}
	p.n.Add(1)
	select {
	case p.wake <- struct{}{}:
	default: // awake already: it will read the count
	}
}

// finish stops the reports and waits until the last has returned.
func (p *progress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.stopped
}
