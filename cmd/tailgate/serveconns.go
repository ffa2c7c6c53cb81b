package main

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailgate-dev/tailgate/internal/connlimit"
)

// defaultMaxConns is -max-conns' default: generous for one gateway
// process (an idle keep-alive connection costs about 22 KiB, so the limit
// bounds them at about 220 MB), far below what one client could otherwise
// pile up.
const defaultMaxConns = 10000

// connCollector reports the client connection limit's figures at scrape
// time.
type connCollector struct{ ln *connlimit.Listener }

var (
	descConns = prometheus.NewDesc("tailgate_client_connections",
		"Client connections open, by state: busy (in a request or sending one) or idle (keep-alive, between requests).", []string{"state"}, nil)
	descConnsMax = prometheus.NewDesc("tailgate_client_connections_max",
		"Most client connections open at once (-max-conns).", nil, nil)
	descConnsRefused = prometheus.NewDesc("tailgate_client_connections_refused_total",
		"Client connections closed at accept because -max-conns were open and none was idle.", nil, nil)
	descConnsReclaimed = prometheus.NewDesc("tailgate_client_connections_reclaimed_total",
		"Idle keep-alive client connections closed to make room for a new one at -max-conns.", nil, nil)
)

func (c connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descConns
	ch <- descConnsMax
	ch <- descConnsRefused
	ch <- descConnsReclaimed
}

func (c connCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.ln.Stats()
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(s.Open-s.Idle), "busy")
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(s.Idle), "idle")
	ch <- prometheus.MustNewConstMetric(descConnsMax, prometheus.GaugeValue, float64(s.Max))
	ch <- prometheus.MustNewConstMetric(descConnsRefused, prometheus.CounterValue, float64(s.Refused))
	ch <- prometheus.MustNewConstMetric(descConnsReclaimed, prometheus.CounterValue, float64(s.Reclaimed))
}

// Memory trimming after a wave of client connections: how often to look,
// and how many connections must have gone since the last peak (500 hold
// about 11 MB).
const (
	trimPoll    = 5 * time.Second
	trimMinDrop = 500
)

// trimAfterWaves gives the memory of client connections back to the
// operating system once a wave of them has closed, until ctx ends.
//
// Without it, the gateway's RSS stays near its peak for minutes after the
// connections go (156 MB for 3 minutes after 5,000 idle ones, in issue
// 11). Most of that memory is freed only by a garbage collection, which an
// idle process does not run until the runtime forces one every 2 minutes;
// net/http keeps the closed connections' 4 KiB read and write buffers in
// sync.Pools, whose contents outlive one collection and go at the next, so
// about 4 minutes; and the runtime's scavenger then returns the freed
// pages to the OS at its own pace, keeping what the last collection's heap
// goal (twice the peak's live heap, with GOGC=100) says may be needed soon.
//
// So, when the connections open have fallen by trimMinDrop from their
// peak (minDrop, polled every poll), it runs one collection (to move the pooled buffers to the pools'
// victim caches) and debug.FreeOSMemory (a second collection, which frees
// them, then returns every free page at once). The cost is two
// collections of whatever is live, at most once per poll, and only
// after a wave; GOMEMLIMIT would not help here, as it acts only above the
// limit.
func trimAfterWaves(ctx context.Context, ln *connlimit.Listener, logger *slog.Logger, poll time.Duration, minDrop int) {
	t := time.NewTicker(poll)
	defer t.Stop()
	peak := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		peak = max(peak, ln.TakePeak())
		open := ln.Stats().Open
		if peak-open < minDrop {
			continue
		}
		start := time.Now()
		runtime.GC()
		debug.FreeOSMemory()
		logger.Debug("returned memory after client connections closed", "peak", peak, "open", open, "took", time.Since(start))
		peak = open
	}
}
