package tied

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/report"
)

// The clusters and policies of the tied experiment.
const (
	clusterIdle   = "idle"
	clusterLoaded = "loaded"

	policyNone    = "no hedging"
	policyHedging = "hedging"
	policyTied    = "tied requests"
)

// runSetup is the tied experiment's configuration with its defaults
// filled in and what follows from it.
type runSetup struct {
	Servers         int     `json:"servers"`
	Workers         int     `json:"workersPerServer"`
	QueueLimit      int     `json:"queueLimit"`
	ReadModel       string  `json:"readModel"`
	BackgroundModel string  `json:"backgroundModel"`
	Reads           int     `json:"readsPerRun"`
	Rate            float64 `json:"rate"`
	// ReadMeanMs and BackgroundMeanMs are the models' mean service times,
	// from a sample; ReadP95Ms the read model's p95.
	ReadMeanMs       float64 `json:"readMeanMs"`
	ReadP95Ms        float64 `json:"readP95Ms"`
	BackgroundMeanMs float64 `json:"backgroundMeanMs"`
	// ReadShare is the share of the servers' worker time the reads take
	// (one execution each); BackgroundShare the background's, in the
	// loaded cluster, at BackgroundRate requests per second.
	ReadShare       float64 `json:"readShare"`
	BackgroundShare float64 `json:"backgroundShare"`
	BackgroundRate  float64 `json:"backgroundRate"`
	HedgeDelayMs    float64 `json:"hedgeDelayMs"`
	HedgeBudget     float64 `json:"hedgeBudget"`
	// TiedDelayMs is the tied client's delay; 0 when both copies go at
	// once.
	TiedDelayMs   float64 `json:"tiedDelayMs"`
	TimeoutMs     float64 `json:"timeoutMs"`
	WarmupMs      float64 `json:"warmupMs"`
	HedgePriority bool    `json:"hedgePriority"`
	Seed          uint64  `json:"seed"`
	// ReadSeed seeds the reads' arrivals (the same in every run);
	// BackgroundSeed the background's arrivals and servers.
	ReadSeed       uint64 `json:"readSeed"`
	BackgroundSeed uint64 `json:"backgroundSeed"`
}

// paperRow is a row of Table 2 of The Tail at Scale, in ms.
type paperRow struct {
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
}

// paperTable is Table 2 of The Tail at Scale (a Bigtable read benchmark on
// a mostly idle cluster and on one running a large sort job, reads without
// hedging and tied after 1 ms), for comparison only: a loopback run's
// figures are its own.
type paperTable struct {
	IdleNoHedging   paperRow `json:"idleNoHedging"`
	IdleTied        paperRow `json:"idleTied"`
	LoadedNoHedging paperRow `json:"loadedNoHedging"`
	LoadedTied      paperRow `json:"loadedTied"`
}

// paperTable2 holds the paper's figures.
var paperTable2 = paperTable{
	IdleNoHedging:   paperRow{19, 38, 67, 98},
	IdleTied:        paperRow{16, 29, 42, 61},
	LoadedNoHedging: paperRow{24, 56, 108, 159},
	LoadedTied:      paperRow{19, 38, 67, 108},
}

// row returns the paper's row for a cluster and policy, nil if it has none.
func (p paperTable) row(cluster, policy string) *paperRow {
	var r paperRow
	switch {
	case cluster == clusterIdle && policy == policyNone:
		r = p.IdleNoHedging
	case cluster == clusterIdle && policy == policyTied:
		r = p.IdleTied
	case cluster == clusterLoaded && policy == policyNone:
		r = p.LoadedNoHedging
	case cluster == clusterLoaded && policy == policyTied:
		r = p.LoadedTied
	default:
		return nil
	}
	return &r
}

// copyFates counts requests that reached the servers by what became of
// them there. Each is counted exactly once, by the layer in front of the
// server's tied.Server, so Arrived is the sum of the others.
type copyFates struct {
	Arrived int64 `json:"arrived"`
	// Executed: given a worker and run (work).
	Executed int64 `json:"executed"`
	// DroppedByTwin: a tied copy taken out of the queue unrun because its
	// twin started on the other server; DroppedOnArrival: one whose twin's
	// cancel came first. Neither is work.
	DroppedByTwin    int64 `json:"droppedByTwin"`
	DroppedOnArrival int64 `json:"droppedOnArrival"`
	// Refused: answered 503 by a full queue. Abandoned: its client left
	// while it was queued, so it never ran.
	Refused   int64 `json:"refused"`
	Abandoned int64 `json:"abandoned"`
	// Other: anything else (none is expected).
	Other int64 `json:"other,omitempty"`
}

func (c copyFates) sum() int64 {
	return c.Executed + c.DroppedByTwin + c.DroppedOnArrival + c.Refused + c.Abandoned + c.Other
}

