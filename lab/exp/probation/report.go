package probation

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/report"
	"github.com/tailgate-dev/tailgate/replica"
)

// The two runs of the probation experiment.
const (
	withProbation    = "probation"
	withoutProbation = "no probation"
)

// runSetup is the probation experiment's configuration with its
// defaults filled in, as the gateway applies them.
type runSetup struct {
	DurationMs float64 `json:"durationMs"`
	Rate       float64 `json:"rate"`
	// Reads is how many reads each run offers: the Poisson arrivals of
	// ArrivalSeed within Duration, the same in both runs.
	Reads    int    `json:"readsPerRun"`
	Replicas int    `json:"replicas"`
	Model    string `json:"model"`
	// DegradedReplica is the replica that degrades, DegradedModel its
	// model (a phase, in time since the fixture started).
	DegradedReplica string  `json:"degradedReplica"`
	DegradedModel   string  `json:"degradedModel"`
	DegradeFromMs   float64 `json:"degradeFromMs"`
	DegradeToMs     float64 `json:"degradeToMs"`
	Factor          float64 `json:"factor"`
	// HedgeDelay is the gateway's hedge delay ("adaptive p95", or a
	// duration), MaxAttempts its attempts per read.
	HedgeDelay  string  `json:"hedgeDelay"`
	MaxAttempts int     `json:"maxAttempts"`
	TimeoutMs   float64 `json:"timeoutMs"`
	// Probation is the probation of the run with it, as the replica set
	// applies it.
	Probation     settings `json:"probation"`
	Seed          uint64   `json:"seed"`
	ArrivalSeed   uint64   `json:"arrivalSeed"`
	FixtureSeeds  []uint64 `json:"fixtureSeeds"`
	PickSeed      uint64   `json:"pickSeed"`
	ReplicaNames  []string `json:"replicaNames"`
	DegradedIndex int      `json:"degradedIndex"`
}

// settings are the probation settings in effect.
type settings struct {
	Factor         float64 `json:"factor"`
	ExitFactor     float64 `json:"exitFactor"`
	WindowMs       float64 `json:"windowMs"`
	MinSamples     int     `json:"minSamples"`
	MaxShare       float64 `json:"maxShare"`
	MaxOnProbation int     `json:"maxOnProbation"`
	ShadowRate     float64 `json:"shadowRate"`
}

// transition is a replica's move from one probation status to
// another, in time since the run started. The times of moves on and off
// probation and of the start of a divergence are the replica set's own
// (its status's since); the others are when a poll (every 100ms) saw them.
type transition struct {
	AtMs    float64                 `json:"atMs"`
	Replica string                  `json:"replica"`
	From    replica.ProbationStatus `json:"from"`
	To      replica.ProbationStatus `json:"to"`
	Reason  string                  `json:"reason,omitempty"`
	index   int
}

// replicaSecond is what one replica received in one second, by
// its own count of arrivals, and its probation status.
type replicaSecond struct {
	Name string `json:"name"`
	// Primaries are attempts without a mark, Hedges attempts marked as
	// hedges (hedges and retries), Shadows shadow requests.
	Primaries int `json:"primaries"`
	Hedges    int `json:"hedges"`
	Shadows   int `json:"shadows"`
	// Status is the replica's probation status at the end of the second,
	// OnProbationMs how much of the second it spent on probation (out of
	// the rotation); absent without probation.
	Status        string  `json:"status,omitempty"`
	OnProbationMs float64 `json:"onProbationMs"`
}

// Second is one second of a run: the reads scheduled in it and
// what the replicas received in it.
type Second struct {
	// Second is the second's start, in seconds since the run started.
	Second int `json:"second"`
	// Reads counts the reads scheduled in the second, Failed those that
	// failed or were dropped.
	Reads  int `json:"reads"`
	Failed int `json:"failed"`
	// P50Ms and P99Ms are the reads' percentiles, from their scheduled
	// times; a failed read counts as infinitely slow, and a percentile
	// that falls on one (or a second without reads) is null.
	P50Ms *float64 `json:"p50Ms"`
	P99Ms *float64 `json:"p99Ms"`
	// Degraded says that the degraded replica was slow during some of the
	// second; OnProbation that it was on probation during some of it.
	Degraded    bool `json:"degraded"`
	OnProbation bool `json:"onProbation"`
	// DegradedAttempts and DegradedShadows are what the degraded replica
	// received: primaries and hedges, and shadows.
	DegradedAttempts int             `json:"degradedAttempts"`
	DegradedShadows  int             `json:"degradedShadows"`
	Replicas         []replicaSecond `json:"replicas"`
	p99              float64
}

