package straggler

import (
	"fmt"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/report"
)

// Side is one side of the experiment.
type Side struct {
	Name string `json:"side"`
	load.Summary
	// BackendAttemptsPerRequest is Work.PerRequest: requests the replicas
	// received, by their own counters, per client request.
	BackendAttemptsPerRequest float64  `json:"backendAttemptsPerRequest"`
	Work                      exp.Work `json:"work"`
}

// Report is the straggler experiment's report.
type Report struct {
	exp.Header
	Model      string  `json:"model"`
	Requests   int     `json:"requests"`
	Rate       float64 `json:"rate"`
	HedgeDelay string  `json:"hedgeDelay"`
	Baseline   Side    `json:"baseline"`
	Hedged     Side    `json:"hedged"`
	// P99Ratio is the baseline's p99 over the hedged p99; 0 when either
	// p99 read failed (an infinite p99 has no ratio).
	P99Ratio  float64      `json:"p99Ratio"`
	latencies [2][]float64 // each side's successful latencies in ms, for plots
}

// Section implements Sectioner.
func (r *Report) Section() report.Section {
	b, h := r.latencies[0], r.latencies[1]
	return report.Section{
		Heading: "straggler: a few slow primaries, through the gateway",
		Text: fmt.Sprintf("%d reads at %.0f/s against two replicas (%s), directly with alternating primaries, then through the gateway (hedge delay %s). Attempts and wasted work are the replicas' own counts.",
			r.Requests, r.Rate, r.Model, r.HedgeDelay),
		Plots: []report.Plot{exp.ReadsCDF("The direct curve stalls near the top where the stragglers are; through the gateway, hedges pull that tail in.",
			exp.LatencyCDF("direct", b, r.Baseline.Requests, true),
			exp.LatencyCDF("through the gateway", h, r.Hedged.Requests, false))},
		Tables: []report.Table{{
			Title:   "Latency and work",
			Columns: exp.LatencyColumns("backend attempts / read", "wasted / read"),
			Rows: [][]string{
				exp.LatencyRow("direct", r.Baseline.Summary, exp.F3(r.Baseline.BackendAttemptsPerRequest), exp.F3(float64(r.Baseline.Work.CompletedAfterCancel)/float64(r.Requests))),
				exp.LatencyRow("gateway", r.Hedged.Summary, exp.F3(r.Hedged.BackendAttemptsPerRequest), exp.F3(float64(r.Hedged.Work.CompletedAfterCancel)/float64(r.Requests))),
			},
		}},
	}
}
