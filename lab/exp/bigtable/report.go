package bigtable

import (
	"fmt"
	"strconv"

	"github.com/tailgate-dev/tailgate/lab/exp"
	fanoutexp "github.com/tailgate-dev/tailgate/lab/exp/fanout"
	"github.com/tailgate-dev/tailgate/lab/report"
)

// Section implements Sectioner.
func (r *Report) Section() report.Section {
	b := exp.LatencyCDF(r.Baseline.Label, r.Baseline.latencies, r.Baseline.Requests, true)
	h := exp.LatencyCDF(r.Hedged.Label, r.Hedged.latencies, r.Hedged.Requests, false)
	rank := ""
	if r.Operations < 1000 {
		rank = fmt.Sprintf(" With %d operations, p99.9 is the slowest of them (nearest rank): whether it is a stall depends on the seed; run 1,000 or more for a p99.9 that is one.", r.Operations)
	}
	return report.Section{
		Heading: fmt.Sprintf("bigtable: %d keys from %d servers", r.Keys, r.Servers),
		Text: fmt.Sprintf("The shape of the paper's Bigtable benchmark, on loopback: %d operations at %.0f/s, each reading %d keys spread over %d servers, one request of %d keys per server (%s per key). "+
			"Each key is also on the server half way round the ring, which a request is hedged to after %.0f ms, within a budget of %.0f%% extra requests. "+
			"The paper measured p99.9 %d ms without hedging and %d ms with, for %d%% more requests; these figures are this machine's own.%s",
			r.Operations, r.Rate, r.Keys, r.Servers, r.Keys/r.Servers, r.KeyModel, r.HedgeAfterMs, 100*r.BudgetFraction,
			paperP999BeforeMs, paperP999AfterMs, paperExtraPct, rank),
		Plots: []report.Plot{{
			Title: "Operation latency CDF", XLabel: "latency (ms, log scale)", YLabel: "fraction of operations", LogX: true,
			Series:  []report.Series{b, h},
			Caption: "Without hedging, the operations that meet a stalled server wait for it; with hedging, the replica answers instead.",
		}},
		Tables: []report.Table{{
			Title:   "Latency and extra requests",
			Columns: exp.LatencyColumns("extra requests %"),
			Rows: [][]string{
				exp.LatencyRow(r.Baseline.Label, r.Baseline.Summary, exp.F2(r.Baseline.ExtraRequestsPct)),
				exp.LatencyRow(r.Hedged.Label, r.Hedged.Summary, exp.F2(r.Hedged.ExtraRequestsPct)),
				{"paper: no hedging", "", "", "", strconv.Itoa(paperP999BeforeMs), "", ""},
				{"paper: hedge after 10ms", "", "", "", strconv.Itoa(paperP999AfterMs), "", strconv.Itoa(paperExtraPct)},
			},
		}},
	}
}

// Section implements Sectioner.
func (r *SimReport) Section() report.Section {
	row := func(p fanoutexp.Simulated) []string {
		return []string{p.Policy, exp.F1(p.P50Ms), exp.F1(p.P90Ms), exp.F1(p.P99Ms), exp.F1(p.P999Ms), exp.F1(p.MaxMs), exp.F2(p.ExtraAttemptsPct)}
	}
	return report.Section{
		Heading: fmt.Sprintf("bigtable, simulated: %d keys from %d servers, %d operations", r.Keys, r.Servers, r.Operations),
		Text: fmt.Sprintf("The bigtable experiment against virtual servers: each operation reads %d keys from each of %d servers (%s per key), "+
			"hedged after %.0f ms within a budget of %.0f%% extra requests. The paper measured p99.9 %d ms without hedging and %d ms with, for %d%% more requests.",
			r.Keys/r.Servers, r.Servers, r.KeyModel, r.HedgeAfterMs, 100*r.BudgetFraction, paperP999BeforeMs, paperP999AfterMs, paperExtraPct),
		Tables: []report.Table{{
			Title:   "Latency and extra requests",
			Columns: exp.LatencyColumns("extra requests %"),
			Rows: [][]string{row(r.Baseline), row(r.Hedged),
				{"paper: no hedging", "", "", "", strconv.Itoa(paperP999BeforeMs), "", ""},
				{"paper: hedge after 10ms", "", "", "", strconv.Itoa(paperP999AfterMs), "", strconv.Itoa(paperExtraPct)}},
		}},
	}
}