func (c *copyFates) add(d copyFates) {
	c.Arrived += d.Arrived
	c.Executed += d.Executed
	c.DroppedByTwin += d.DroppedByTwin
	c.DroppedOnArrival += d.DroppedOnArrival
	c.Refused += d.Refused
	c.Abandoned += d.Abandoned
	c.Other += d.Other
}

// serverWork is what one run cost the servers, by their own counts.
type serverWork struct {
	// Reads counts the reads sent (the offered reads less any the load
	// generator could not send).
	Reads int `json:"reads"`
	// ClientCopies counts the copies the client launched, from its
	// receipts; ReceiptsMissing the reads whose receipt never came. A
	// copy launched may never reach a server (cancelled first).
	ClientCopies    int64 `json:"clientCopies"`
	ReceiptsMissing int   `json:"receiptsMissing,omitempty"`
	// Copies are the reads' copies as the servers saw them.
	Copies copyFates `json:"copies"`
	// ExtraExecutions counts executions beyond the first of each read:
	// the server work the policy added. ReadsRunTwice counts the reads
	// executed more than once, ReadsNotRun those never executed.
	ExtraExecutions int64 `json:"extraExecutions"`
	ReadsRunTwice   int64 `json:"readsRunTwice"`
	ReadsNotRun     int64 `json:"readsNotRun"`
	// CompletedAfterCancel counts executions that finished after their
	// client had gone (a hedge's or tied copy's losing twin that ran).
	CompletedAfterCancel int64 `json:"completedAfterCancel"`
	// BothExecuted, CancelsSent and CancelsFailed are the tied.Servers'
	// counters, summed: a pair whose copies both ran is counted by each
	// server that received its twin's cancel, so up to twice.
	BothExecuted  uint64 `json:"bothExecuted"`
	CancelsSent   uint64 `json:"cancelsSent"`
	CancelsFailed uint64 `json:"cancelsFailed"`
	// Reconciled says that every copy was accounted for exactly once: the
	// counts above, the background's, the tied.Servers' and the fixtures'
	// agree. Mismatches says where they do not.
	Reconciled bool     `json:"reconciled"`
	Mismatches []string `json:"mismatches,omitempty"`
}

// bgWork is what the background load did during a run.
type bgWork struct {
	// Sent counts background requests sent, Succeeded those answered 200,
	// Skipped those not sent because too many were outstanding.
	Sent      int `json:"sent"`
	Succeeded int `json:"succeeded"`
	Skipped   int `json:"skipped,omitempty"`
	// Copies are the background's requests as the servers saw them.
	Copies copyFates `json:"copies"`
}

// percentChange is a run's percentiles relative to no hedging in the same
// cluster, in % (negative is faster), as the paper's Table 2 gives them.
type percentChange struct {
	P50Pct  float64 `json:"p50Pct"`
	P90Pct  float64 `json:"p90Pct"`
	P99Pct  float64 `json:"p99Pct"`
	P999Pct float64 `json:"p999Pct"`
}

// Result is one cluster read under one policy.
type Result struct {
	Cluster string `json:"cluster"`
	Policy  string `json:"policy"`
	load.Summary
	// ExtraWorkPct is ExtraExecutions in % of the reads: server work
	// beyond one execution per read.
	ExtraWorkPct float64 `json:"extraWorkPct"`
	// VsNoHedging compares the percentiles with the same cluster's run
	// without hedging (absent on that run, or when a percentile failed).
	VsNoHedging *percentChange `json:"vsNoHedging,omitempty"`
	Work        serverWork     `json:"work"`
	Background  *bgWork        `json:"background,omitempty"`
	// Paper is the paper's row for this cluster and policy, when it has
	// one, for comparison only.
	Paper     *paperRow `json:"paper,omitempty"`
	latencies []float64
}

// Report is the tied experiment's report.
type Report struct {
	exp.Header
	Config runSetup   `json:"config"`
	Paper  paperTable `json:"paper"`
	Runs   []Result   `json:"runs"`
}

