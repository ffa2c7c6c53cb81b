package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/internal/sameserver"
)

// sameServerTimeout bounds the name lookups of warnSameServer: it only
// warns, so a slow resolver must not hold up the start for long.
const sameServerTimeout = 2 * time.Second

// warnSameServer logs a warning for each pair of backends that are one
// server under two names (see internal/sameserver). New cannot refuse them,
// since it does not resolve names, and a name may resolve differently
// later; the operator is told at start, once, and on a reload that adds
// backends, of the pairs with one of those added (nil: every pair).
func warnSameServer(ctx context.Context, logger *slog.Logger, backends, added []string) {
	ctx, cancel := context.WithTimeout(ctx, sameServerTimeout)
	defer cancel()
	for _, p := range sameserver.Find(ctx, nil, backends) {
		if added != nil && !slices.Contains(added, p.A) && !slices.Contains(added, p.B) {
			continue
		}
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

// accessLogger returns the access log the flags ask for (nil when off)
// and its sample, writing to w in the log's format. Its lines are at info
// level and always written: an operator who asks for an access log wants
// it, whatever -log-level keeps of the rest. sampleGiven says that
// -access-log-sample was given.
func (f serveFlags) accessLogger(w io.Writer, sampleGiven bool) (*slog.Logger, float64, error) {
	switch f.accessLog {
	case "off":
		if sampleGiven {
			return nil, 0, errors.New("-access-log-sample applies only with -access-log on")
		}
		return nil, 0, nil
	case "on":
	default:
		return nil, 0, fmt.Errorf("-access-log %q: want off or on", f.accessLog)
	}
	if !(f.accessSample > 0 && f.accessSample <= 1) { // NaN too
		return nil, 0, fmt.Errorf("-access-log-sample %v must be within (0, 1]", f.accessSample)
	}
	l, err := newLogger(w, f.logFormat, "info")
	return l, f.accessSample, err
}

// lockedWriter serialises the writes of the loggers that share it (the
// log and the access log, each with a handler of its own), so that their
// lines never interleave, whatever the writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
