package lab

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailgate-dev/tailgate/gateway"
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
