package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/exp/tied"
	"github.com/tailgate-dev/tailgate/lab/fixture"
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
	d := tied.Defaults()
	servers := fs.Int("servers", d.Servers, fmt.Sprintf("servers (2 to %d)", tied.MaxServers))
	workers := fs.Int("workers", d.Workers, fmt.Sprintf("workers per server (1 to %d)", tied.MaxWorkers))
	queue := fs.Int("queue-limit", d.QueueLimit, fmt.Sprintf("queue limit per server (1 to %d)", tied.MaxQueueLimit))
	reads := fs.Int("reads", d.Reads, fmt.Sprintf("reads per run (1 to %d; six runs)", tied.MaxReads))
	rate := fs.Float64("rate", d.Rate, fmt.Sprintf("reads per second (open loop; (0, %d], at most %v of reads per run)", tied.MaxRate, tied.MaxRunTime))
	readModel := fs.String("read-model", d.ReadModel.String(), "service time of a read; see tailgate fixture -h")
	bgModel := fs.String("background-model", d.BackgroundModel.String(), "service time of a background request")
	share := fs.Float64("background-share", d.BackgroundShare, "share of the workers' time the background takes in the loaded cluster, in (0, 1)")
	hedgeDelay := fs.Duration("hedge-delay", 0, "hedging's fixed delay (default: the read model's p95)")
	budget := fs.Float64("hedge-budget", d.HedgeBudget, "hedges allowed per read, in (0, 1]")
	tiedDelay := fs.Duration("tied-delay", d.TiedDelay, "delay before a tied request's second copy (0: both at once)")
	timeout := fs.Duration("timeout", d.Timeout, "bound on each read")
	warmup := fs.Duration("warmup", d.Warmup, "background alone before the loaded cluster's reads (0: none)")
	priority := fs.Bool("hedge-priority", false, "serve copies marked as hedges (and tied second copies) after unmarked ones")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	const name = "lab tied"
	rm, err := fixture.ParseModel(*readModel)
	if err != nil {
		return usageError(stderr, name, fmt.Errorf("-read-model: %w", err))
	}
	bm, err := fixture.ParseModel(*bgModel)
	if err != nil {
		return usageError(stderr, name, fmt.Errorf("-background-model: %w", err))
	}
	cfg := tied.Config{Servers: *servers, Workers: *workers, QueueLimit: *queue, ReadModel: rm, BackgroundModel: bm,
		BackgroundShare: *share, Reads: *reads, Rate: *rate, HedgeDelay: *hedgeDelay, HedgeBudget: *budget,
		TiedDelay: *tiedDelay, Timeout: *timeout, Warmup: *warmup, HedgePriority: *priority, Seed: o.seed,
		Progress: progress(stderr, "tied")}
	// On the command line 0 means none; in a Config, the default.
	if *tiedDelay == 0 {
		cfg.TiedDelay = tied.AtOnce
	}
	if *warmup == 0 {
		cfg.Warmup = tied.NoWarmup
	}
	return o.run(ctx, "tied", stdout, stderr, cfg.Validate, func(ctx context.Context) (exp.Report, any, []any, error) {
		rep, err := tied.Run(ctx, cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		type line struct {
			Experiment string `json:"experiment"`
			tied.Result
		}
		var lines []any
		for _, r := range rep.Runs {
			lines = append(lines, line{"tied", r})
		}
		return rep, rep.Config, lines, nil
	})
}
