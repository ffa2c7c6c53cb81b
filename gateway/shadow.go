package gateway

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/upgrade"
	"github.com/tailgate-dev/tailgate/replica"
	"go.opentelemetry.io/otel/trace"
)

// Shadow outcomes, as counted in tailgate_shadow_requests_total.
const (
	shadowSuccess  = "success"  // answered below 500
	shadowFailure  = "failure"  // a transport error or a 5xx
	shadowCanceled = "canceled" // cut short by ShadowTimeout or Close
	shadowSkipped  = "skipped"  // due, but no free slot: not sent
)

var shadowOutcomes = []string{shadowSuccess, shadowFailure, shadowCanceled, shadowSkipped}

// shadows sends shadow requests to replicas on probation: in the
// background, bounded in number and time, on a context of their own that
// Close cancels before waiting for them.
type shadows struct {
	slots  limiter
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex // guards closed against wg.Add after Wait began
	closed bool
	wg     sync.WaitGroup
}

var shadowValue = []string{"1"}

func (s *shadows) init(cfg Config) {
	s.slots.max.Store(int64(cfg.MaxInFlightShadows))
	s.ctx, s.cancel = context.WithCancel(context.Background())
}

// close cancels the shadows in flight, waits for them, and refuses new
// ones. It may be called more than once.
func (s *shadows) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// shadow sends a copy of r, a read just answered under v, to a replica of
// its pool p on probation if one is due a shadow (replica.Set.Pick
// decides), in the background. With no replica on probation it costs one
// atomic load.
// It reads r before returning, never after: the handler may then return.
// A traced read (rt non-nil) has the shadow's span for a child.
func (g *Gateway) shadow(v *view, p *pool, r *http.Request, rt *readTrace) {
	if p.set.OnProbation() == 0 {
		return
	}
	now := time.Now()
	i, t, ok := p.set.Pick(now, replica.Attempt{Role: replica.Shadow})
	if !ok {
		return
	}
	s := &g.shadows
	if !s.slots.tryAcquire() {
		p.set.Done(t, replica.Canceled, now) // took no time: no latency sample
		g.metrics.shadow(shadowSkipped)
		return
	}
	u := targetURL(r)
	u.Scheme, u.Host = p.targets[i].Scheme, p.targets[i].Host
	h := forwardedHeaders(r, v.cfg.TrustedHop, new([3]string))
	h[ShadowHeader] = shadowValue
	h[deadline.Header] = v.shadowValue
	base := g.base
	if isGRPC(r) {
		h[grpcTimeout], h["Te"], base = v.shadowValue, teTrailers, g.h2cBase
	}
	var span trace.Span
	if rt != nil {
		span = rt.startShadow(r.Method, replicaLabel(p.backends[i]), h)
	}
	req := (&http.Request{
		Method:     r.Method,
		URL:        &u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Body:       http.NoBody,
	})
	if r.GetBody != nil {
		// A read with a body (body.go): the same bytes again.
		req.Body, _ = r.GetBody()
		req.ContentLength = r.ContentLength
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.slots.release()
		p.set.Done(t, replica.Canceled, now)
		endShadow(span, outCanceled, context.Canceled)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go g.runShadow(v, p, base, req, t, now, span)
}

// runShadow sends req through base, reads and discards its answer (up to the response
// limit) and gives the ticket back, to v's set, with the outcome, which
// ends span too (nil: not traced).
func (g *Gateway) runShadow(v *view, p *pool, base http.RoundTripper, req *http.Request, t replica.Ticket, start time.Time, span trace.Span) {
	s := &g.shadows
	defer s.wg.Done()
	defer s.slots.release()
	ctx, cancel := context.WithDeadline(s.ctx, start.Add(v.cfg.ShadowTimeout))
	defer cancel()
	resp, err := base.RoundTrip(req.WithContext(ctx))
	if err == nil {
		// A stray 101's body is the raw connection, which no deadline
		// watches: read, it would hold the slot (and Close) until the
		// replica let go.
		err = upgrade.RefuseStray(req, resp)
	}
	if err == nil {
		// The whole body is the answer, as it is for attempts; past the
		// limit the replica has answered enough.
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, v.cfg.MaxResponseBytes))
		resp.Body.Close()
		if err != nil {
			resp = nil
		}
	}
	if err == nil {
		err = hedge.DefaultAccept(resp) // as the engine judges an attempt
	}
	o, _ := hedge.Result{Verdict: err}.ReplicaOutcome() // as the engine judges an attempt
	p.set.Done(t, o, time.Now())
	p.counts[t.Replica()].count(roleShadow, shadowOutcome(err))
	endShadow(span, shadowOutcome(err), err)
	switch o {
	case replica.Success:
		g.metrics.shadow(shadowSuccess)
	case replica.Failure:
		g.metrics.shadow(shadowFailure)
	default:
		g.metrics.shadow(shadowCanceled)
	}
	if o != replica.Success {
		g.log.Debug("shadow request", "replica", req.URL.Host, "path", req.URL.Path, "outcome", o, "err", err)
	}
}
