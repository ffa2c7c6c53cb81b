package demo

import (
	"context"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/exp/overload"
	"github.com/tailgate-dev/tailgate/lab/exp/straggler"
	"github.com/tailgate-dev/tailgate/lab/exp/sweep"
)

// Config configures Run.
type Config struct {
	// Seed makes the run reproducible. Default 1.
	Seed uint64
	// Progress, when non-nil, is told what runs: the stage's name and how
	// far it is.
	Progress func(stage string, done, total int)
	// Short runs every experiment at about a quarter of its size (the
	// sweep at a tenth), for a
	// first look (and for tests): the figures are noisier.
	Short bool
}

// Result holds the demo's three experiments.
type Result struct {
	Environment exp.Environment   `json:"environment"`
	Straggler   *straggler.Report `json:"straggler"`
	Sweep       *sweep.Report     `json:"sweep"`
	Overload    *overload.Report  `json:"overload"`
}

// Sections returns the experiments for the HTML page.
func (d *Result) Sections() []exp.Sectioner {
	return []exp.Sectioner{d.Straggler, d.Sweep, d.Overload}
}

// Run runs short versions of the straggler (through the real gateway),
// sweep and overload experiments on 127.0.0.1: under a minute in all.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	stage := func(name string) func(done, total int) {
		if cfg.Progress == nil {
			return nil
		}
		return func(done, total int) { cfg.Progress(name, done, total) }
	}
	// The demo's own header: it keeps only the environment, which spans
	// the three runs.
	h := exp.Start("demo", cfg.Seed)
	res := &Result{}
	scale := func(n int) int { return n }
	// Under a minute with the build of a fresh clone (about 12 s): about
	// 4 s of stragglers, 18 s of sweep (a point the machine stalled runs
	// again), 9 s of overload and their settling (the queues past
	// capacity drain). The sweep's 2,000 reads a point (at 1,000/s, over HTTP/2:
	// see the sweep) put its p99 on the 20th slowest read rather than the
	// 2nd, so that it holds from run to run; the overload's points are a
	// second each.
	duration := time.Second
	sweepReads := 2000
	if cfg.Short {
		scale = func(n int) int { return max(n/4, 20) }
		duration /= 4
		// A tenth: 2,000 reads a point are what the full sweep needs for
		// a steady p99, not what a first look (or a test under -race)
		// needs.
		sweepReads = 200
	}
	steps := []func() error{
		func() (err error) {
			res.Straggler, err = straggler.Run(ctx, straggler.Config{Requests: scale(400), Rate: 200, Seed: cfg.Seed, Progress: stage("straggler")})
			return err
		},
		func() (err error) {
			res.Sweep, err = sweep.Run(ctx, sweep.Config{
				Requests: sweepReads, Rate: 1000, Seed: cfg.Seed, Progress: stage("sweep"), NoReruns: cfg.Short,
				Delays:    []time.Duration{2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond},
				Quantiles: []float64{0.75, 0.9, 0.95},
			})
			return err
		},
		func() (err error) {
			res.Overload, err = overload.Run(ctx, overload.Config{
				Loads: []float64{0.5, 1, 2}, Duration: duration, Seed: cfg.Seed, Progress: stage("overload"),
			})
			return err
		},
	}
	if err := exp.Run(ctx, &h, len(steps), nil, func(i int) error { return steps[i]() }); err != nil {
		return nil, err
	}
	res.Environment = h.Environment
	return res, nil
}
