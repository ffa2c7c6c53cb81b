package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tailgate-dev/tailgate/internal/lab"
)

// Limits of the tied experiment's flags: everything runs on this machine,
// six runs in a row.
const (
	maxTiedServers  = 16
	maxTiedWorkers  = 16
	maxTiedReads    = 100_000
	maxTiedRate     = 1000
	maxTiedRunTime  = time.Minute // reads / rate, per run
	maxTiedQueue    = 10_000
	maxTiedReqRate  = 2000 // two copies per read and the background, per second
	maxTiedDuration = time.Minute
)

func runLabTied(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lab tied", `The shape of Table 2 of The Tail at Scale: -servers fixtures on 127.0.0.1,
each behind a tied.Server (a queue served by -workers workers, its peers
allow-listed), read in open loop to pairs of neighbouring servers, in an idle
cluster and in one where a background load of longer requests takes
-background-share of the workers' time. Each cluster is read without hedging,
with hedging (fixed delay, default the read model's p95) and with tied
requests (second copy after -tied-delay; the servers cancel the twin when a
copy starts). For each: p50/p90/p99/p99.9 and the extra work, counted at the
servers (copies dropped before they ran are not work). The paper's figures
are reported for comparison only; the loopback figures are this machine's.`, stderr)
	var o outputs
	o.register(fs)
	servers := fs.Int("servers", lab.DefaultTiedServers, fmt.Sprintf("servers (2 to %d)", maxTiedServers))
	workers := fs.Int("workers", lab.DefaultTiedWorkers, fmt.Sprintf("workers per server (1 to %d)", maxTiedWorkers))
	queue := fs.Int("queue-limit", lab.DefaultTiedQueueLimit, fmt.Sprintf("queue limit per server (1 to %d)", maxTiedQueue))
	reads := fs.Int("reads", lab.DefaultTiedReads, fmt.Sprintf("reads per run (1 to %d; six runs)", maxTiedReads))
	rate := fs.Float64("rate", lab.DefaultTiedRate, fmt.Sprintf("reads per second (open loop; (0, %d], at most %v of reads per run)", maxTiedRate, maxTiedRunTime))
	readModel := fs.String("read-model", lab.DefaultTiedReadModel.String(), "service time of a read; see tailgate fixture -h")
	bgModel := fs.String("background-model", lab.DefaultTiedBackgroundModel.String(), "service time of a background request")
	share := fs.Float64("background-share", lab.DefaultTiedBackgroundShare, "share of the workers' time the background takes in the loaded cluster, in (0, 1)")
	hedgeDelay := fs.Duration("hedge-delay", 0, "hedging's fixed delay (default: the read model's p95)")
	budget := fs.Float64("hedge-budget", lab.DefaultTiedHedgeBudget, "hedges allowed per read, in (0, 1]")
	tiedDelay := fs.Duration("tied-delay", time.Millisecond, "delay before a tied request's second copy (0: both at once)")
	timeout := fs.Duration("timeout", 2*time.Second, "bound on each read")
	warmup := fs.Duration("warmup", time.Second, "background alone before the loaded cluster's reads (0: none)")
	priority := fs.Bool("hedge-priority", false, "serve copies marked as hedges (and tied second copies) after unmarked ones")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	const name = "lab tied"
	switch {
	case *servers < 2 || *servers > maxTiedServers:
		return usageError(stderr, name, fmt.Errorf("-servers %d must be within [2, %d]", *servers, maxTiedServers))
	case *workers < 1 || *workers > maxTiedWorkers:
		return usageError(stderr, name, fmt.Errorf("-workers %d must be within [1, %d]", *workers, maxTiedWorkers))
	case *queue < 1 || *queue > maxTiedQueue:
		return usageError(stderr, name, fmt.Errorf("-queue-limit %d must be within [1, %d]", *queue, maxTiedQueue))
	case *reads < 1 || *reads > maxTiedReads:
		return usageError(stderr, name, fmt.Errorf("-reads %d must be within [1, %d]", *reads, maxTiedReads))
	case !(*rate > 0 && *rate <= maxTiedRate):
		return usageError(stderr, name, fmt.Errorf("-rate %v must be within (0, %d]", *rate, maxTiedRate))
	case float64(*reads) / *rate > maxTiedRunTime.Seconds():
		return usageError(stderr, name, fmt.Errorf("-reads %d at -rate %v would take %.0fs per run: keep it within %v", *reads, *rate, float64(*reads) / *rate, maxTiedRunTime))
	case !(*share > 0 && *share < 1):
		return usageError(stderr, name, fmt.Errorf("-background-share %v must be within (0, 1)", *share))
	case *hedgeDelay < 0 || *hedgeDelay > maxTiedDuration:
		return usageError(stderr, name, fmt.Errorf("-hedge-delay %v must be within [0, %v]", *hedgeDelay, maxTiedDuration))
	case !(*budget > 0 && *budget <= 1):
		return usageError(stderr, name, fmt.Errorf("-hedge-budget %v must be within (0, 1]", *budget))
	case *tiedDelay < 0 || *tiedDelay > time.Second:
		return usageError(stderr, name, fmt.Errorf("-tied-delay %v must be within [0, 1s]", *tiedDelay))
	case *timeout <= 0 || *timeout > maxTiedDuration:
		return usageError(stderr, name, fmt.Errorf("-timeout %v must be within (0, %v]", *timeout, maxTiedDuration))
	case *warmup < 0 || *warmup > maxTiedDuration:
		return usageError(stderr, name, fmt.Errorf("-warmup %v must be within [0, %v]", *warmup, maxTiedDuration))
	}
	rm, err := lab.ParseModel(*readModel)
	if err != nil {
		return usageError(stderr, name, fmt.Errorf("-read-model: %w", err))
	}
	bm, err := lab.ParseModel(*bgModel)
	if err != nil {
		return usageError(stderr, name, fmt.Errorf("-background-model: %w", err))
	}
	cfg := lab.TiedConfig{Servers: *servers, Workers: *workers, QueueLimit: *queue, ReadModel: rm, BackgroundModel: bm,
		BackgroundShare: *share, Reads: *reads, Rate: *rate, HedgeDelay: *hedgeDelay, HedgeBudget: *budget,
		TiedDelay: *tiedDelay, Timeout: *timeout, Warmup: *warmup, HedgePriority: *priority, Seed: o.seed,
		Progress: progress(stderr, "tied")}
	if *tiedDelay == 0 {
		cfg.TiedDelay = -1 // both copies at once
	}
	if *warmup == 0 {
		cfg.Warmup = -1
	}
	setup, err := cfg.Check()
	if err != nil {
		return usageError(stderr, name, err)
	}
	if r := 2*setup.Rate + setup.BackgroundRate; r > maxTiedReqRate {
		return usageError(stderr, name, fmt.Errorf("%.0f reads/s (two copies each) and %.0f background requests/s make %.0f requests/s: keep it within %d (lower -rate, -background-share or -workers, or lengthen -background-model)",
			setup.Rate, setup.BackgroundRate, r, maxTiedReqRate))
	}
	if err := o.check(); err != nil {
		return usageError(stderr, name, err)
	}
	rep, err := lab.RunTied(ctx, cfg)
	if err != nil {
		if errors.Is(err, lab.ErrTiedConfig) {
			return usageError(stderr, name, err)
		}
		return failed(stderr, "tied", err)
	}
	type line struct {
		Experiment string `json:"experiment"`
		lab.TiedRun
	}
	var lines []any
	for _, r := range rep.Runs {
		lines = append(lines, line{"tied", r})
	}
	return o.write("tied", stdout, stderr, rep, rep.Environment, rep.Config, lines...)
}
