package skew

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/report"
)

// Result is one policy's run at one exponent. Everything but the whole
// run's Work and Timeline and PartitionsMoved is over what happened after
// the warm-up.
type Result struct {
	Policy   string  `json:"policy"`
	Exponent float64 `json:"exponent"`
	// Rate is the offered rate, reads per second.
	Rate    float64 `json:"rate"`
	Hedging bool    `json:"hedging"`
	// Summary is over the reads scheduled after the warm-up, from their
	// scheduled times; a failed read counts as infinitely slow.
	load.Summary
	// Balance is over the reads the replicas received or started after
	// the warm-up, hedges and reads whose client had gone included (they
	// fill caches and hold workers all the same); utilization is the work
	// started in the measured span over the workers' time in it, near 1
	// for a replica that was saturated. PartitionsAway counts the
	// partitions whose owners differ from rendezvous hashing's at the
	// end.
	Balance
	PartitionsAway int `json:"partitionsAwayFromHashing"`
	// HotKeysMax is the most keys replicated at once after the warm-up (a
	// round's view, every RebalanceEvery), HotKeyNames the keys at the end.
	HotKeysMax  int      `json:"hotKeysMax"`
	HotKeyNames []string `json:"hotKeyNames,omitempty"`
	// AttemptsPerRead is the attempts the client sent per read sent after
	// the warm-up: 1 plus the hedges.
	AttemptsPerRead float64 `json:"attemptsPerRead"`
	// HedgesSuppressed counts the hedges the engine wanted for the reads
	// after the warm-up and did not send, by reason (the budget, the
	// overload gate, ...); HedgeDelayMs and Gate are its delay and its
	// gate's state as the run ended. Zero without hedging.
	HedgesSuppressed hedge.Suppressions `json:"hedgesSuppressed"`
	HedgeDelayMs     float64            `json:"hedgeDelayMs"`
	Gate             string             `json:"gate,omitempty"`
	// Fallbacks counts attempts sent outside their key's replicas because
	// none of those admitted one (a breaker open, or already tried).
	Fallbacks int64 `json:"fallbacks"`
	// Work is the whole run's: the client's attempts next to what the
	// replicas started and wasted.
	Work exp.Work `json:"work"`
	// Replicas is each replica's share after the warm-up.
	Replicas []replicaShare `json:"replicas"`
	// Timeline is the reads each replica received per second, in buckets
	// of 500 ms from the start of the run, warm-up included.
	Timeline [][]float64 `json:"timeline,omitempty"`
}

// replicaShare is one replica's share of a run after the warm-up.
type replicaShare struct {
	Name        string  `json:"name"`
	Received    int64   `json:"received"`
	Hits        int64   `json:"hits"`
	Misses      int64   `json:"misses"`
	Utilization float64 `json:"utilization"`
	// Model is the reads/s the partition table's model gave the replica
	// as the run ended (micro-partitions only): its homes' reads and its
	// share of hot keys', what the rebalancer keeps within the bound.
	Model float64 `json:"model,omitempty"`
}

// finish fills in res from the run's outcomes, the fixtures' counters
// before (as the warm-up ended) and now, and the arrivals.
func (res *Result) finish(cfg Config, s Setup, outs []load.Outcome, marks [2][]fixture.Stats, fixtures []*fixture.Fixture, arr *arrivals, r *router) {
	var measured []load.Outcome
	var attempts int64
	for i, o := range outs {
		if o.Scheduled >= cfg.Warmup {
			measured = append(measured, o)
			attempts += int64(r.attempts[i].Load())
			addSuppressions(&res.HedgesSuppressed, r.suppressed[i])
		}
	}
	res.Summary = load.Summarize(measured, cfg.Duration)
	span := float64(cfg.Workers) * load.Ms(cfg.Duration)
	var hits, misses int64
	received := make([]float64, len(fixtures))
	work := make([]float64, len(fixtures))
	for i, f := range fixtures {
		was, now := fixture.Stats{}, f.Stats()
		if i < len(marks[0]) && i < len(marks[1]) {
			was, now = marks[0][i], marks[1][i]
		}
		sh := replicaShare{Name: f.Name(), Received: arr.measured[i].Load(), Hits: now.CacheHits - was.CacheHits, Misses: now.CacheMisses - was.CacheMisses}
		hits, misses = hits+sh.Hits, misses+sh.Misses
		work[i] = float64(sh.Hits)*s.HitMs + float64(sh.Misses)*s.MissMs
		sh.Utilization = exp.Round3(work[i] / span)
		received[i] = float64(sh.Received)
		res.Replicas = append(res.Replicas, sh)
		res.MaxUtilization = max(res.MaxUtilization, sh.Utilization)
	}
	if hits+misses > 0 {
		res.HitRatio = exp.Round3(float64(hits) / float64(hits+misses))
	}
	res.LoadMaxOverMean, res.WorkMaxOverMean = exp.Round3(maxOverMean(received)), exp.Round3(maxOverMean(work))
	total := 0.0
	for _, w := range work {
		total += w
	}
	res.Utilization = exp.Round3(total / span / float64(len(work)))
	if sent := res.Requests - res.Dropped; sent > 0 {
		res.AttemptsPerRead = exp.Round3(float64(attempts) / float64(sent))
	}
	res.Fallbacks = r.fallbacks.Load()
	res.Work = exp.WorkBetween(fixture.Stats{}, fixture.Sum(fixtures), r.launched.Load(), len(outs))
	for i := range arr.buckets {
		row := make([]float64, len(arr.buckets[i]))
		for b := range row {
			row[b] = float64(arr.buckets[i][b].Load()) / bucket.Seconds()
		}
		res.Timeline = append(res.Timeline, row)
	}
}

