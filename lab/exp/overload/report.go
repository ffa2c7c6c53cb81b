package overload

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/report"
)

// condition names how hedging is configured for a run.
type condition string

// The conditions compared.
const (
	noHedging        condition = "no hedging"
	hedgingBounded   condition = "hedging, budget and gate on"
	hedgingUnbounded condition = "hedging, budget and gate off"
	// hedgingUnboundedLow is hedgingUnbounded against fixtures that queue
	// hedges behind primaries (Config.HedgePriority).
	hedgingUnboundedLow condition = "hedging, budget and gate off, hedges queued last"
)

// Point is one condition at one offered load.
type Point struct {
	Condition condition `json:"condition"`
	// OfferedRate is the nominal offered rate, per second: the rate the
	// arrivals were drawn at (NominalPerSec, kept under its old name).
	// What was offered is OfferedPerSec.
	OfferedRate float64 `json:"offeredRate"`
	// NominalPerSec is the rate the arrivals were drawn at.
	NominalPerSec float64 `json:"nominalPerSec"`
	// OfferedPerSec is the realised offered rate: Arrivals over the
	// duration. It differs from NominalPerSec by chance, as a Poisson
	// process's count does from its mean.
	OfferedPerSec float64 `json:"offeredPerSec"`
	// Arrivals counts the reads offered: the arrivals of the Poisson
	// process within the duration.
	Arrivals int `json:"arrivals"`
	// ArrivalSeed is the seed of this load's arrivals.
	ArrivalSeed  uint64  `json:"arrivalSeed"`
	OfferedShare float64 `json:"offeredShareOfCapacity"`
	load.Summary
	// AttemptsPerRequest is requests the fixtures received per read
	// offered: above 1, the hedges' duplicate load.
	AttemptsPerRequest float64  `json:"attemptsPerRequest"`
	Work               exp.Work `json:"work"`
	Hedges             int      `json:"hedges"`
	Suppressed         int      `json:"hedgesSuppressed"`
	// ReceiptsMissing counts reads sent whose receipt had not arrived when
	// the point was counted; their attempts are missing from
	// Work.ClientAttempts and Hedges. Normally zero.
	ReceiptsMissing int `json:"receiptsMissing,omitempty"`
	// Gate is the overload gate's state as the load ended ("open", or
	// "shut: " and its evidence); absent where there is no gate.
	Gate string `json:"gate,omitempty"`
}

// Report is the overload experiment's report.
type Report struct {
	exp.Header
	Capacity float64 `json:"capacityPerSec"`
	DelayMs  float64 `json:"delayMs"`
	// DurationMs is each load's duration.
	DurationMs float64 `json:"durationMs"`
	Points     []Point `json:"points"`
}

// Section implements Sectioner.
func (r *Report) Section() report.Section {
	by := map[condition]*[3]report.Series{}
	var order []condition
	failedP99 := 0
	for _, p := range r.Points {
		s, ok := by[p.Condition]
		if !ok {
			s = &[3]report.Series{}
			for i := range s {
				s[i].Name, s[i].Marker, s[i].Dashed = string(p.Condition), true, p.Condition == noHedging
			}
			by[p.Condition] = s
			order = append(order, p.Condition)
		}
		s[0].Points = append(s[0].Points, report.Point{X: p.OfferedRate, Y: p.AttemptsPerRequest})
		s[1].Points = append(s[1].Points, report.Point{X: p.OfferedRate, Y: p.GoodputPerSec})
		if exp.Drawable(p.P99Ms) && p.P99Ms > 0 {
			s[2].Points = append(s[2].Points, report.Point{X: p.OfferedRate, Y: p.P99Ms})
		} else if math.IsInf(p.P99Ms, 1) {
			failedP99++
		}
	}
	var amp, good, p99 []report.Series
	for _, c := range order {
		amp, good, p99 = append(amp, by[c][0]), append(good, by[c][1]), append(p99, by[c][2])
	}
	var rows [][]string
	for _, p := range r.Points {
		rows = append(rows, []string{string(p.Condition), exp.F1(p.NominalPerSec), exp.F1(p.OfferedPerSec), exp.F2(p.AttemptsPerRequest), exp.F1(p.GoodputPerSec), exp.Cell(p.P99Ms),
			strconv.Itoa(p.Failed + p.Dropped), strconv.Itoa(p.Hedges), strconv.Itoa(p.Suppressed)})
	}
	cap := []report.Note{{X: r.Capacity, Y: 1, Text: "capacity"}}
	p99Caption := "Queueing delay grows past capacity for every condition; extra attempts lengthen the queues. A failed read counts as infinitely slow."
	if failedP99 > 0 {
		p99Caption += fmt.Sprintf(" %d of the points had more than 1%% of reads fail, so their p99 read never succeeded: they are off the top of the plot.", failedP99)
	}
	return report.Section{
		Heading: "overload: hedging past capacity",
		Text: fmt.Sprintf("Open-loop load from below to above the replicas' capacity (%.0f reads/s, FIFO queues), read without hedging, with hedging bounded by the budget and gate, and with hedging unbounded (hedge delay %.0f ms).",
			r.Capacity, r.DelayMs),
		Plots: []report.Plot{
			{Title: "Amplification: attempts per read", XLabel: "nominal offered load (reads/s)", YLabel: "backend attempts per read", Series: amp, Notes: cap,
				Caption: "Unbounded hedging multiplies the load exactly when the queues are full (a hedge storm); the budget and gate keep it near 1."},
			{Title: "Goodput", XLabel: "nominal offered load (reads/s)", YLabel: "successful reads/s", Series: good,
				Caption: "Past capacity, what the duplicate load costs shows here: fewer reads succeed in time."},
			{Title: "p99 of all reads", XLabel: "nominal offered load (reads/s)", YLabel: "p99 (ms, log scale)", LogY: true, Series: p99,
				Caption: p99Caption},
		},
		Tables: []report.Table{{
			Title:   "Every point",
			Columns: []string{"condition", "nominal/s", "offered/s", "attempts/read", "goodput/s", "p99 ms", "failed", "hedges", "suppressed"},
			Rows:    rows,
		}},
	}
}
