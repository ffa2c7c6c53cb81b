package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/exp/probation"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/replica"
)

func runLabProbation(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lab probation", `Latency-induced probation over time: -replicas fixtures on 127.0.0.1 behind
the real gateway in-process, read in open loop at -rate for -duration, while
the last replica serves the reads that arrive between -degrade-from and
-degrade-to -factor times slower (a phase model), read once with probation
off and once with it on, on the same arrivals and service-time draws. One
JSON line per second per run (p50/p99 of the reads scheduled in it, what each
replica received, the probation status), then one summary line per run
(overall and degraded-time percentiles, extra attempts, shadows, when the
degraded replica went on and came off probation). The rate must be high
enough that the gateway spreads primaries over every replica: under light
load its latency-aware picker avoids a slow replica by itself, and so does
it, with a much larger -factor, leaving probation too few samples to judge.`, stderr)
	var o outputs
	o.register(fs)
	d := probation.Defaults()
	duration := fs.Duration("duration", d.Duration, fmt.Sprintf("how long each run offers reads (%v to %v)", probation.MinDuration, probation.MaxDuration))
	rate := fs.Float64("rate", d.Rate, fmt.Sprintf("reads per second (open loop; (0, %d], at most %d reads per run)", probation.MaxRate, probation.MaxReads))
	replicas := fs.Int("replicas", d.Replicas, fmt.Sprintf("replicas behind the gateway (2 to %d); the last one degrades", probation.MaxReplicas))
	model := fs.String("model", d.Model.String(), "service time of every replica, and of the degraded one outside its degradation; see tailgate fixture -h")
	from := fs.Duration("degrade-from", 0, "start of the degradation, since the run started (default: a fifth of -duration)")
	to := fs.Duration("degrade-to", 0, "end of the degradation (default: half of -duration); from < to <= -duration")
	factor := fs.Float64("factor", d.Factor, fmt.Sprintf("how many times slower the degraded replica is, in (1, %d]", fixture.MaxPhaseFactor))
	delay := fs.String("hedge-delay", "auto", `gateway hedge delay: a duration, "auto" or a percentile ("p90")`)
	window := fs.Duration("probation-window", 0, fmt.Sprintf("probation window: how long a divergence or a recovery must last (default %v; up to %v)", replica.DefaultProbationWindow, probation.MaxWindow))
	pfactor := fs.Float64("probation-factor", 0, fmt.Sprintf("ratio to the peers' median that puts a replica on probation (default %g; > 1)", replica.DefaultProbationFactor))
	shadowRate := fs.Float64("shadow-rate", 0, fmt.Sprintf("shadows per second to a replica on probation (default %g; up to %d)", replica.DefaultShadowRate, probation.MaxShadowRate))
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	const name = "lab probation"
	// Either bound given alone leaves the other at its default.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["degrade-from"] || set["degrade-to"] {
		defFrom, defTo := probation.DefaultDegradation(*duration)
		if !set["degrade-from"] {
			*from = defFrom
		}
		if !set["degrade-to"] {
			*to = defTo
		}
	} else {
		*from, *to = probation.DefaultDegradation(*duration)
	}
	m, err := fixture.ParseModel(*model)
	if err != nil {
		return usageError(stderr, name, fmt.Errorf("-model: %w", err))
	}
	p, err := policyFlag(*delay)
	if err != nil {
		return usageError(stderr, name, err)
	}
	cfg := probation.Config{Duration: *duration, Rate: *rate, Replicas: *replicas, Model: m, DegradeFrom: *from, DegradeTo: *to,
		Factor: *factor, Seed: o.seed, Progress: progress(stderr, "probation"),
		Gateway: gateway.Config{Policy: p, Replica: replica.Config{Probation: replica.Probation{Window: *window, Factor: *pfactor, ShadowRate: *shadowRate}}}}
	return o.run(ctx, "probation", stdout, stderr, cfg.Validate, func(ctx context.Context) (exp.Report, any, []any, error) {
		rep, err := probation.Run(ctx, cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		type second struct {
			Experiment string `json:"experiment"`
			Line       string `json:"line"`
			Condition  string `json:"condition"`
			probation.Second
		}
		type summary struct {
			Experiment string `json:"experiment"`
			Line       string `json:"line"`
			probation.Result
		}
		var lines []any
		for _, run := range rep.Runs {
			for _, s := range run.Seconds {
				lines = append(lines, second{"probation", "second", run.Condition, s})
			}
		}
		for _, run := range rep.Runs {
			run.Seconds = nil // one line each, above
			lines = append(lines, summary{"probation", "summary", run})
		}
		return rep, rep.Config, lines, nil
	})
}
