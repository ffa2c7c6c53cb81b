package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailgate-dev/tailgate/internal/buildinfo"
)

// This file: series that describe the gateway rather than its traffic,
// for dashboards and alerts to join with and compare against.

// buildInfo is the tailgate_build_info gauge: 1, with the binary's
// version, revision and Go version as labels, to join with other series
// (and to see a fleet's versions during a rollout).
func buildInfo() prometheus.Gauge {
	bi := buildinfo.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "tailgate_build_info",
		Help:        `1, labelled with the Tailgate version ("(devel)" or "unknown" when the binary records none), the VCS revision ("unknown" when not stamped) and the Go version it was built with.`,
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion},
	})
	g.Set(1)
	return g
}
