package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/lab/report"
	"github.com/tailgate-dev/tailgate/tied"
)

// TiedConfig configures the tied experiment. Zero fields take the defaults
// shown.
type TiedConfig struct {
	// Servers is how many servers hold the data: fixtures on 127.0.0.1,
	// each behind a tied.Server. Reads go to pairs of neighbours (i, i+1)
	// in turn. Default DefaultTiedServers (4); at least 2.
	Servers int
	// Workers is each server's worker pool (tied.ServerConfig.Workers):
	// how many requests it serves at once, reads and background alike;
	// the rest queue. Default DefaultTiedWorkers (2).
	Workers int
	// QueueLimit bounds each server's queue (tied.ServerConfig.QueueLimit).
	// Default DefaultTiedQueueLimit (256).
	QueueLimit int
	// ReadModel is a read's service time once it has a worker. Default
	// DefaultTiedReadModel, lognormal:p50=15ms,p99=40ms: so that a good
	// part of a read's latency is waiting in a queue, which is what tied
	// requests act on (they cannot shorten the service time of the copy
	// that runs).
	ReadModel Model
	// BackgroundModel is a background request's service time. Default
	// DefaultTiedBackgroundModel, lognormal:p50=40ms,p99=150ms: the
	// background's requests are longer than the reads and hold a worker
	// longer, as the paper's sort job held the disks.
	BackgroundModel Model
	// BackgroundShare is the share of the servers' worker time the
	// background takes in the loaded cluster: its rate is BackgroundShare
	// × Servers × Workers / its mean service time, in Poisson arrivals,
	// each to a server drawn at random. Default DefaultTiedBackgroundShare
	// (0.2); it must be in (0, 1)
	// and, with the reads' own share, leave the servers below capacity.
	BackgroundShare float64
	// Reads per run (one cluster under one policy). Default
	// DefaultTiedReads (3000).
	Reads int
	// Rate of reads per second, open loop. Default DefaultTiedRate (300):
	// with the default models, the reads take about 65% of the workers'
	// time.
	Rate float64
	// HedgeDelay is the hedging policy's fixed delay. Default: the p95 of
	// ReadModel, the service time of the fixtures alone, which the paper's
	// "95th-percentile expected latency" suggests. The same delay serves
	// both clusters; in the loaded one more reads outlast it.
	HedgeDelay time.Duration
	// HedgeBudget bounds the hedges to this share of reads (burst 10);
	// the overload gate is off, as the paper's hedging had none. Default
	// DefaultTiedHedgeBudget (0.1).
	HedgeBudget float64
	// TiedDelay is how long the tied client waits before sending the
	// second copy (tied.TransportConfig.Delay). Default 1ms, as in the
	// paper; negative sends both copies at once.
	TiedDelay time.Duration
	// Timeout bounds each read. Default 2s.
	Timeout time.Duration
	// Warmup is how long the background runs in the loaded cluster before
	// the reads start, so that they meet its queues in steady state.
	// Default 1s; negative means none.
	Warmup time.Duration
	// HedgePriority makes the servers serve queued copies marked as
	// hedges (hedges, and the second copy of a tied request) only when no
	// unmarked request waits. By default they queue in arrival order, as
	// in the paper, where both copies of a tied request were equals.
	HedgePriority bool
	// Seed makes arrivals and service times reproducible. Default 1. The
	// three policies in a cluster, and the two clusters, read the same
	// arrivals and draw the same service times (by server, read and copy);
	// the background's arrivals have a seed of their own.
	Seed uint64
	// Progress, when non-nil, is told as each run completes.
	Progress func(done, total int)
}

// Defaults of a TiedConfig.
const (
	DefaultTiedServers         = 4
	DefaultTiedWorkers         = 2
	DefaultTiedQueueLimit      = 256
	DefaultTiedReads           = 3000
	DefaultTiedRate            = 300.0
	DefaultTiedBackgroundShare = 0.2
	DefaultTiedHedgeBudget     = 0.1
)

// Default models of a TiedConfig.
var (
	DefaultTiedReadModel       Model = Lognormal{P50: 15 * time.Millisecond, P99: 40 * time.Millisecond}
	DefaultTiedBackgroundModel Model = Lognormal{P50: 40 * time.Millisecond, P99: 150 * time.Millisecond}
)

// The clusters and policies of the tied experiment.
const (
	TiedIdle   = "idle"
	TiedLoaded = "loaded"

	TiedNoHedging = "no hedging"
	TiedHedging   = "hedging"
	TiedRequests  = "tied requests"
)

// ErrTiedConfig wraps every configuration error of the tied experiment.
var ErrTiedConfig = errors.New("lab: invalid tied experiment config")

