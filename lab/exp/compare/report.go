package compare

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/report"
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

// Section implements Sectioner. Its words describe the run as measured:
// the fixtures' latencies only when fixtures ran, and what hedging did to
// the percentiles, whichever way they moved.
func (r *Report) Section() report.Section {
	b, h := r.latencies[0], r.latencies[1]
	heading := "compare: " + r.Config.Primary + " alone, then hedged to " + r.Config.Secondary
	setup := "Your endpoints."
	work := "Their work cannot be seen, only the client's attempts."
	if r.FixtureWork != nil {
		heading = "compare: one slow primary, one fast secondary (fixtures)"
		setup = fmt.Sprintf("Fixtures on 127.0.0.1: the primary answers in %v, the secondary in %v.", fixtureLatency[0], fixtureLatency[1])
		work = fmt.Sprintf("The fixtures started %d requests for the baseline and %d for the hedged run; %d of the hedged run's completed after their client had gone (wasted work).",
			r.FixtureWork.Baseline.Started, r.FixtureWork.Hedged.Started, r.FixtureWork.Hedged.CompletedAfterCancel)
	}
	return report.Section{
		Heading: heading,
		Text: fmt.Sprintf("%d reads at %.0f/s from %s alone, then hedged to %s after %.0f ms. %s %s %s",
			r.Config.Samples, r.Config.Rate, r.Config.Primary, r.Config.Secondary, r.Config.DelayMs, setup, r.outcome(), work),
		Plots: []report.Plot{exp.ReadsCDF("The further left, the faster; where the curves part near the top, the tails differ.",
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

// outcome says in a sentence what hedging did to the tail (p99) and the
// median, and what it cost in attempts: a change within 10% either way is
// called none, since a run of a few hundred reads cannot tell it from
// noise.
func (r *Report) outcome() string {
	base, hedged := r.Baseline.Summary, r.Hedged.Summary
	if base.Succeeded == 0 || hedged.Succeeded == 0 {
		return fmt.Sprintf("Nothing to compare: %d of %d reads succeeded alone, %d of %d hedged.",
			base.Succeeded, base.Requests, hedged.Succeeded, hedged.Requests)
	}
	cost := ""
	if hedged.Requests > 0 {
		cost = fmt.Sprintf(", at %s attempts per read", exp.F2(float64(r.Hedged.Attempts)/float64(hedged.Requests)))
	}
	return fmt.Sprintf("Hedging %s and %s%s.", moved("p99", base.P99Ms, hedged.P99Ms), moved("p50", base.P50Ms, hedged.P50Ms), cost)
}

// moved says how a percentile went from alone (a) to hedged (h), both in
// ms, +Inf where the read at that rank failed.
func moved(name string, a, h float64) string {
	figures := cell(a) + " alone, " + cell(h) + " hedged"
	switch {
	case math.IsInf(a, 1) && math.IsInf(h, 1):
		return "left " + name + " failed (" + figures + ")"
	case math.IsInf(h, 1) || h > 1.1*a:
		return "lengthened " + name + " (" + figures + ")"
	case math.IsInf(a, 1) || h < a/1.1:
		return "shortened " + name + " (" + figures + ")"
	}
	return "left " + name + " about where it was (" + figures + ")"
}

// cell writes a percentile for a sentence: "5.0 ms", or "failed" as the
// table says (exp.Cell).
func cell(x float64) string {
	if math.IsInf(x, 1) {
		return "failed"
	}
	return exp.Cell(x) + " ms"
}
