package fanout

import (
	"fmt"
	"strconv"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/report"
)

// Section implements Sectioner.
func (r *Report) Section() report.Section {
	var series []report.Series
	rows := [][]string{{"predicted: wait for all", exp.F1(r.WaitForAll.P50Ms), "", exp.F1(r.WaitForAll.P99Ms), exp.F1(r.WaitForAll.P999Ms), "", "0.00", "0.00"}}
	for i, p := range r.Policies {
		series = append(series, exp.LatencyCDF(p.Policy, p.latencies, p.Requests, i == 0))
		rows = append(rows, exp.LatencyRow(p.Policy, p.Summary, exp.F2(p.ExtraAttemptsPct), exp.F2(p.PartialShare)))
	}
	return report.Section{
		Heading: fmt.Sprintf("fanout: one request, %d shards", r.Shards),
		Text: fmt.Sprintf("%d requests at %.0f/s, each sent to %d shards of two replicas (%s; one shard: p50 %.1f ms, p99 %.1f ms). "+
			"Waiting for all of them, a request is as slow as its slowest shard: the arithmetic predicts p50 %.1f ms and p99 %.1f ms. "+
			"Then the remedies one by one: a hedge to the other replica after %.1f ms (the shard's p95), answering with %d of %d shards (good enough, marked partial), and both.",
			r.Requests, r.Rate, r.Shards, r.Model, r.PerShard.P50Ms, r.PerShard.P99Ms, r.WaitForAll.P50Ms, r.WaitForAll.P99Ms, r.HedgeDelayMs, r.Need, r.Shards),
		Plots: []report.Plot{{
			Title: "Request latency CDF", XLabel: "latency (ms, log scale)", YLabel: "fraction of requests", LogX: true,
			Series: series,
			Notes: []report.Note{
				{X: r.WaitForAll.P50Ms, Y: 0.5, Text: "predicted p50"},
				{X: r.WaitForAll.P99Ms, Y: 0.99, Text: "predicted p99"},
			},
			Caption: "The dashed curve waits for every shard; hedging pulls in its tail, good-enough results its body, and both together the two.",
		}},
		Tables: []report.Table{{
			Title:   "Latency, duplicate work and partial results",
			Columns: exp.LatencyColumns("extra attempts %", "partial share"),
			Rows:    rows,
		}, r.crossCheckTable()},
	}
}

func (r *Report) crossCheckTable() report.Table {
	t := report.Table{
		Title: fmt.Sprintf("Cross-check with %d simulated requests per policy: agreement means the simulated quantile lies within the loopback sample's distribution-free confidence interval (%.0f%% for all %d checks together), widened by %d ms + %.0f%%",
			r.simRequests(), 100*crossCheckConfidence, len(r.CrossCheck), crossCheckSlackMs, 100*crossCheckSlackFraction),
		Columns: []string{"policy", "quantile", "loopback ms", "simulated ms", "agreement from ms", "to ms", "agrees"},
	}
	bound := func(v *float64) string {
		if v == nil {
			return "unbounded"
		}
		return exp.F1(*v)
	}
	for _, c := range r.CrossCheck {
		loop := exp.F1(c.LoopbackMs)
		if c.LoopbackMs < 0 {
			loop = "failed"
		}
		t.Rows = append(t.Rows, []string{c.Policy, strconv.FormatFloat(c.Quantile, 'g', -1, 64), loop, exp.F1(c.SimulatedMs), bound(c.LowMs), bound(c.HighMs), yesNo(c.Agrees)})
	}
	return t
}

func (r *Report) simRequests() int {
	if len(r.Simulated) == 0 {
		return 0
	}
	return r.Simulated[0].Requests
}