// TiedSetup is the tied experiment's configuration with its defaults
// filled in and what follows from it.
type TiedSetup struct {
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

// TiedPaperRow is a row of Table 2 of The Tail at Scale, in ms.
type TiedPaperRow struct {
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
}

// TiedPaper is Table 2 of The Tail at Scale (a Bigtable read benchmark on
// a mostly idle cluster and on one running a large sort job, reads without
// hedging and tied after 1 ms), for comparison only: a loopback run's
// figures are its own.
type TiedPaper struct {
	IdleNoHedging   TiedPaperRow `json:"idleNoHedging"`
	IdleTied        TiedPaperRow `json:"idleTied"`
	LoadedNoHedging TiedPaperRow `json:"loadedNoHedging"`
	LoadedTied      TiedPaperRow `json:"loadedTied"`
}

// PaperTable2 holds the paper's figures.
var PaperTable2 = TiedPaper{
	IdleNoHedging:   TiedPaperRow{19, 38, 67, 98},
	IdleTied:        TiedPaperRow{16, 29, 42, 61},
	LoadedNoHedging: TiedPaperRow{24, 56, 108, 159},
	LoadedTied:      TiedPaperRow{19, 38, 67, 108},
}

// row returns the paper's row for a cluster and policy, nil if it has none.
func (p TiedPaper) row(cluster, policy string) *TiedPaperRow {
	var r TiedPaperRow
	switch {
	case cluster == TiedIdle && policy == TiedNoHedging:
		r = p.IdleNoHedging
	case cluster == TiedIdle && policy == TiedRequests:
		r = p.IdleTied
	case cluster == TiedLoaded && policy == TiedNoHedging:
		r = p.LoadedNoHedging
	case cluster == TiedLoaded && policy == TiedRequests:
		r = p.LoadedTied
	default:
		return nil
	}
	return &r
}

// CopyFates counts requests that reached the servers by what became of
// them there. Each is counted exactly once, by the layer in front of the
// server's tied.Server, so Arrived is the sum of the others.
type CopyFates struct {
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

func (c CopyFates) sum() int64 {
	return c.Executed + c.DroppedByTwin + c.DroppedOnArrival + c.Refused + c.Abandoned + c.Other
}

func (c *CopyFates) add(d CopyFates) {
	c.Arrived += d.Arrived
	c.Executed += d.Executed
	c.DroppedByTwin += d.DroppedByTwin
	c.DroppedOnArrival += d.DroppedOnArrival
	c.Refused += d.Refused
	c.Abandoned += d.Abandoned
	c.Other += d.Other
}

// TiedWork is what one run cost the servers, by their own counts.
type TiedWork struct {
	// Reads counts the reads sent (the offered reads less any the load
	// generator could not send).
	Reads int `json:"reads"`
	// ClientCopies counts the copies the client launched, from its
	// receipts; ReceiptsMissing the reads whose receipt never came. A
	// copy launched may never reach a server (cancelled first).
	ClientCopies    int64 `json:"clientCopies"`
	ReceiptsMissing int   `json:"receiptsMissing,omitempty"`
	// Copies are the reads' copies as the servers saw them.
	Copies CopyFates `json:"copies"`
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

// TiedBackground is what the background load did during a run.
type TiedBackground struct {
	// Sent counts background requests sent, Succeeded those answered 200,
	// Skipped those not sent because too many were outstanding.
	Sent      int `json:"sent"`
	Succeeded int `json:"succeeded"`
	Skipped   int `json:"skipped,omitempty"`
	// Copies are the background's requests as the servers saw them.
	Copies CopyFates `json:"copies"`
}

// TiedChange is a run's percentiles relative to no hedging in the same
// cluster, in % (negative is faster), as the paper's Table 2 gives them.
type TiedChange struct {
	P50Pct  float64 `json:"p50Pct"`
	P90Pct  float64 `json:"p90Pct"`
	P99Pct  float64 `json:"p99Pct"`
	P999Pct float64 `json:"p999Pct"`
}

// TiedRun is one cluster read under one policy.
type TiedRun struct {
	Cluster string `json:"cluster"`
	Policy  string `json:"policy"`
	Summary
	// ExtraWorkPct is ExtraExecutions in % of the reads: server work
	// beyond one execution per read.
	ExtraWorkPct float64 `json:"extraWorkPct"`
	// VsNoHedging compares the percentiles with the same cluster's run
	// without hedging (absent on that run, or when a percentile failed).
	VsNoHedging *TiedChange     `json:"vsNoHedging,omitempty"`
	Work        TiedWork        `json:"work"`
	Background  *TiedBackground `json:"background,omitempty"`
	// Paper is the paper's row for this cluster and policy, when it has
	// one, for comparison only.
	Paper     *TiedPaperRow `json:"paper,omitempty"`
	latencies []float64
}

// TiedReport is the tied experiment's report.
type TiedReport struct {
	Version     int         `json:"version"`
	Experiment  string      `json:"experiment"`
	Config      TiedSetup   `json:"config"`
	Environment Environment `json:"environment"`
	Paper       TiedPaper   `json:"paper"`
	Runs        []TiedRun   `json:"runs"`
}

// Limits of a tied run: everything runs on one machine.
const (
	MaxTiedServers = 32
	MaxTiedWorkers = 64
	MaxTiedReads   = 100_000
	// MaxTiedRequestRate bounds the requests the servers receive per
	// second: two copies per read and the background's.
	MaxTiedRequestRate = 5000
)

// backgroundPath is the path of background requests; reads use /item.
const backgroundPath = "/bg"

// tiedSample is the number of draws behind a model's mean and p95.
const tiedSample = 200_000

// Check fills in cfg's defaults, validates it and returns the setup a run
// of it would have. Its errors wrap ErrTiedConfig or ErrModel.
func (cfg TiedConfig) Check() (TiedSetup, error) {
	_, setup, err := cfg.withDefaults()
	return setup, err
}

func (cfg TiedConfig) withDefaults() (TiedConfig, TiedSetup, error) {
	if cfg.Servers == 0 {
		cfg.Servers = DefaultTiedServers
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultTiedWorkers
	}
	if cfg.QueueLimit == 0 {
		cfg.QueueLimit = DefaultTiedQueueLimit
	}
	if cfg.ReadModel == nil {
		cfg.ReadModel = DefaultTiedReadModel
	}
	if cfg.BackgroundModel == nil {
		cfg.BackgroundModel = DefaultTiedBackgroundModel
	}
	if cfg.BackgroundShare == 0 {
		cfg.BackgroundShare = DefaultTiedBackgroundShare
	}
	if cfg.Reads == 0 {
		cfg.Reads = DefaultTiedReads
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultTiedRate
	}
	if cfg.HedgeBudget == 0 {
		cfg.HedgeBudget = DefaultTiedHedgeBudget
	}
	if cfg.TiedDelay == 0 {
		cfg.TiedDelay = tied.DefaultDelay
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	bad := func(format string, args ...any) (TiedConfig, TiedSetup, error) {
		return cfg, TiedSetup{}, fmt.Errorf("%w: "+format, append([]any{ErrTiedConfig}, args...)...)
	}
	switch {
	case cfg.Servers < 2 || cfg.Servers > MaxTiedServers:
		return bad("servers %d must be within [2, %d]", cfg.Servers, MaxTiedServers)
	case cfg.Workers < 1 || cfg.Workers > MaxTiedWorkers:
		return bad("workers %d must be within [1, %d]", cfg.Workers, MaxTiedWorkers)
	case cfg.QueueLimit < 1:
		return bad("queue limit %d must be positive", cfg.QueueLimit)
	case cfg.Reads < 1 || cfg.Reads > MaxTiedReads:
		return bad("reads %d must be within [1, %d]", cfg.Reads, MaxTiedReads)
	case !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 1):
		return bad("rate %v must be positive", cfg.Rate)
	case !(cfg.BackgroundShare > 0 && cfg.BackgroundShare < 1):
		return bad("background share %v must be within (0, 1)", cfg.BackgroundShare)
	case cfg.HedgeDelay < 0:
		return bad("hedge delay %v must not be negative", cfg.HedgeDelay)
	case !(cfg.HedgeBudget > 0 && cfg.HedgeBudget <= 1):
		return bad("hedge budget %v must be within (0, 1]", cfg.HedgeBudget)
	case cfg.Timeout < 0:
		return bad("timeout %v must not be negative", cfg.Timeout)
	}
	for _, m := range []Model{cfg.ReadModel, cfg.BackgroundModel} {
		if err := validateModel(m); err != nil {
			return cfg, TiedSetup{}, err
		}
	}
	read := modelQuantiles(cfg.ReadModel, tiedSample, cfg.Seed)
	bg := modelQuantiles(cfg.BackgroundModel, tiedSample, cfg.Seed+1)
	readMean, bgMean := mean(read), mean(bg)
	if !(readMean > 0) || !(bgMean > 0) {
		return bad("the read and background models must take time (means %.3f ms and %.3f ms)", readMean, bgMean)
	}
	if cfg.HedgeDelay == 0 {
		cfg.HedgeDelay = time.Duration(rankF(read, 0.95) * float64(time.Millisecond))
	}
	workers := float64(cfg.Servers * cfg.Workers)
	s := TiedSetup{
		Servers: cfg.Servers, Workers: cfg.Workers, QueueLimit: cfg.QueueLimit,
		ReadModel: cfg.ReadModel.String(), BackgroundModel: cfg.BackgroundModel.String(),
		Reads: cfg.Reads, Rate: cfg.Rate,
		ReadMeanMs: round3(readMean), ReadP95Ms: round3(rankF(read, 0.95)), BackgroundMeanMs: round3(bgMean),
		ReadShare:       round3(cfg.Rate * readMean / 1000 / workers),
		BackgroundShare: cfg.BackgroundShare,
		BackgroundRate:  round2(cfg.BackgroundShare * workers / (bgMean / 1000)),
		HedgeDelayMs:    ms(cfg.HedgeDelay), HedgeBudget: cfg.HedgeBudget,
		TiedDelayMs: ms(max(cfg.TiedDelay, 0)), TimeoutMs: ms(cfg.Timeout), WarmupMs: ms(max(cfg.Warmup, 0)),
		HedgePriority: cfg.HedgePriority, Seed: cfg.Seed,
		ReadSeed: pointSeed(cfg.Seed, 0), BackgroundSeed: pointSeed(cfg.Seed, 1),
	}
	switch {
	case s.ReadShare+s.BackgroundShare >= 1:
		return bad("reads (%.0f%% of the workers' time) and background (%.0f%%) would load the servers past capacity: lower the rate or the background share",
			100*s.ReadShare, 100*s.BackgroundShare)
	case 2*cfg.Rate+s.BackgroundRate > MaxTiedRequestRate:
		return bad("%.0f reads/s (two copies each) and %.0f background requests/s exceed %d requests/s", cfg.Rate, s.BackgroundRate, MaxTiedRequestRate)
	}
	return cfg, s, nil
}

func mean(x []float64) float64 {
	t := 0.0
	for _, v := range x {
		t += v
	}
	return t / float64(len(x))
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// RunTied reproduces the shape of Table 2 of The Tail at Scale on loopback:
// Servers fixtures, each behind a tied.Server (a bounded queue served by
// Workers workers, its peers allow-listed), read in open loop at Rate, in
// an idle cluster and in one where a background load of longer requests
// takes BackgroundShare of the workers' time, each without hedging, with
// hedging (hedge.Transport, HedgeDelay) and with tied requests
// (tied.Transport, TiedDelay). Every run starts a fresh cluster, with the
// same seeds. Latency percentiles are from each read's scheduled time, and
// the extra work is counted at the servers: executions beyond one per
// read; copies dropped before they ran are not work.
func RunTied(ctx context.Context, cfg TiedConfig) (*TiedReport, error) {
	cfg, setup, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rep := &TiedReport{Version: ReportVersion, Experiment: "tied", Config: setup, Environment: newEnvironment(cfg.Seed), Paper: PaperTable2}
	clusters := []string{TiedIdle, TiedLoaded}
	policies := []string{TiedNoHedging, TiedHedging, TiedRequests}
	total := len(clusters) * len(policies)
	for _, c := range clusters {
		var base *TiedRun
		for _, p := range policies {
			run, err := runTied(ctx, cfg, setup, c, p)
			if err != nil {
				return nil, fmt.Errorf("lab: tied %s cluster, %s: %w", c, p, err)
			}
			run.Paper = rep.Paper.row(c, p)
			if base == nil {
				base = &run
			} else {
				run.VsNoHedging = change(base.Summary, run.Summary)
			}
			rep.Runs = append(rep.Runs, run)
			if cfg.Progress != nil {
				cfg.Progress(len(rep.Runs), total)
			}
		}
	}
	rep.Environment.finish()
	return rep, nil
}

// change compares s with the baseline b, nil if a percentile of either is
// not finite.
func change(b, s Summary) *TiedChange {
	pct := func(x, y float64) (float64, bool) {
		if !drawable(x) || !drawable(y) || x <= 0 {
			return 0, false
		}
		return math.Round(1000*(y-x)/x) / 10, true
	}
	var c TiedChange
	var ok [4]bool
	c.P50Pct, ok[0] = pct(b.P50Ms, s.P50Ms)
	c.P90Pct, ok[1] = pct(b.P90Ms, s.P90Ms)
	c.P99Pct, ok[2] = pct(b.P99Ms, s.P99Ms)
	c.P999Pct, ok[3] = pct(b.P999Ms, s.P999Ms)
	if ok != [4]bool{true, true, true, true} {
		return nil
	}
	return &c
}

// runTied runs one cluster under one policy on a fresh cluster.
func runTied(ctx context.Context, cfg TiedConfig, setup TiedSetup, cluster, policy string) (run TiedRun, err error) {
	cl, err := startTiedCluster(cfg, nil)
	if err != nil {
		return TiedRun{}, err
	}
	defer func() {
		if cerr := cl.close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	base := hedge.NewBaseTransport()
	defer base.CloseIdleConnections()

	var launched, receipts atomic.Int64
	onReceipt := func(_ *http.Request, r hedge.Receipt) {
		launched.Add(int64(r.AttemptsLaunched))
		receipts.Add(1)
	}
	var rt http.RoundTripper
	switch policy {
	case TiedRequests:
		rt, err = tied.NewTransport(tied.TransportConfig{Base: base, Targets: cl.urls, Delay: cfg.TiedDelay,
			Accept: AcceptValue, OnReceipt: onReceipt})
	default:
		p := hedge.Policy{MaxAttempts: 1}
		if policy == TiedHedging {
			budget, berr := hedge.NewBudget(cfg.HedgeBudget, 10)
			if berr != nil {
				return TiedRun{}, berr
			}
			p = hedge.Policy{Delay: cfg.HedgeDelay, MaxAttempts: 2, Budget: budget, Gate: hedge.Gate{Disabled: true}, IgnoreDeadline: true}
		}
		h, herr := hedge.New(p)
		if herr != nil {
			return TiedRun{}, herr
		}
		rt, err = hedge.NewTransport(hedge.TransportConfig{Base: base, Hedger: h, Targets: cl.urls, RotatePrimary: true,
			Accept: AcceptValue, OnReceipt: onReceipt})
	}
	if err != nil {
		return TiedRun{}, err
	}
	client := &http.Client{Transport: rt}

	var bg *tiedBackground
	if cluster == TiedLoaded {
		bg = startTiedBackground(ctx, cl.urls, setup.BackgroundRate, setup.BackgroundSeed)
		defer bg.stop() // on early returns; idempotent
		if cfg.Warmup > 0 {
			t := time.NewTimer(cfg.Warmup)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return TiedRun{}, ctx.Err()
			}
		}
	}
	load := Load{Requests: cfg.Reads, Rate: cfg.Rate, Seed: setup.ReadSeed}
	start := time.Now()
	outs := Generate(ctx, load, func(ctx context.Context, i int) error {
		if cfg.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
		}
		return readValue(ctx, client, "http://tied.invalid/item?id="+strconv.Itoa(i))
	})
	elapsed := time.Since(start)
	var bgDone TiedBackground
	if bg != nil {
		bgDone = bg.stop()
	}
	if err := ctx.Err(); err != nil {
		return TiedRun{}, err
	}
	run = TiedRun{Cluster: cluster, Policy: policy, Summary: Summarize(outs, elapsed), latencies: LatenciesMs(outs)}
	sent := cfg.Reads - run.Dropped
	run.Work.ReceiptsMissing = awaitReceipts(ctx, &receipts, sent)
	if err := cl.settle(ctx); err != nil {
		return TiedRun{}, err
	}
	cl.shutdown()
	run.Work.Reads = sent
	run.Work.ClientCopies = launched.Load()
	cl.account(&run.Work, &bgDone)
	run.Work.ReadsNotRun -= int64(run.Dropped)
	if bg != nil {
		run.Background = &bgDone
	}
	if sent > 0 {
		run.ExtraWorkPct = round2(100 * float64(run.Work.ExtraExecutions) / float64(sent))
	}
	return run, nil
}

// tiedCluster is one run's servers: per server, a read fixture listening on
// loopback and a background fixture in memory, both behind the same
// tied.Server, behind a front that counts what becomes of every request.
type tiedCluster struct {
	reads   []*Fixture
	bgs     []*Fixture
	fronts  []*tiedFront
	servers []*tied.Server
	urls    []string
	execs   []atomic.Int32 // executions by read id
}

// startTiedCluster starts cfg's servers; cancelRT, when not nil, sends
// their cancel messages (tests hold them back with it).
func startTiedCluster(cfg TiedConfig, cancelRT http.RoundTripper) (*tiedCluster, error) {
	cl := &tiedCluster{execs: make([]atomic.Int32, cfg.Reads)}
	ok := false
	defer func() {
		if !ok {
			cl.close()
		}
	}()
	for i := range cfg.Servers {
		name := "server-" + strconv.Itoa(i)
		bgf, err := newFixture(FixtureConfig{Name: name + "-background", Model: cfg.BackgroundModel, Seed: cfg.Seed*1_000_003 + 1000 + uint64(i)})
		if err != nil {
			return nil, err
		}
		cl.bgs = append(cl.bgs, bgf)
		front := &tiedFront{cancelPath: tied.DefaultCancelPath}
		f, err := StartFixture(FixtureConfig{Name: name, Model: cfg.ReadModel, Seed: cfg.Seed*1_000_003 + uint64(i),
			Middleware: func(read http.Handler) http.Handler {
				front.route = tiedRoute{read: read, bg: bgf.handler, execs: cl.execs}
				return front
			}})
		if err != nil {
			return nil, err
		}
		cl.reads = append(cl.reads, f)
		cl.fronts = append(cl.fronts, front)
		cl.urls = append(cl.urls, f.URL())
	}
	// The servers' peers are known once every fixture listens: each
	// allows cancels to and from all the others.
	for i, front := range cl.fronts {
		var peers []string
		for j, u := range cl.urls {
			if j != i {
				peers = append(peers, u)
			}
		}
		s, err := tied.NewServer(tied.ServerConfig{Workers: cfg.Workers, QueueLimit: cfg.QueueLimit, Peers: peers,
			NoHedgePriority: !cfg.HedgePriority, CancelTransport: cancelRT})
		if err != nil {
			return nil, err
		}
		cl.servers = append(cl.servers, s)
		h := s.Handler(front.route)
		front.h.Store(&h)
	}
	ok = true
	return cl, nil
}

// settle waits until no request is queued or running on any server, and
// none has arrived for a while (a cancelled copy may still be on its way).
func (cl *tiedCluster) settle(ctx context.Context) error {
	const quiet = 50 * time.Millisecond
	deadline := time.Now().Add(settleCap)
	last, lastChange := int64(-1), time.Now()
	for {
		var pending, arrived int64
		for _, f := range cl.fronts {
			pending += f.pending.Load()
			arrived += f.arrivals.Load()
		}
		now := time.Now()
		if arrived != last {
			last, lastChange = arrived, now
		}
		if pending == 0 && now.Sub(lastChange) >= quiet {
			return nil
		}
		if now.After(deadline) {
			return fmt.Errorf("%w: %d requests still queued or running after %v", errStillBusy, pending, settleCap)
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// shutdown lets the servers' cancel messages in flight finish, so that
// their counters are final.
func (cl *tiedCluster) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range cl.servers {
		s.Shutdown(ctx)
	}
}

func (cl *tiedCluster) close() error {
	for _, s := range cl.servers {
		s.Close()
	}
	var err error
	for _, f := range cl.reads {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	for _, f := range cl.bgs {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// account fills in w and bg's server-side counts, and checks that every
// request was counted once, by each of the counters that saw it.
func (cl *tiedCluster) account(w *TiedWork, bg *TiedBackground) {
	var reads, bgs CopyFates
	var ts tied.Stats
	for i, f := range cl.fronts {
		reads.add(f.read.load())
		bgs.add(f.bg.load())
		s := cl.servers[i].Stats()
		ts.Tied += s.Tied
		ts.Untied += s.Untied
		ts.Dequeued += s.Dequeued
		ts.DroppedByTwin += s.DroppedByTwin
		ts.DroppedOnArrival += s.DroppedOnArrival
		ts.QueueFull += s.QueueFull
		ts.Displaced += s.Displaced
		ts.Abandoned += s.Abandoned
		ts.BothExecuted += s.BothExecuted
		ts.CancelsSent += s.CancelsSent
		ts.CancelsFailed += s.CancelsFailed
	}
	w.Copies, bg.Copies = reads, bgs
	w.BothExecuted, w.CancelsSent, w.CancelsFailed = ts.BothExecuted, ts.CancelsSent, ts.CancelsFailed
	fr, fb := sumStats(cl.reads), sumStats(cl.bgs)
	w.CompletedAfterCancel = fr.CompletedAfterCancel
	var byID int64
	for i := range cl.execs {
		n := int64(cl.execs[i].Load())
		byID += n
		switch {
		case n == 0:
			w.ReadsNotRun++ // less the reads never sent: see runTied
		case n > 1:
			w.ReadsRunTwice++
			w.ExtraExecutions += n - 1
		}
	}
	var all CopyFates
	all.add(reads)
	all.add(bgs)
	check := func(what string, got, want int64) {
		if got != want {
			w.Mismatches = append(w.Mismatches, fmt.Sprintf("%s: %d, want %d", what, got, want))
		}
	}
	check("read copies arrived vs their fates", reads.Arrived, reads.sum())
	check("background requests arrived vs their fates", bgs.Arrived, bgs.sum())
	check("unexpected fates", all.Other, 0)
	check("requests arrived vs tied.Server tied+untied", all.Arrived, int64(ts.Tied+ts.Untied))
	check("executed vs tied.Server dequeued", all.Executed, int64(ts.Dequeued))
	check("dropped by twin vs tied.Server", all.DroppedByTwin, int64(ts.DroppedByTwin))
	check("dropped on arrival vs tied.Server", all.DroppedOnArrival, int64(ts.DroppedOnArrival))
	check("refused vs tied.Server queue full + displaced", all.Refused, int64(ts.QueueFull+ts.Displaced))
	check("abandoned vs tied.Server", all.Abandoned, int64(ts.Abandoned))
	check("read copies executed vs read fixtures started", reads.Executed, fr.Started)
	check("read copies executed vs executions by id", reads.Executed, byID)
	check("background executed vs background fixtures started", bgs.Executed, fb.Started)
	check("background dropped (untied)", bgs.DroppedByTwin+bgs.DroppedOnArrival, 0)
	w.Reconciled = len(w.Mismatches) == 0
}

// tiedFront sits in front of a server's tied.Server: it counts every
// request that reaches the server, and what became of it, exactly once.
type tiedFront struct {
	h          atomic.Pointer[http.Handler] // the tied.Server's handler, once made
	route      tiedRoute
	cancelPath string
	pending    atomic.Int64 // requests in the server, cancels included
	arrivals   atomic.Int64 // every request that arrived, cancels included
	read, bg   fateCounters
}

type fateCounters struct {
	arrived, executed, droppedByTwin, droppedOnArrival, refused, abandoned, other atomic.Int64
}

func (c *fateCounters) load() CopyFates {
	return CopyFates{Arrived: c.arrived.Load(), Executed: c.executed.Load(), DroppedByTwin: c.droppedByTwin.Load(),
		DroppedOnArrival: c.droppedOnArrival.Load(), Refused: c.refused.Load(), Abandoned: c.abandoned.Load(), Other: c.other.Load()}
}

// copyState travels in a request's context from the front to the route,
// which marks that the request ran.
type copyState struct{ ran bool }

type copyKey struct{}

func (f *tiedFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := f.h.Load()
	if h == nil {
		http.Error(w, "lab: tied server not ready", http.StatusServiceUnavailable)
		return
	}
	f.pending.Add(1)
	defer f.pending.Add(-1)
	f.arrivals.Add(1)
	if r.URL.Path == f.cancelPath {
		(*h).ServeHTTP(w, r)
		return
	}
	c := &f.read
	if r.URL.Path == backgroundPath {
		c = &f.bg
	}
	c.arrived.Add(1)
	st := &copyState{}
	rec := &statusRecorder{ResponseWriter: w}
	(*h).ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), copyKey{}, st)))
	// The tied.Server runs the route in this goroutine, so st is settled.
	switch hd := w.Header(); {
	case st.ran:
		c.executed.Add(1)
	case hd.Get(tied.DroppedHeader) == tied.DroppedQueued:
		c.droppedByTwin.Add(1)
	case hd.Get(tied.DroppedHeader) == tied.DroppedOnArrival:
		c.droppedOnArrival.Add(1)
	case rec.code == http.StatusServiceUnavailable && hd.Get("Retry-After") != "":
		c.refused.Add(1)
	case rec.code == http.StatusServiceUnavailable || rec.code == http.StatusGatewayTimeout:
		c.abandoned.Add(1)
	default:
		c.other.Add(1)
	}
}

// statusRecorder notes the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// tiedRoute is what runs on a worker: a read on the read fixture, a
// background request on the background fixture.
type tiedRoute struct {
	read, bg http.Handler
	execs    []atomic.Int32
}

func (rt tiedRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if st, ok := r.Context().Value(copyKey{}).(*copyState); ok {
		st.ran = true
	}
	if r.URL.Path == backgroundPath {
		rt.bg.ServeHTTP(w, r)
		return
	}
	if id, err := strconv.ParseUint(r.URL.Query().Get("id"), 10, 64); err == nil && id < uint64(len(rt.execs)) {
		rt.execs[id].Add(1)
	}
	rt.read.ServeHTTP(w, r)
}

// maxBackgroundOutstanding bounds the background requests in flight.
const maxBackgroundOutstanding = 1000

// tiedBackground offers the loaded cluster's background load: Poisson
// arrivals at a rate, each to a server drawn at random, untied and
// unhedged, until stopped. Requests in flight when it stops are let finish.
type tiedBackground struct {
	cancel    context.CancelFunc // stops the arrivals
	done      chan struct{}
	wg        sync.WaitGroup
	base      *http.Transport
	sent      int
	skipped   int
	succeeded atomic.Int64
	once      sync.Once
	result    TiedBackground
}

func startTiedBackground(ctx context.Context, urls []string, rate float64, seed uint64) *tiedBackground {
	sctx, cancel := context.WithCancel(ctx)
	b := &tiedBackground{cancel: cancel, done: make(chan struct{}), base: hedge.NewBaseTransport()}
	client := &http.Client{Transport: b.base, Timeout: 30 * time.Second}
	go func() {
		defer close(b.done)
		rng := rand.New(rand.NewPCG(seed, 0x6261636b)) // "back"
		slots := make(chan struct{}, maxBackgroundOutstanding)
		start := time.Now()
		var at time.Duration
		t := time.NewTimer(0)
		defer t.Stop()
		for i := 0; ; i++ {
			at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
			server := rng.IntN(len(urls))
			t.Reset(max(time.Until(start.Add(at)), 0))
			select {
			case <-t.C:
			case <-sctx.Done():
				return
			}
			select {
			case slots <- struct{}{}:
			default:
				b.skipped++
				continue
			}
			b.sent++
			u := urls[server] + backgroundPath + "?id=" + strconv.Itoa(i)
			b.wg.Go(func() {
				defer func() { <-slots }()
				// Not sctx: stopping the arrivals lets these finish.
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
				if err != nil {
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					return
				}
				if AcceptValue(resp) == nil {
					b.succeeded.Add(1)
				}
				resp.Body.Close()
			})
		}
	}()
	return b
}

// stop ends the arrivals, waits for the requests in flight, and returns
// what the background did. It may be called more than once.
func (b *tiedBackground) stop() TiedBackground {
	b.once.Do(func() {
		b.cancel()
		<-b.done
		b.wg.Wait()
		b.base.CloseIdleConnections()
		b.result = TiedBackground{Sent: b.sent, Succeeded: int(b.succeeded.Load()), Skipped: b.skipped}
	})
	return b.result
}

// Latencies returns a run's successful latencies in ms (nil for a report
// read back from JSON).
func (r TiedRun) Latencies() []float64 { return r.latencies }

// Section implements Sectioner.
func (r *TiedReport) Section() report.Section {
	lo, hi := math.Inf(1), 0.0
	for _, run := range r.Runs {
		for _, x := range run.latencies {
			if x > 0 {
				lo, hi = min(lo, x), max(hi, x)
			}
		}
	}
	var plots []report.Plot
	for _, c := range []string{TiedIdle, TiedLoaded} {
		p := report.Plot{Title: "Read latency CDF, " + c + " cluster", XLabel: "latency (ms, log scale)", YLabel: "fraction of reads",
			LogX: true, YMin: 0, YMax: 1}
		if hi > lo {
			p.XMin, p.XMax = lo, hi
		}
		for _, run := range r.Runs {
			if run.Cluster == c {
				p.Series = append(p.Series, latencyCDF(run.Policy, run.latencies, run.Requests, run.Policy == TiedNoHedging))
			}
		}
		if c == TiedIdle {
			p.Caption = "Reads alone on the servers: the further left, the faster; the tail is where the curves meet 1." + cdfCaption
		} else {
			p.Caption = fmt.Sprintf("A background load of longer requests takes %.0f%% of the workers' time and hogs the queues. Both plots share an axis.", 100*r.Config.BackgroundShare) + cdfCaption
		}
		plots = append(plots, p)
	}
	chg := func(v float64) string {
		if v > 0 {
			return "+" + f1(v) + "%"
		}
		return f1(v) + "%"
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
		rows = append(rows, []string{run.Cluster, run.Policy, fms(run.P50Ms), fms(run.P90Ms), fms(run.P99Ms), fms(run.P999Ms), vs,
			f2(run.ExtraWorkPct), strconv.FormatInt(run.Work.ReadsRunTwice, 10),
			strconv.FormatInt(run.Work.Copies.DroppedByTwin+run.Work.Copies.DroppedOnArrival, 10),
			strconv.Itoa(run.Failed + run.Dropped), recon})
	}
	p := r.Paper
	paperRow := func(cluster, policy string, x, base TiedPaperRow) []string {
		vs := ""
		if x != base {
			vs = chg(math.Round(1000*(x.P50Ms-base.P50Ms)/base.P50Ms)/10) + " / " + chg(math.Round(1000*(x.P90Ms-base.P90Ms)/base.P90Ms)/10) + " / " +
				chg(math.Round(1000*(x.P99Ms-base.P99Ms)/base.P99Ms)/10) + " / " + chg(math.Round(1000*(x.P999Ms-base.P999Ms)/base.P999Ms)/10)
		}
		return []string{cluster, policy, f1(x.P50Ms), f1(x.P90Ms), f1(x.P99Ms), f1(x.P999Ms), vs}
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
				paperRow("mostly idle", TiedNoHedging, p.IdleNoHedging, p.IdleNoHedging),
				paperRow("mostly idle", "tied request after 1 ms", p.IdleTied, p.IdleNoHedging),
				paperRow("with concurrent terasort", TiedNoHedging, p.LoadedNoHedging, p.LoadedNoHedging),
				paperRow("with concurrent terasort", "tied request after 1 ms", p.LoadedTied, p.LoadedNoHedging),
			},
		}},
	}
}
