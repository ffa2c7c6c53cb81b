package classes

import (
	"fmt"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/report"
)

// Report is the classes experiment's report.
type Report struct {
	exp.Header
	Config     Config      `json:"config"`
	Conditions []Condition `json:"conditions"`
}

// Condition is one way of reading: its kinds' latencies and the work it
// cost.
type Condition struct {
	Name string       `json:"condition"`
	All  load.Summary `json:"all"`
	// Endpoints are /item's and /search's.
	Endpoints []Endpoint `json:"endpoints"`
	// AttemptsPerRead is Work.PerRequest: what the replicas received, by
	// their own counts, per read.
	AttemptsPerRead float64  `json:"attemptsPerRead"`
	Work            exp.Work `json:"work"`
}

// Endpoint is one kind of read's latencies.
type Endpoint struct {
	Path string `json:"path"`
	load.Summary
	latencies []float64
}

// Lines returns the report as JSON lines: one per condition and endpoint.
func (r *Report) Lines() []any {
	var out []any
	for _, c := range r.Conditions {
		for _, e := range c.Endpoints {
			out = append(out, struct {
				Experiment      string  `json:"experiment"`
				Condition       string  `json:"condition"`
				Path            string  `json:"path"`
				P50Ms           float64 `json:"p50Ms"`
				P99Ms           float64 `json:"p99Ms"`
				P999Ms          float64 `json:"p999Ms"`
				AttemptsPerRead float64 `json:"attemptsPerRead"`
			}{"classes", c.Name, e.Path, e.P50Ms, e.P99Ms, e.P999Ms, c.AttemptsPerRead})
		}
	}
	return out
}

// Section implements exp.Sectioner: a table of every condition, and a
// plot per kind of read.
func (r *Report) Section() report.Section {
	cfg := r.Config
	s := report.Section{
		Heading: "classes: two kinds of read, each hedged after its own percentile",
		Text: fmt.Sprintf("%d reads at %.0f/s over two replicas: %.0f%% GET /item (%v; each replica its own %.0f%% of ids at %v), %.0f%% GET /search (%v; its own %.0f%% at %v). "+
			"The gateway with one class for both, with a class per kind (its default), and with a route per kind and fixed delays (%v, %v), beside a per-endpoint p90 hedger and one replica read directly.",
			cfg.Reads, cfg.Rate, 100*(1-cfg.SearchShare), cfg.Item.Fast, 100*cfg.Item.SlowShare, cfg.Item.Slow,
			100*cfg.SearchShare, cfg.Search.Fast, 100*cfg.Search.SlowShare, cfg.Search.Slow, cfg.ItemDelay, cfg.SearchDelay),
	}
	t := report.Table{Title: "p99 by kind of read, and the work", Columns: []string{"condition", "/item p50", "/item p99", "/search p50", "/search p99", "attempts / read"}}
	for _, c := range r.Conditions {
		t.Rows = append(t.Rows, []string{c.Name, exp.Cell(c.Endpoints[0].P50Ms), exp.Cell(c.Endpoints[0].P99Ms),
			exp.Cell(c.Endpoints[1].P50Ms), exp.Cell(c.Endpoints[1].P99Ms), exp.F3(c.AttemptsPerRead)})
	}
	s.Tables = []report.Table{t}
	for k, path := range endpoints {
		var series []report.Series
		for i, c := range r.Conditions {
			e := c.Endpoints[k]
			series = append(series, exp.LatencyCDF(c.Name, e.latencies, e.Requests, i == 0))
		}
		s.Plots = append(s.Plots, exp.ReadsCDF("GET "+path+": the curves that reach the top soonest hedged this kind after its own percentile.", series...))
	}
	return s
}
