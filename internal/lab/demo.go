package lab

import (
	"bytes"
	"context"
	"time"
)

// DemoConfig configures RunDemo.
type DemoConfig struct {
	// Seed makes the run reproducible. Default 1.
	Seed uint64
	// Progress, when non-nil, is told what runs: the stage's name and how
	// far it is.
	Progress func(stage string, done, total int)
	// Short runs every experiment at about a quarter of its size, for a
	// first look (and for tests): the figures are noisier.
	Short bool
}

// DemoResult holds the demo's three experiments.
type DemoResult struct {
	Environment Environment      `json:"environment"`
	Straggler   *StragglerReport `json:"straggler"`
	Sweep       *SweepReport     `json:"sweep"`
	Overload    *OverloadReport  `json:"overload"`
}

// Sections returns the experiments for the HTML page.
func (d *DemoResult) Sections() []Sectioner {
	return []Sectioner{d.Straggler, d.Sweep, d.Overload}
}

// RunDemo runs short versions of the straggler (through the real gateway),
// sweep and overload experiments on 127.0.0.1: under a minute in all.
func RunDemo(ctx context.Context, cfg DemoConfig) (*DemoResult, error) {
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	stage := func(name string) func(done, total int) {
		if cfg.Progress == nil {
			return nil
		}
		return func(done, total int) { cfg.Progress(name, done, total) }
	}
	res := &DemoResult{Environment: newEnvironment(cfg.Seed)}
	scale := func(n int) int { return n }
	duration := 1200 * time.Millisecond
	if cfg.Short {
		scale = func(n int) int { return max(n/4, 20) }
		duration /= 4
	}
	var err error
	if res.Straggler, err = RunStraggler(ctx, StragglerConfig{Requests: scale(400), Rate: 100, Seed: cfg.Seed, Progress: stage("straggler")}); err != nil {
		return nil, err
	}
	if res.Sweep, err = RunSweep(ctx, SweepConfig{
		Requests: scale(200), Rate: 200, Seed: cfg.Seed, Progress: stage("sweep"),
		Delays:    []time.Duration{2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond},
		Quantiles: []float64{0.75, 0.9, 0.95},
	}); err != nil {
		return nil, err
	}
	if res.Overload, err = RunOverload(ctx, OverloadConfig{
		Loads: []float64{0.5, 1, 1.5, 2}, Duration: duration, Seed: cfg.Seed, Progress: stage("overload"),
	}); err != nil {
		return nil, err
	}
	res.Environment.finish()
	return res, nil
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
