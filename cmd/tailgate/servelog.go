package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
)

// sameServerTimeout bounds the name lookups of warnSameServer: it only
// warns, so a slow resolver must not hold up the start for long.
const sameServerTimeout = 2 * time.Second

// warnSameServer logs a warning for each pair of backends that are one
// server under two names (see gateway.SameServer). New cannot refuse them,
// since it does not resolve names, and a name may resolve differently
// later; the operator is told at start, once.
func warnSameServer(ctx context.Context, logger *slog.Logger, backends []string) {
	ctx, cancel := context.WithTimeout(ctx, sameServerTimeout)
	defer cancel()
	for _, p := range gateway.SameServer(ctx, nil, backends) {
		logger.Warn("two backends are one server: hedges between them cannot help", "backend", p.A, "sameAs", p.B, "addr", p.Addr)
	}
}

// secondsAttr is the JSON log's ReplaceAttr: a duration becomes seconds,
// a float ("timeout":10, "duration":0.0123), as Prometheus and nginx's
// $request_time count them, rather than slog's default, an integer of
// nanoseconds that neither reads nor compares well. The text format keeps
// Go's own form ("10s", "12.3ms").
func secondsAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key, a.Value.Duration().Seconds())
	}
	return a
}