func addSuppressions(to *hedge.Suppressions, s hedge.Suppressions) {
	to.Budget += s.Budget
	to.Gate += s.Gate
	to.Deadline += s.Deadline
	to.MaxAttempts += s.MaxAttempts
	to.NoTarget += s.NoTarget
	to.Capacity += s.Capacity
}

// maxOverMean is the largest of x over their mean, 0 when they sum to 0.
func maxOverMean(x []float64) float64 {
	sum, top := 0.0, 0.0
	for _, v := range x {
		sum += v
		top = max(top, v)
	}
	if sum == 0 {
		return 0
	}
	return top * float64(len(x)) / sum
}

// Goal is one of the goals for the experiment, as measured.
type Goal struct {
	Goal     string `json:"goal"`
	Hedging  bool   `json:"hedging"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// goals checks the goals on the results at the default skew:
// micro-partitions + selective replication against one partition per
// replica and against no affinity, hedged and not.
func goals(rs []Result) []Goal {
	find := func(name string) *Result {
		for i := range rs {
			if rs[i].Policy == name {
				return &rs[i]
			}
		}
		return nil
	}
	var gs []Goal
	for _, suffix := range []string{"", noHedgeTitle} {
		mh, one, none := find(MicroHot+suffix), find(OnePerRepl+suffix), find(NoAffinity+suffix)
		if mh == nil || one == nil || none == nil {
			continue
		}
		h := suffix == ""
		ratio := one.P99Ms / mh.P99Ms
		gs = append(gs,
			Goal{"max/mean load ≤ 1.25", h, exp.F2(mh.LoadMaxOverMean), mh.LoadMaxOverMean <= 1.25},
			Goal{"p99 ≥ 3× lower than one partition per replica", h,
				fmt.Sprintf("%s vs %s: %s×", msCell(mh.P99Ms), msCell(one.P99Ms), ratioCell(ratio)), ratio >= 3},
			Goal{"hit ratio within 10% of one partition per replica", h,
				fmt.Sprintf("%.3f vs %.3f (%+.1f%%)", mh.HitRatio, one.HitRatio, 100*(mh.HitRatio/one.HitRatio-1)), mh.HitRatio >= 0.9*one.HitRatio},
			Goal{"higher hit ratio than no affinity", h, fmt.Sprintf("%.3f vs %.3f", mh.HitRatio, none.HitRatio), mh.HitRatio > none.HitRatio},
			Goal{"lower p50 than no affinity", h, fmt.Sprintf("%s vs %s", msCell(mh.P50Ms), msCell(none.P50Ms)), mh.P50Ms < none.P50Ms},
		)
	}
	return gs
}

// msCell writes a percentile as exp.Cell does, with its unit when it is
// a number.
func msCell(x float64) string {
	if exp.Drawable(x) {
		return exp.Cell(x) + " ms"
	}
	return exp.Cell(x)
}

func ratioCell(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "∞"
	case math.IsNaN(x):
		return "—"
	}
	return exp.F1(x)
}

// Report is the skew experiment's report.
type Report struct {
	exp.Header
	Config Setup `json:"config"`
	// Results are the runs at the default exponent, every policy; Sweep
	// the hedged policies' runs at the other exponents.
	Results []Result `json:"results"`
	Sweep   []Result `json:"sweep"`
	Goals   []Goal   `json:"goals"`
}

// Section implements exp.Sectioner: the goals, a table of the policies,
// the load each replica received over time under each hedged policy, and
// p99 and hit ratio against skew.
func (r *Report) Section() report.Section {
	c := r.Config
	var rows [][]string
	for _, res := range r.Results {
		moved, hot := "—", "—"
		if strings.HasPrefix(res.Policy, Micro) {
			moved = strconv.Itoa(res.PartitionsMoved)
			hot = strconv.Itoa(res.HotKeysMax)
		}
		rows = append(rows, []string{res.Policy, exp.Cell(res.P50Ms), exp.Cell(res.P99Ms), exp.Cell(res.P999Ms), strconv.Itoa(res.Failed + res.Dropped),
			exp.F3(res.HitRatio), exp.F2(res.LoadMaxOverMean), exp.F2(res.WorkMaxOverMean), exp.F2(res.Utilization), exp.F2(res.MaxUtilization),
			moved, hot, exp.F2(res.AttemptsPerRead)})
	}
	tables := []report.Table{{
		Title: fmt.Sprintf("Policies at exponent %g (after a %.0f s warm-up, %.0f s measured)", c.Exponent, c.WarmupMs/1000, c.DurationMs/1000),
		Columns: []string{"policy", "p50 ms", "p99 ms", "p99.9 ms", "failed", "hit ratio", "load max/mean", "work max/mean", "utilization",
			"busiest", "moves", "hot keys", "attempts/read"},
		Rows:  rows,
		Align: []string{"left"},
	}}
	var hedging [][]string
	for _, res := range r.Results {
		if res.Hedging {
			sp := res.HedgesSuppressed
			hedging = append(hedging, []string{res.Policy, exp.F2(res.AttemptsPerRead), exp.F1(res.HedgeDelayMs), strconv.Itoa(sp.Budget), strconv.Itoa(sp.Gate),
				strconv.Itoa(sp.Deadline + sp.MaxAttempts + sp.NoTarget + sp.Capacity), res.Gate})
		}
	}
	if len(hedging) > 0 {
		tables = append(tables, report.Table{Title: "Hedging (the engine's default policy): hedges it wanted after the warm-up and did not send, and its state as the run ended",
			Columns: []string{"policy", "attempts/read", "delay ms", "no budget", "gate shut", "other", "gate"}, Rows: hedging,
			Align: []string{"left", "right", "right", "right", "right", "right", "left"}})
	}
	if len(r.Sweep) > 0 {
		var sw [][]string
		for _, res := range slices.Concat(r.Results, r.Sweep) {
			if res.Hedging {
				sw = append(sw, []string{strconv.FormatFloat(res.Exponent, 'g', -1, 64), res.Policy, exp.F1(res.Rate), exp.Cell(res.P50Ms), exp.Cell(res.P99Ms),
					strconv.Itoa(res.Failed + res.Dropped), exp.F3(res.HitRatio), exp.F2(res.LoadMaxOverMean), exp.F2(res.MaxUtilization)})
			}
		}
		tables = append(tables, report.Table{Title: "Against skew: the hedged policies at each exponent, each at Load of the capacity its own planned hit ratio gives",
			Columns: []string{"exponent", "policy", "reads/s", "p50 ms", "p99 ms", "failed", "hit ratio", "load max/mean", "busiest"}, Rows: sw,
			Align: []string{"right", "left"}})
	}
	if len(r.Goals) > 0 {
		var g [][]string
		for _, x := range r.Goals {
			met := "no"
			if x.Met {
				met = "yes"
			}
			hedging := "hedged"
			if !x.Hedging {
				hedging = "no hedging"
			}
			g = append(g, []string{x.Goal, hedging, x.Measured, met})
		}
		tables = append(tables, report.Table{Title: "The issue's goals: micro-partitions + selective replication against the others, at the default skew",
			Columns: []string{"goal", "", "measured", "met"}, Rows: g, Align: []string{"left", "left", "left", "left"}})
	}
	var plots []report.Plot
	for _, res := range r.Results {
		if !res.Hedging {
			continue
		}
		var series []report.Series
		top := 0.0
		for i, row := range res.Timeline {
			s := report.Series{Name: c.ReplicaNames[i]}
			for b, v := range row {
				s.Points = append(s.Points, report.Point{X: (float64(b) + 0.5) * bucket.Seconds(), Y: v})
				top = max(top, v)
			}
			series = append(series, s)
		}
		plots = append(plots, report.Plot{
			Title: "Reads each replica received: " + res.Policy, XLabel: "time since the run started (s)", YLabel: "reads/s (primaries and hedges)",
			XMin: 0, XMax: (c.WarmupMs + c.DurationMs) / 1000, YMin: 0, Series: series,
			Notes:   []report.Note{{X: c.WarmupMs / 1000, Y: top, Text: "warm-up ends"}},
			Caption: fmt.Sprintf("Per 500 ms. Measured after the warm-up: load max/mean %.2f, hit ratio %.3f.", res.LoadMaxOverMean, res.HitRatio),
		})
	}
	if len(r.Sweep) > 0 {
		p99 := report.Plot{Title: "p99 against skew", XLabel: "Zipf exponent", YLabel: "p99 (ms, log scale)", LogY: true,
			Caption: "Hedged policies, the same tier at every exponent, offered the same share of the capacity its planned hit ratio gives. A p99 that failed (more than 1% of reads failed) is not drawn."}
		hit := report.Plot{Title: "Hit ratio against skew", XLabel: "Zipf exponent", YLabel: "hit ratio", YMin: 0, YMax: 1,
			Caption: "The share of the reads the replicas started that hit their cache."}
		for _, name := range []string{NoAffinity, OnePerRepl, Micro, MicroHot} {
			sp := report.Series{Name: name, Marker: true}
			sh := report.Series{Name: name, Marker: true}
			for _, res := range slices.Concat(r.Results, r.Sweep) {
				if res.Policy == name {
					sp.Points = append(sp.Points, report.Point{X: res.Exponent, Y: res.P99Ms})
					sh.Points = append(sh.Points, report.Point{X: res.Exponent, Y: res.HitRatio})
				}
			}
			byX := func(a, b report.Point) int { return int(math.Copysign(1, a.X-b.X)) }
			slices.SortFunc(sp.Points, byX)
			slices.SortFunc(sh.Points, byX)
			p99.Series = append(p99.Series, sp)
			hit.Series = append(hit.Series, sh)
		}
		plots = append(plots, p99, hit)
	}
	return report.Section{
		Heading: "skew: key affinity, micro-partitions and hot keys under Zipf popularity",
		Text: fmt.Sprintf("%d cache replicas on 127.0.0.1, each an LRU of %d keys (a hit takes %g ms, a miss pays a %g ms origin fetch) with %d workers, "+
			"read for %d keys whose popularity is Zipf with exponent %g (the hottest key draws %.1f%% of reads). "+
			"The tier serves %.0f reads/s at the hit ratio a tier partitioned by key would have (%.3f, Che's approximation; a cache that sees every key hits %.3f); "+
			"%.0f reads/s are offered (%g of that), Poisson arrivals, the same in every run, each on fresh replicas with cold caches: %.0f s of warm-up, then %.0f s measured. "+
			"Policies: %s routes by the replica set's power of two choices over every replica (today's gateway); %s sends a key to hash mod N and its hedge to the next replica; "+
			"%s use package partition (%d partitions a replica, %d owners, load bound %g, %d moves a round at most, window %.0f ms, cooldown %.0f ms, a round every %.0f ms) "+
			"with a key's primary to its partition's home (its first owner) whenever the home admits one%s and the hedge to another owner, and, with selective replication, up to %d hot keys over %d replicas. "+
			"Hedging is the hedge engine's default (%s, at most %d attempts, budget %g with burst %g).",
			c.Replicas, c.CacheKeys, c.HitMs, c.MissMs, c.Workers, c.Keys, c.Exponent, 100*c.TopKeyShare,
			c.CapacityPerSec, c.PlannedHitRatio, c.NoAffinityHitRatio, c.Rate, c.Load, c.WarmupMs/1000, c.DurationMs/1000,
			NoAffinity, OnePerRepl, Micro+" and "+MicroHot, c.Partitions.PartitionsPerReplica, c.Partitions.Owners, c.Partitions.LoadBound,
			c.Partitions.MovesPerRound, c.Partitions.WindowMs, c.Partitions.CooldownMs, c.Partitions.RebalanceEveryMs, boundText(c.InFlightBound),
			c.Partitions.HotKeys, c.Partitions.HotReplicas,
			c.HedgeDelay, c.MaxAttempts, c.HedgeBudget, c.HedgeBurst),
		Plots:  plots,
		Tables: tables,
	}
}

// boundText says how a run judged a home's load per read, for the report.
func boundText(bound float64) string {
	if bound == 0 {
		return " (the load bound is the partition table's, kept by moving homes)"
	}
	return fmt.Sprintf(" and is within an in-flight bound of %g× the mean per replica (as HAProxy's hash-balance-factor; otherwise another owner)", bound)
}