// replicaWork is what one replica received in a run.
type replicaWork struct {
	Name      string `json:"name"`
	Primaries int    `json:"primaries"`
	Hedges    int    `json:"hedges"`
	Shadows   int    `json:"shadows"`
	// DegradedPrimaries are the primaries it received while the degraded
	// replica was slow.
	DegradedPrimaries int `json:"primariesDuringDegradation"`
	// Entries and Exits count its moves on and off probation.
	Entries uint64 `json:"entries"`
	Exits   uint64 `json:"exits"`
}

// Result is one run: with or without probation.
type Result struct {
	Condition string `json:"condition"`
	Probation bool   `json:"probation"`
	// Summary is over every read of the run.
	load.Summary
	// DuringDegradation is over the reads scheduled while the degraded
	// replica was slow.
	DuringDegradation load.Summary `json:"duringDegradation"`
	// DegradedFromMs and DegradedToMs are the degradation in time since
	// this run started: the phase's bounds less the time from the
	// fixture's start to the run's.
	DegradedFromMs float64 `json:"degradedFromMs"`
	DegradedToMs   float64 `json:"degradedToMs"`
	// Primaries and Hedges are the gateway's backend attempts;
	// ExtraAttemptsPct is Hedges in % of the reads sent: the duplicate
	// work hedging paid. Shadows counts the shadow requests the gateway
	// sent, ShadowsPct in % of the reads sent.
	Primaries        int64   `json:"primaries"`
	Hedges           int64   `json:"hedges"`
	ExtraAttemptsPct float64 `json:"extraAttemptsPct"`
	Shadows          int64   `json:"shadows"`
	ShadowsPct       float64 `json:"shadowsPct"`
	// ExtraAttemptsPctDuring is the hedges the replicas received while
	// the degraded replica was slow, in % of the reads scheduled then.
	ExtraAttemptsPctDuring float64 `json:"extraAttemptsPctDuringDegradation"`
	// DegradedShadows counts the shadows the degraded replica received;
	// DegradedAttemptsDuring the primaries and hedges it received while
	// slow, DegradedPrimarySharePct its share of all primaries then, and
	// PrimarySharePctBefore its share before the degradation.
	DegradedShadows         int     `json:"degradedShadows"`
	DegradedAttemptsDuring  int     `json:"degradedAttemptsDuringDegradation"`
	DegradedPrimarySharePct float64 `json:"degradedPrimarySharePct"`
	PrimarySharePctBefore   float64 `json:"degradedPrimarySharePctBefore"`
	// EnteredAtMs is when the degraded replica first went on probation,
	// ExitedAtMs when it next came off, in time since the run started;
	// TimeToEnterMs and TimeToExitMs count from the start and the end of
	// the degradation. Null when it did not happen.
	EnteredAtMs   *float64 `json:"enteredProbationAtMs"`
	ExitedAtMs    *float64 `json:"exitedProbationAtMs"`
	TimeToEnterMs *float64 `json:"timeToEnterMs"`
	TimeToExitMs  *float64 `json:"timeToExitMs"`
	// OnProbationMs is how long the degraded replica was on probation;
	// OtherEntries counts the other replicas' moves on probation.
	OnProbationMs float64 `json:"onProbationMs"`
	OtherEntries  uint64  `json:"otherEntries"`
	// Received is what each replica received, by its own count.
	Received []replicaWork `json:"received"`
	// Unreconciled is the gateway's attempts less what the replicas
	// received (attempts cancelled before they were sent never arrive),
	// UnreconciledShadows the same for shadows.
	Unreconciled        int64        `json:"unreconciled"`
	UnreconciledShadows int64        `json:"unreconciledShadows"`
	Transitions         []transition `json:"transitions"`
	// Seconds is the timeline, one entry per second of the run.
	Seconds []Second `json:"seconds,omitempty"`
}

// Report is the probation experiment's report.
type Report struct {
	exp.Header
	Config runSetup `json:"config"`
	// Runs are the run without probation, then the one with it.
	Runs []Result `json:"runs"`
}

