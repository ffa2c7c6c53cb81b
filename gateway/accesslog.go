package gateway

import (
	"context"
	"log/slog"
	"math"
	randv2 "math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// Why a request that was not refused got no answer from a replica, as the
// access log's reason says (refusals give theirs: rejectRequests, ...).
const (
	reasonNoReplica  = "no_replica"         // every breaker open
	reasonTimeout    = "timeout"            // no acceptable answer in time: 504
	reasonTooLarge   = "response_too_large" // over MaxResponseBytes: 502
	reasonFailed     = "all_failed"         // every attempt failed: 502
	reasonClientGone = "client_gone"        // the client left first: nothing written
)

// accessLog is the gateway's access log: its logger (nil: off) and which
// requests it gets.
type accessLog struct {
	log *slog.Logger
	// A request is logged when rand() < below; every request when all.
	all   bool
	below uint64
	rand  func() uint64
}

func (a *accessLog) init(cfg Config) {
	a.log = cfg.AccessLog
	a.all = cfg.AccessLogSample >= 1
	a.below = uint64(math.Ldexp(cfg.AccessLogSample, 64))
	a.rand = randv2.Uint64 // the runtime's generator: per thread, no contention
}

// logAccess writes request r's access line, if the sample takes it: s is
// what serve did, took how long it took. Called only with the access log
// on (its logger non-nil): a gateway without one spends nothing on it, not
// even a random number; a request left out of the sample, a random number.
func (g *Gateway) logAccess(r *http.Request, took time.Duration, s served) {
	a := &g.accessLog
	if !a.all && a.rand() >= a.below {
		return
	}
	attrs := make([]slog.Attr, 0, 13)
	attrs = append(attrs,
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", s.code),
		slog.Int64("bytes", s.bytes),
		slog.Duration("duration", took))
	if s.rt != nil {
		attrs = append(attrs, slog.String("route", s.rt.name))
	}
	if s.h != nil {
		attrs = append(attrs, slog.String("class", s.h.Class()))
	}
	attempts, hedgeWon := 0, false
	if x := s.x; x != nil {
		if x.started {
			attempts = 1 + int(x.hedges)
		}
		if w := int(x.tally.winner); x.tally.decided && w >= 0 {
			// By the request's view: its index names a replica of the
			// configuration it was served under, whatever a Reload did.
			attrs = append(attrs, slog.String("replica", x.rt.pool.backends[x.tally.replica[w]]))
			hedgeWon = w > 0
		} else if x.started && (s.reason == reasonClientGone || s.reason == reasonTimeout) {
			// No answer came, but where the read waited is what an
			// operator looks for: a client that gave up on a slow
			// replica, a timeout on a stuck one.
			attrs = append(attrs, slog.String("replica", x.attempted()))
		}
	}
	attrs = append(attrs,
		slog.Int("attempts", attempts),
		slog.Bool("hedged", attempts > 1),
		slog.Bool("hedgeWon", hedgeWon))
	if s.reason != "" {
		attrs = append(attrs, slog.String("reason", s.reason))
	}
	attrs = append(attrs, slog.String("client", r.RemoteAddr))
	a.log.LogAttrs(context.Background(), slog.LevelInfo, "access", attrs...)
}

// attempted returns the replicas of the read's attempts, the primary's
// first, comma-separated. Called once RoundTripWith has returned: every
// attempt that was sent had been picked, and counted in hedges, by then.
func (x *exchange) attempted() string {
	var b strings.Builder
	backends := x.rt.pool.backends
	for i := 0; i <= int(x.hedges); i++ {
		r := x.Route.Replica(i)
		if r < 0 || r >= len(backends) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(backends[r])
	}
	return b.String()
}
