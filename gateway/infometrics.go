package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailgate-dev/tailgate/hedge"
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

// registerBudget adds the hedge budget's settings, as the engine uses
// them (in tied mode, the budget of second copies): so that a dashboard
// can draw the hedge share against its limit, and an alert fire as it
// comes near, without copying the flags into the rules.
func (m *metrics) registerBudget(b *hedge.Budget) {
	m.budgetFraction = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tailgate_hedge_budget_fraction",
		Help: "Hedge credits earned per admitted request (-hedge-fraction): over any interval, hedges <= burst + fraction × requests.",
	})
	m.budgetBurst = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tailgate_hedge_budget_burst",
		Help: "Most hedge credits the budget holds (-hedge-burst).",
	})
	m.budgetChanged(b)
	m.registry.MustRegister(m.budgetFraction, m.budgetBurst)
}

// budgetChanged sets the budget's gauges to b's rates (after a reload).
func (m *metrics) budgetChanged(b *hedge.Budget) {
	m.budgetFraction.Set(b.Fraction())
	m.budgetBurst.Set(b.Burst())
}
