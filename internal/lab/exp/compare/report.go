package compare

import (
	"fmt"
	"strconv"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/lab/exp"
	"github.com/tailgate-dev/tailgate/internal/lab/load"
	"github.com/tailgate-dev/tailgate/internal/lab/report"
)

// Side is one side of the comparison.
type Side struct {
	load.Summary
	// Attempts counts attempts the client launched.
	Attempts int `json:"attempts"`
	// Refused counts attempts whose answer failed the acceptance check.
	Refused int `json:"refusedAttempts"`
}

// Report is the compare experiment's JSON report.
type Report struct {
	exp.Header
	Config Setup `json:"config"`
	// BaselineCalls and HedgedCalls count the calls each side launched,
	// hedges included: HedgedCalls/BaselineCalls is the call ratio, the
	// duplicate work hedging cost the client (about 2 when every read
	// hedges, as with the default 80ms primary and a 10ms delay).
	BaselineCalls int `json:"baselineCalls"`
	HedgedCalls   int `json:"hedgedCalls"`
	// FixtureWork is the work the fixtures did, by their own counters; null
	// for external endpoints, whose work cannot be seen.
	FixtureWork *FixtureWork `json:"fixtureWork"`
	Baseline    Side         `json:"baseline"`
	Hedged      Side         `json:"hedged"`
	Receipts    struct {
		Baseline []hedge.Receipt `json:"baseline"`
		Hedged   []hedge.Receipt `json:"hedged"`
	} `json:"receipts"`
	latencies [2][]float64 // each side's successful latencies in ms, for plots
}

// Setup is the configuration as reported.
type Setup struct {
	Samples   int     `json:"samples"`
	DelayMs   float64 `json:"delayMs"`
	Rate      float64 `json:"rate"`
	Primary   string  `json:"primary"`
	Secondary string  `json:"secondary"`
	Fixtures  bool    `json:"fixtures"`
	Policy    string  `json:"policy"`
}

// FixtureWork is the fixtures' work for each side.
type FixtureWork struct {
	Baseline exp.Work `json:"baseline"`
	Hedged   exp.Work `json:"hedged"`
}

// Section implements Sectioner.
func (r *Report) Section() report.Section {
	b, h := r.latencies[0], r.latencies[1]
	work := "External endpoints: their work cannot be seen, only the client's attempts."
	if r.FixtureWork != nil {
		work = fmt.Sprintf("The fixtures started %d requests for the baseline and %d for the hedged run; %d of the hedged run's completed after their client had gone (wasted work).",
			r.FixtureWork.Baseline.Started, r.FixtureWork.Hedged.Started, r.FixtureWork.Hedged.CompletedAfterCancel)
	}
	return report.Section{
		Heading: "compare: one slow primary, one fast secondary",
		Text: fmt.Sprintf("%d reads at %.0f/s from %s alone, then hedged to %s after %.0f ms. %s",
			r.Config.Samples, r.Config.Rate, r.Config.Primary, r.Config.Secondary, r.Config.DelayMs, work),
		Plots: []report.Plot{exp.ReadsCDF("The further left, the faster; the gap between the curves near the top is the tail hedging removes.",
			exp.LatencyCDF("baseline (primary only)", b, r.Baseline.Requests, true),
			exp.LatencyCDF("hedged", h, r.Hedged.Requests, false))},
		Tables: []report.Table{{
			Title:   "Latency and attempts",
			Columns: exp.LatencyColumns("attempts", "refused"),
			Rows: [][]string{
				exp.LatencyRow("baseline", r.Baseline.Summary, strconv.Itoa(r.Baseline.Attempts), strconv.Itoa(r.Baseline.Refused)),
				exp.LatencyRow("hedged", r.Hedged.Summary, strconv.Itoa(r.Hedged.Attempts), strconv.Itoa(r.Hedged.Refused)),
			},
		}},
	}
}
