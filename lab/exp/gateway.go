package exp

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/h1server"
)

// GatewayAttempts reads, from the gateway's /metrics series, the backend
// attempts it has started: primaries and hedges. The lab reconciles them
// with what its replicas counted.
func GatewayAttempts(g *gateway.Gateway) (primaries, hedges int64) {
	c := counters(g.Registry(), "tailgate_attempts_total", "role")
	return int64(c["primary"]), int64(c["hedge"])
}

// GatewayShadows reads the shadow requests the gateway has sent (skipped
// ones not included): requests the replicas received that no client asked
// for.
func GatewayShadows(g *gateway.Gateway) int64 {
	n := 0.0
	for outcome, v := range counters(g.Registry(), "tailgate_shadow_requests_total", "outcome") {
		if outcome != "skipped" {
			n += v
		}
	}
	return int64(n)
}

// counters returns the counter series named name by the value of label.
func counters(g prometheus.Gatherer, name, label string) map[string]float64 {
	out := map[string]float64{}
	mfs, err := g.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// ServeGateway serves g on a loopback listener, for experiments that read
// through the real gateway as a client would. It returns the gateway's
// base URL and a function that stops serving.
func ServeGateway(g *gateway.Gateway) (url string, stop func(), err error) {
	srv := h1server.Like(g.Server(gateway.ServerConfig{}), g) // as tailgate serve serves plain-HTTP clients
	if url, err = serveLoopback(srv); err != nil {
		return "", nil, err
	}
	return url, func() { srv.Close() }, nil
}

// GatewayClient is the client that reads through a gateway: the hedging
// engine's base transport, a timeout, and no redirects followed.
func GatewayClient(timeout time.Duration) *http.Client {
	return &http.Client{Transport: hedge.NewBaseTransport(), Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return hedge.ErrRedirectRefused }}
}

// HedgeDelay names g's hedge delay as reports give it: a duration, or
// "adaptive p90" and the like.
func HedgeDelay(g *gateway.Gateway) string {
	return PolicyDelay(g.Classes().Policy())
}

// PolicyDelay names p's hedge delay as reports give it: a duration, or
// "adaptive p90" and the like (the quantile that follows the budget, when
// p leaves it zero).
func PolicyDelay(p hedge.Policy) string {
	if p.Delay > 0 {
		return p.Delay.String()
	}
	q := p.Adaptive.Quantile
	if q == 0 {
		q = min(max(1-p.Budget.Fraction(), 0.5), 0.999)
	}
	return "adaptive p" + strconv.FormatFloat(100*q, 'g', 4, 64)
}
