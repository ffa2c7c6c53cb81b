package exp

import (
	"sync/atomic"
	"time"
)

// StallTick is how often a StallMeter looks at the clock.
const StallTick = 2 * time.Millisecond

// StallMeter measures how late this process gets the CPU while a run goes
// on: a goroutine sleeps StallTick at a time and notes how long past its
// due time each wake-up comes. A wake-up late by tens of milliseconds is
// the machine (a neighbour's build, the hypervisor's steal), not what the
// run measures, and every read in flight then was late as much: a
// percentile of a few reads' rank moves with it (see the sweep, which runs
// a point again when it saw such a stall).
type StallMeter struct {
	worst atomic.Int64 // ns
	stop  chan struct{}
	done  chan struct{}
}

// StartStallMeter starts a meter; Stop it.
func StartStallMeter() *StallMeter {
	m := &StallMeter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTimer(StallTick)
		defer t.Stop()
		due := time.Now().Add(StallTick)
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				// Now, not the timer's own time: when it fired is the
				// runtime's, when this goroutine ran is the CPU's.
				if late := time.Since(due); late > time.Duration(m.worst.Load()) {
					m.worst.Store(int64(late))
				}
				due = time.Now().Add(StallTick)
				t.Reset(StallTick)
			}
		}
	}()
	return m
}

// Stop stops the meter and returns the latest wake-up it saw: the longest
// the process waited for the CPU, within a tick.
func (m *StallMeter) Stop() time.Duration {
	close(m.stop)
	<-m.done
	return time.Duration(m.worst.Load())
}