// Section implements Sectioner: the p99 timeline of both runs with the
// degradation and the probation marked, the degraded replica's attempts
// per second, and a summary table.
func (r *Report) Section() report.Section {
	c := r.Config
	top := 0.0
	var p99s, attempts []report.Series
	failedSeconds := 0
	for _, run := range r.Runs {
		s := report.Series{Name: run.Condition, Dashed: !run.Probation, Marker: true}
		a := report.Series{Name: run.Condition + ": primaries and hedges", Dashed: !run.Probation}
		for _, sec := range run.Seconds {
			x := float64(sec.Second) + 0.5
			if sec.P99Ms != nil && *sec.P99Ms > 0 {
				s.Points = append(s.Points, report.Point{X: x, Y: *sec.P99Ms})
				top = max(top, *sec.P99Ms)
			} else if math.IsInf(sec.p99, 1) || sec.Reads > 0 && sec.P99Ms == nil {
				failedSeconds++
			}
			a.Points = append(a.Points, report.Point{X: x, Y: float64(sec.DegradedAttempts)})
		}
		p99s = append(p99s, s)
		attempts = append(attempts, a)
		if run.Probation {
			sh := report.Series{Name: run.Condition + ": shadows"}
			for _, sec := range run.Seconds {
				sh.Points = append(sh.Points, report.Point{X: float64(sec.Second) + 0.5, Y: float64(sec.DegradedShadows)})
			}
			attempts = append(attempts, sh)
		}
	}
	if top <= 0 {
		top = 1
	}
	// Bars above the data mark the degradation and each stay on probation.
	var notes []report.Note
	var first *Result
	if len(r.Runs) > 0 {
		first = &r.Runs[0]
	}
	var on *Result
	for i := range r.Runs {
		if r.Runs[i].Probation {
			on = &r.Runs[i]
		}
	}
	if first != nil {
		y := top * 2.5
		p99s = append(p99s, report.Series{Name: c.DegradedReplica + " degraded", Points: []report.Point{{X: first.DegradedFromMs / 1000, Y: y}, {X: first.DegradedToMs / 1000, Y: y}}})
		notes = append(notes, report.Note{X: first.DegradedFromMs / 1000, Y: y, Text: fmt.Sprintf("%s %g× slower", c.DegradedReplica, c.Factor)})
	}
	if on != nil {
		end := float64(len(on.Seconds))
		for k, iv := range intervals(on, c.DegradedReplica, end*1000) {
			y := top * 1.6
			name := c.DegradedReplica + " on probation"
			if k > 0 {
				name += " (" + strconv.Itoa(k+1) + ")"
			}
			p99s = append(p99s, report.Series{Name: name, Points: []report.Point{{X: iv[0] / 1000, Y: y}, {X: iv[1] / 1000, Y: y}}})
			if k == 0 {
				notes = append(notes, report.Note{X: iv[0] / 1000, Y: y, Text: "on probation"})
			}
		}
	}
	caption := "Each point is the p99 of the reads scheduled in that second, from their scheduled times; the bars above mark when the degraded replica was slow and when it was on probation (run with probation)."
	if failedSeconds > 0 {
		caption += fmt.Sprintf(" In %d seconds more than 1%% of the reads failed, so their p99 read never succeeded: they are not drawn.", failedSeconds)
	}
	opt := func(x *float64, base float64) string {
		if x == nil {
			return "never"
		}
		return fmt.Sprintf("%.1f s (+%.1f s)", *x/1000, (*x-base)/1000)
	}
	var lat, cost, trows [][]string
	for _, run := range r.Runs {
		enter, exit := "—", "—"
		if run.Probation {
			enter, exit = opt(run.EnteredAtMs, run.DegradedFromMs), opt(run.ExitedAtMs, run.DegradedToMs)
		}
		lat = append(lat, []string{run.Condition, exp.Cell(run.P50Ms), exp.Cell(run.P99Ms), exp.Cell(run.P999Ms), exp.Cell(run.DuringDegradation.P50Ms), exp.Cell(run.DuringDegradation.P99Ms),
			exp.Cell(run.DuringDegradation.P999Ms), strconv.Itoa(run.Failed + run.Dropped)})
		cost = append(cost, []string{run.Condition, exp.F2(run.ExtraAttemptsPct), exp.F2(run.ExtraAttemptsPctDuring), strconv.FormatInt(run.Shadows, 10),
			exp.F1(run.PrimarySharePctBefore), exp.F1(run.DegradedPrimarySharePct), strconv.Itoa(run.DegradedAttemptsDuring), enter, exit})
		for _, t := range run.Transitions {
			trows = append(trows, []string{run.Condition, exp.F1(t.AtMs / 1000), t.Replica, t.From.String() + " → " + t.To.String(), t.Reason})
		}
	}
	tables := []report.Table{{
		Title:   "Latency, ms (\"slow\": over the reads scheduled while " + c.DegradedReplica + " was slow)",
		Columns: []string{"run", "p50", "p99", "p99.9", "p50 slow", "p99 slow", "p99.9 slow", "failed"},
		Rows:    lat,
	}, {
		Title: "Cost and probation: hedges in % of the reads, overall and while " + c.DegradedReplica + " was slow; shadows sent; " + c.DegradedReplica +
			"'s share of the primaries before and while slow, and the attempts it got while slow; when it went on and came off probation (s since the run started, + since the slowness began or ended)",
		Columns: []string{"run", "hedges %", "… slow", "shadows", "share %", "… slow", "attempts", "on probation", "off probation"},
		Rows:    cost,
	}}
	if len(trows) > 0 {
		tables = append(tables, report.Table{Title: "Probation transitions (s since the run started)", Columns: []string{"run", "at s", "replica", "move", "reason"}, Rows: trows,
			Align: []string{"left", "right", "left", "left", "left"}})
	}
	story := ""
	if first != nil {
		story = fmt.Sprintf("The rate is chosen so that primaries spread over every replica: before the degradation %s took %.1f%% of them (a fair share is %.0f%%). "+
			"Under light load the peak-EWMA picker would keep a slow replica's primaries away by itself, and probation would have nothing to add. "+
			"While %s was slow, without probation, the picker alone cut its share to %.1f%% (it tries a replica again as its price decays), and hedging rescued what it could within its budget and gate.",
			c.DegradedReplica, first.PrimarySharePctBefore, 100/float64(c.Replicas), c.DegradedReplica, first.DegradedPrimarySharePct)
	}
	if on != nil {
		switch {
		case on.EnteredAtMs == nil:
			story += fmt.Sprintf(" With probation on, %s never went on probation: a replica the picker starves gives too few samples to be judged, or its median never stayed %g× its peers' for a window.",
				c.DegradedReplica, c.Probation.Factor)
		case on.ExitedAtMs == nil:
			story += fmt.Sprintf(" With probation on, %s went on probation %.1f s after the degradation began and was still on it when the run ended.", c.DegradedReplica, *on.TimeToEnterMs/1000)
		default:
			story += fmt.Sprintf(" With probation on, %s went on probation %.1f s after the degradation began (the divergence must last a window, after enough of the window's samples are slow) and came off %.1f s after it ended (its shadows must show the recovery for a window).",
				c.DegradedReplica, *on.TimeToEnterMs/1000, *on.TimeToExitMs/1000)
		}
	}
	if first != nil && on != nil {
		story += fmt.Sprintf(" What each costs: hedges were %.2f%% of the reads without probation and %.2f%% with it (%.2f%% and %.2f%% while the replica was slow), and probation sent %d shadows (%.2f%% of the reads).",
			first.ExtraAttemptsPct, on.ExtraAttemptsPct, first.ExtraAttemptsPctDuring, on.ExtraAttemptsPctDuring, on.Shadows, on.ShadowsPct)
	}
	return report.Section{
		Heading: "probation: one replica degrades mid-run and recovers",
		Text: fmt.Sprintf("%d replicas on 127.0.0.1 serving %s behind the real gateway in-process; %s serves the reads that arrive from %.1f s to %.1f s %g× slower (%s). "+
			"%.0f reads/s in open loop for %.0f s, read once with probation off (DisableProbation) and once with it on (%g× the peers' median for %.1f s to go on, below %g× for as long to come off, shadows at %g/s), "+
			"each on fresh replicas and a fresh gateway with the same arrivals and the same service-time draws; hedging is the gateway's (%s, at most %d attempts) in both. "+
			"Latency is from each read's scheduled time, and a failed read counts as infinitely slow; attempts are the replicas' own counts.\n\n%s",
			c.Replicas, c.Model, c.DegradedReplica, c.DegradeFromMs/1000, c.DegradeToMs/1000, c.Factor, c.DegradedModel,
			c.Rate, c.DurationMs/1000, c.Probation.Factor, c.Probation.WindowMs/1000, c.Probation.ExitFactor, c.Probation.ShadowRate,
			c.HedgeDelay, c.MaxAttempts, story),
		Plots: []report.Plot{{
			Title: "p99 per second", XLabel: "time since the run started (s)", YLabel: "p99 (ms, log scale)", LogY: true,
			XMin: 0, XMax: c.DurationMs / 1000, Series: p99s, Notes: notes, Caption: caption,
		}, {
			Title: "What " + c.DegradedReplica + " received per second", XLabel: "time since the run started (s)", YLabel: "requests",
			XMin: 0, XMax: c.DurationMs / 1000, Series: attempts,
			Caption: "Primaries and hedges it received in each run, and the shadows of the run with probation: on probation it gets no primaries and no hedges, only shadows.",
		}},
		Tables: tables,
	}
}

// intervals returns when the named replica was on probation in
// run, in ms; end closes a stay that had not ended.
func intervals(run *Result, name string, end float64) [][2]float64 {
	tl := timeline{transitions: slices.Clone(run.Transitions), end: end}
	for k := range tl.transitions {
		tl.transitions[k].index = -1
		if tl.transitions[k].Replica == name {
			tl.transitions[k].index = 0
		}
	}
	return tl.onProbation(0)
}
