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
// Without it, RSS stays near its peak for minutes after the connections
// go: 5,000 idle keep-alive connections took the gateway from 12 to
// 124 MB, and it stayed at 113 MB for 3 minutes after they closed. Their
// memory is freed only by garbage collections, which an idle process
// does not run until the runtime forces one every 2 minutes; net/http
// keeps the closed connections' 4 KiB read and write buffers in
// sync.Pools, whose contents outlive one collection and go at the next;
// and only then does the runtime's scavenger return the pages, once the
// heap goal has come down. RSS was down to 25 MB only after 3.5 minutes.
//
// So, once the connections open have fallen by minDrop from their peak
// and have stopped falling (by fewer than a tenth of minDrop since the
// last look, every poll), so that the whole wave is gone, it runs one
// collection, which moves the pooled buffers to the pools' victim caches,
// and debug.FreeOSMemory: a second collection, which frees them, then
// returns every free page at once. After the 5,000 connections, RSS was
// 24 MB within 10 seconds; most of the rest of the way to 12 MB is what
// the runtime never frees: goroutine descriptors, and metadata for the
// peak heap. The cost is two collections of what is live, once a wave.
// No runtime setting does this: GOMEMLIMIT acts only above the limit,
// and GOGC changes how often collections run under load, not whether an
// idle process runs one.
func trimAfterWaves(ctx context.Context, ln *connlimit.Listener, logger *slog.Logger, poll time.Duration, minDrop int) {
	t := time.NewTicker(poll)
	defer t.Stop()
	peak, last := 0, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		peak = max(peak, ln.TakePeak())
		open := ln.Stats().Open
		falling := last-open >= max(minDrop/10, 1)
		last = open
		if peak-open < minDrop || falling {
			continue
		}
		start := time.Now()
		runtime.GC()
		debug.FreeOSMemory()
		logger.Debug("returned memory after client connections closed", "peak", peak, "open", open, "took", time.Since(start))
		peak = open
	}
}
