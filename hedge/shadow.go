package hedge

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/internal/upgrade"
	"github.com/tailgate-dev/tailgate/replica"
)

// ShadowHeader marks a shadow request: a copy of a read already answered,
// sent to a replica on probation only to measure it (see
// replica.Probation). Its answer goes nowhere. A server may serve it as
// any read, or at a lower priority.
const ShadowHeader = "Tailgate-Shadow"

// Bounds of a Transport's shadow requests: a replica on probation is
// measured by a trickle (replica.Probation.ShadowRate, one a second by
// default), never by a flood, and a shadow to a replica that hangs ends
// with its cut-off time as a lower bound of its latency.
const (
	maxShadowsInFlight = 4
	shadowTimeout      = time.Second
)

// shadows counts a Transport's shadow requests in flight.
type shadows struct{ inFlight atomic.Int32 }

// shadow copies req, a read just answered through the Transport's own
// steering, to a replica on probation if one is due a shadow
// (replica.Set.Pick decides), in the background. It reads req before
// returning, never after. With no replica on probation it costs one atomic
// load.
func (t *Transport) shadow(req *http.Request) {
	if t.set.OnProbation() == 0 || (req.Body != nil && req.Body != http.NoBody) {
		return
	}
	now := time.Now()
	i, tk, ok := t.set.Pick(now, replica.Attempt{Role: replica.Shadow})
	if !ok {
		return
	}
	if t.shadows.inFlight.Add(1) > maxShadowsInFlight {
		t.shadows.inFlight.Add(-1)
		t.set.Done(tk, replica.Canceled, now) // took no time: no sample
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shadowTimeout)
	out := req.Clone(ctx)
	rewriteURL(out.URL, req.URL, t.targets[i])
	out.Host = ""
	out.Header[ShadowHeader] = shadowValue
	out.Body = nil
	go func() {
		defer t.shadows.inFlight.Add(-1)
		defer cancel()
		t.set.Done(tk, t.sendShadow(out), time.Now())
	}()
}

var shadowValue = []string{"1"}

// sendShadow sends a shadow, reads its whole answer (within the body
// limit) and judges it as an attempt's.
func (t *Transport) sendShadow(req *http.Request) replica.Outcome {
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		err = upgrade.RefuseStray(req, resp)
	}
	if err == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, t.limit))
		resp.Body.Close()
		if err == nil {
			accept := t.accept
			if accept == nil {
				accept = DefaultAccept
			}
			err = accept(resp)
		}
	}
	o, _ := Result{Verdict: err}.ReplicaOutcome()
	return o
}
