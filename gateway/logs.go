package gateway

import (
	"sync/atomic"
	"time"
)

// The per-request failures that are logged at warn level, each limited to
// one line per logEvery (see limitedLog).
const (
	logTimeout   = iota // "request timed out"
	logTooLarge         // "response too large"
	logFailed           // "all attempts failed"
	logNoReplica        // "no replica available"
	logTLS              // "backend TLS failed"
	nLimitedLogs
)

// logEvery is how often, at most, a line of one cause of failed requests
// is logged. When a replica dies under load, every request fails the same
// way: a line each would bury the one line that says so (the breaker
// opening) under thousands, and cost a write each on the failure path.
// Metrics count every failure; the log says that they happen, how often,
// and gives one example a second.
const logEvery = time.Second

// limitedLog lets one line through per logEvery and counts the lines it
// holds back, for the next line to report (as "suppressed"). Lines held
// back after the last one let through are reported only when another
// comes: a cause that stops is silent, as it should be. Safe for
// concurrent use, without a lock: in a storm of failures every request
// takes it at once. The zero value lets the first line through.
type limitedLog struct {
	next       atomic.Int64 // when the next line may go, ns since the gateway's epoch
	suppressed atomic.Int64
}

// allowAt reports whether a line may go at off (ns since the gateway's
// epoch) and, if so, how many were held back since the last one.
func (l *limitedLog) allowAt(off int64) (ok bool, suppressed int64) {
	next := l.next.Load()
	if off < next || !l.next.CompareAndSwap(next, off+int64(logEvery)) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}

// allowLog is allowAt for the failure kind given, now.
func (g *Gateway) allowLog(kind int) (bool, int64) {
	return g.limited[kind].allowAt(int64(time.Since(g.epoch)))
}