// Section implements Sectioner.
func (r *Report) Section() report.Section {
	lo, hi := math.Inf(1), 0.0
	for _, run := range r.Runs {
		for _, x := range run.latencies {
			if x > 0 {
				lo, hi = min(lo, x), max(hi, x)
			}
		}
	}
	var plots []report.Plot
	for _, c := range []string{clusterIdle, clusterLoaded} {
		caption := "Reads alone on the servers: the further left, the faster; the tail is where the curves meet 1."
		if c == clusterLoaded {
			caption = fmt.Sprintf("A background load of longer requests takes %.0f%% of the workers' time and hogs the queues. Both plots share an axis.", 100*r.Config.BackgroundShare)
		}
		p := exp.ReadsCDF(caption)
		p.Title = "Read latency CDF, " + c + " cluster"
		if hi > lo {
			p.XMin, p.XMax = lo, hi
		}
		for _, run := range r.Runs {
			if run.Cluster == c {
				p.Series = append(p.Series, exp.LatencyCDF(run.Policy, run.latencies, run.Requests, run.Policy == policyNone))
			}
		}
		plots = append(plots, p)
	}
	chg := func(v float64) string {
		if v > 0 {
			return "+" + exp.F1(v) + "%"
		}
		return exp.F1(v) + "%"
	}
	var rows [][]string
	for _, run := range r.Runs {
		vs := ""
		if c := run.VsNoHedging; c != nil {
			vs = chg(c.P50Pct) + " / " + chg(c.P90Pct) + " / " + chg(c.P99Pct) + " / " + chg(c.P999Pct)
		}
		recon := "yes"
		if !run.Work.Reconciled {
			recon = "NO: " + strings.Join(run.Work.Mismatches, "; ")
		}
		rows = append(rows, []string{run.Cluster, run.Policy, exp.Cell(run.P50Ms), exp.Cell(run.P90Ms), exp.Cell(run.P99Ms), exp.Cell(run.P999Ms), vs,
			exp.F2(run.ExtraWorkPct), strconv.FormatInt(run.Work.ReadsRunTwice, 10),
			strconv.FormatInt(run.Work.Copies.DroppedByTwin+run.Work.Copies.DroppedOnArrival, 10),
			strconv.Itoa(run.Failed + run.Dropped), recon})
	}
	p := r.Paper
	paperRow := func(cluster, policy string, x, base paperRow) []string {
		vs := ""
		if x != base {
			vs = chg(math.Round(1000*(x.P50Ms-base.P50Ms)/base.P50Ms)/10) + " / " + chg(math.Round(1000*(x.P90Ms-base.P90Ms)/base.P90Ms)/10) + " / " +
				chg(math.Round(1000*(x.P99Ms-base.P99Ms)/base.P99Ms)/10) + " / " + chg(math.Round(1000*(x.P999Ms-base.P999Ms)/base.P999Ms)/10)
		}
		return []string{cluster, policy, exp.F1(x.P50Ms), exp.F1(x.P90Ms), exp.F1(x.P99Ms), exp.F1(x.P999Ms), vs}
	}
	c := r.Config
	return report.Section{
		Heading: "tied: the shape of Table 2 of The Tail at Scale",
		Text: fmt.Sprintf("%d servers on 127.0.0.1, each a fixture behind a tied.Server: a queue (at most %d) served by %d workers, its peers allow-listed. "+
			"Reads take %s once they have a worker (mean %.1f ms); %d reads per run at %.0f/s in open loop (%.0f%% of the workers' time), each to a pair of neighbouring servers, "+
			"latency measured from each read's scheduled time. The loaded cluster adds a background of %.0f requests/s of %s (%.0f%% of the workers' time), "+
			"to servers drawn at random, running %.0f ms before the reads start. Policies: no hedging; hedging (hedge.Transport, fixed delay %.1f ms, the read model's p95, budget %.0f%%, no gate); "+
			"tied requests (tied.Transport, second copy after %.1f ms; the servers cancel the twin when a copy starts). %s. "+
			"Extra work counts executions at the servers beyond one per read: a tied copy dropped before it ran is not work, copies that both ran are.\n\n"+
			"The paper's figures (a Bigtable benchmark on a real cluster) are shown for comparison only; these loopback figures are this machine's own, and only their shape, not their values, can be compared.",
			c.Servers, c.QueueLimit, c.Workers, c.ReadModel, c.ReadMeanMs, c.Reads, c.Rate, 100*c.ReadShare,
			c.BackgroundRate, c.BackgroundModel, 100*c.BackgroundShare, c.WarmupMs, c.HedgeDelayMs, 100*c.HedgeBudget, c.TiedDelayMs,
			map[bool]string{true: "Copies marked as hedges queue behind unmarked ones", false: "Queues are served in arrival order, both copies of a tied request alike"}[c.HedgePriority]),
		Plots: plots,
		Tables: []report.Table{{
			Title:   "This run (loopback; ms)",
			Columns: []string{"cluster", "policy", "p50", "p90", "p99", "p99.9", "vs no hedging (p50 / p90 / p99 / p99.9)", "extra work %", "reads run twice", "copies dropped unrun", "failed", "accounted"},
			Rows:    rows,
		}, {
			Title:   "The paper's Table 2, for comparison only (ms)",
			Columns: []string{"cluster", "policy", "p50", "p90", "p99", "p99.9", "vs no hedging (p50 / p90 / p99 / p99.9)"},
			Rows: [][]string{
				paperRow("mostly idle", policyNone, p.IdleNoHedging, p.IdleNoHedging),
				paperRow("mostly idle", "tied request after 1 ms", p.IdleTied, p.IdleNoHedging),
				paperRow("with concurrent terasort", policyNone, p.LoadedNoHedging, p.LoadedNoHedging),
				paperRow("with concurrent terasort", "tied request after 1 ms", p.LoadedTied, p.LoadedNoHedging),
			},
		}},
	}
}
