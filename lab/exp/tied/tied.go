package tied

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/tied"
)

// Run reproduces the shape of Table 2 of The Tail at Scale on loopback:
// Servers fixtures, each behind a tied.Server (a bounded queue served by
// Workers workers, its peers allow-listed), read in open loop at Rate, in
// an idle cluster and in one where a background load of longer requests
// takes BackgroundShare of the workers' time, each without hedging, with
// hedging (hedge.Transport, HedgeDelay) and with tied requests
// (tied.Transport, TiedDelay). Every run starts a fresh cluster, with the
// same seeds. Latency percentiles are from each read's scheduled time, and
// the extra work is counted at the servers: executions beyond one per
// read; copies dropped before they ran are not work.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, setup, err := cfg.withDefaults().setup()
	if err != nil {
		return nil, err
	}
	rep := &Report{Header: exp.Start("tied", cfg.Seed), Config: setup, Paper: paperTable2}
	clusters := []string{clusterIdle, clusterLoaded}
	policies := []string{policyNone, policyHedging, policyTied}
	// Step k is policy k%3 in cluster k/3; each cluster's first run, without
	// hedging, is the others' baseline.
	err = exp.Run(ctx, &rep.Header, len(clusters)*len(policies), cfg.Progress, func(k int) error {
		c, p := clusters[k/len(policies)], policies[k%len(policies)]
		run, err := runOne(ctx, cfg, setup, c, p)
		if err != nil {
			return fmt.Errorf("lab: tied %s cluster, %s: %w", c, p, err)
		}
		run.Paper = rep.Paper.row(c, p)
		if base := len(rep.Runs) - k%len(policies); base < len(rep.Runs) {
			run.VsNoHedging = change(rep.Runs[base].Summary, run.Summary)
		}
		rep.Runs = append(rep.Runs, run)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// change compares s with the baseline b, nil if a percentile of either is
// not finite.
func change(b, s load.Summary) *percentChange {
	pct := func(x, y float64) (float64, bool) {
		if !exp.Drawable(x) || !exp.Drawable(y) || x <= 0 {
			return 0, false
		}
		return math.Round(1000*(y-x)/x) / 10, true
	}
	var c percentChange
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

// runOne runs one cluster under one policy on a fresh cluster.
func runOne(ctx context.Context, cfg Config, setup runSetup, cluster, policy string) (run Result, err error) {
	var rig exp.Rig
	defer func() {
		if cerr := rig.Close(); err == nil {
			err = cerr
		}
	}()
	cl, err := startCluster(cfg, nil)
	if err != nil {
		return Result{}, err
	}
	rig.Defer(cl.close)
	base := rig.Transport()

	var launched, receipts atomic.Int64
	onReceipt := func(_ *http.Request, r hedge.Receipt) {
		launched.Add(int64(r.AttemptsLaunched))
		receipts.Add(1)
	}
	var rt http.RoundTripper
	switch policy {
	case policyTied:
		rt, err = tied.NewTransport(tied.TransportConfig{Base: base, Targets: cl.urls, Delay: cfg.TiedDelay,
			Accept: exp.AcceptValue, OnReceipt: onReceipt})
	default:
		p := hedge.Policy{MaxAttempts: 1}
		if policy == policyHedging {
			budget, berr := hedge.NewBudget(cfg.HedgeBudget, 10)
			if berr != nil {
				return Result{}, berr
			}
			p = hedge.Policy{Delay: cfg.HedgeDelay, MaxAttempts: 2, Budget: budget, Gate: hedge.Gate{Disabled: true}, IgnoreDeadline: true}
		}
		var ht *hedge.Transport
		ht, err = hedge.NewTransport(hedge.TransportConfig{Base: base, Policy: p, Targets: cl.urls,
			Accept: exp.AcceptValue, OnReceipt: onReceipt})
		if err == nil {
			rt = exp.Rotating(ht)
		}
	}
	if err != nil {
		return Result{}, err
	}
	client := &http.Client{Transport: rt}

	var bg *tiedBackground
	if cluster == clusterLoaded {
		bg = startTiedBackground(ctx, cl.urls, setup.BackgroundRate, setup.BackgroundSeed)
		defer bg.stop() // on early returns; idempotent
		if cfg.Warmup > 0 {
			t := time.NewTimer(cfg.Warmup)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return Result{}, ctx.Err()
			}
		}
	}
	offer := load.Config{Requests: cfg.Reads, Rate: cfg.Rate, Seed: setup.ReadSeed}
	start := time.Now()
	outs := load.Generate(ctx, offer, func(ctx context.Context, i int) error {
		if cfg.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
		}
		return exp.Read(ctx, client, "http://tied.invalid/item?id="+strconv.Itoa(i))
	})
	elapsed := time.Since(start)
	var bgDone bgWork
	if bg != nil {
		bgDone = bg.stop()
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	run = Result{Cluster: cluster, Policy: policy, Summary: load.Summarize(outs, elapsed), latencies: load.LatenciesMs(outs)}
	sent := cfg.Reads - run.Dropped
	run.Work.ReceiptsMissing = exp.AwaitReceipts(ctx, &receipts, sent)
	if err := cl.settle(ctx); err != nil {
		return Result{}, err
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
		run.ExtraWorkPct = exp.Round2(100 * float64(run.Work.ExtraExecutions) / float64(sent))
	}
	return run, nil
}
