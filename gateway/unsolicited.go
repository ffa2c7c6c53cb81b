package gateway

import (
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailgate-dev/tailgate/internal/h1"
)

// A replica that sends bytes nobody asked for (a second response after
// its answer, a body on a HEAD, 204 or 304 answer, bytes past its
// Content-Length, a response as a connection opens) would, on a reused
// HTTP/1.1 connection, have them read as the answer to the next request:
// another client's. internal/h1 closes such connections and forwards
// none of those bytes (see its stray.go); the gateway counts each one per
// replica and logs it, at most once a minute per replica. An attempt that
// found no clean connection fails with reason "unsolicited".

// newUnsolicitedCounter returns tailgate_unsolicited_total.
func newUnsolicitedCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailgate_unsolicited_total",
		Help: "Backend connections closed because the replica sent bytes nobody asked for, none of them forwarded, by replica and when: " +
			"answer (after an answer's end: a second response, a body on a HEAD, 204 or 304 answer, bytes past the Content-Length; the replica's connections are then not reused for a minute), " +
			"open (on a new connection before its first request: a replica that greets or answers unasked; its new connections then wait 50 ms for such bytes before their first request, for a minute). " +
			"Counted for http:// backends over HTTP/1.1 (internal/h1).",
	}, []string{"replica", "when"})
}

// strayLogEvery is how often, at most, a replica's strays are logged.
const strayLogEvery = time.Minute

// strayLog limits the log lines of strays to one per replica per
// strayLogEvery, and counts those it holds back.
type strayLog struct {
	mu   sync.Mutex
	next map[string]time.Time // by replica: when its next line may go
	held map[string]int64     // by replica: lines held back since its last
}

// allow reports whether a line for replica may go at now and, if so, how
// many were held back since its last.
func (l *strayLog) allow(replica string, now time.Time) (bool, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next == nil {
		l.next, l.held = map[string]time.Time{}, map[string]int64{}
	}
	if now.Before(l.next[replica]) {
		l.held[replica]++
		return false, 0
	}
	l.next[replica] = now.Add(strayLogEvery)
	n := l.held[replica]
	delete(l.held, replica)
	return true, n
}

// unsolicited is internal/h1's Config.OnUnsolicited: it counts and logs a
// connection closed for bytes nobody asked for.
func (g *Gateway) unsolicited(u h1.Unsolicited) {
	replica := g.replicaOfHost(u.Host)
	when, what := "answer", "after an answer's end"
	if u.OnOpen {
		when, what = "open", "on a new connection before any request"
	}
	g.metrics.unsolicited.WithLabelValues(replica, when).Inc()
	if ok, n := g.metrics.strayLog.allow(replica, time.Now()); ok {
		g.log.Warn("replica sent bytes nobody asked for: connection closed, nothing forwarded", "replica", replica, "when", what, "suppressed", n)
	}
}

// replicaOfHost returns the label of the replica whose URL has host (the
// host of a request sent to it), or its host as a URL when none has (a
// replica a reload removed).
func (g *Gateway) replicaOfHost(host string) string {
	if v := g.view.Load(); v != nil {
		for _, b := range v.cfg.Backends {
			if u, err := url.Parse(b); err == nil && u.Host == host {
				return replicaLabel(b)
			}
		}
	}
	return "http://" + host
}
