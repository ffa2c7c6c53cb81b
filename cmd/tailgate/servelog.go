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
