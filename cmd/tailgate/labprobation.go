package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/internal/lab"
	"github.com/tailgate-dev/tailgate/replica"
)

// Limits of the probation experiment's flags: everything runs on this
// machine, two runs in a row.
const (
	maxProbationDuration   = lab.MaxProbationDuration
	maxProbationRate       = lab.MaxProbationRate
	maxProbationWindow     = time.Minute
	maxProbationShadowRate = 100
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
	duration := fs.Duration("duration", lab.DefaultProbationDuration, fmt.Sprintf("how long each run offers reads (1s to %v)", maxProbationDuration))
	rate := fs.Float64("rate", lab.DefaultProbationRate, fmt.Sprintf("reads per second (open loop; (0, %v], at most %d reads per run)", maxProbationRate, lab.MaxProbationReads))
	replicas := fs.Int("replicas", lab.DefaultProbationReplicas, fmt.Sprintf("replicas behind the gateway (2 to %d); the last one degrades", lab.MaxProbationReplicas))
	model := fs.String("model", lab.DefaultProbationModel.String(), "service time of every replica, and of the degraded one outside its degradation; see tailgate fixture -h")
	from := fs.Duration("degrade-from", 0, "start of the degradation, since the run started (default: a fifth of -duration)")
	to := fs.Duration("degrade-to", 0, "end of the degradation (default: half of -duration); from < to <= -duration")
	factor := fs.Float64("factor", lab.DefaultProbationFactor, "how many times slower the degraded replica is, in (1, 1000]")
	delay := fs.String("hedge-delay", "auto", `gateway hedge delay: a duration, "auto" or a percentile ("p90")`)
	window := fs.Duration("probation-window", 0, fmt.Sprintf("probation window: how long a divergence or a recovery must last (default %v; up to %v)", replica.DefaultProbationWindow, maxProbationWindow))
	pfactor := fs.Float64("probation-factor", 0, fmt.Sprintf("ratio to the peers' median that puts a replica on probation (default %g; > 1)", replica.DefaultProbationFactor))
	shadowRate := fs.Float64("shadow-rate", 0, fmt.Sprintf("shadows per second to a replica on probation (default %g; up to %d)", replica.DefaultShadowRate, maxProbationShadowRate))
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	const name = "lab probation"
	switch {
	case *duration < time.Second || *duration > maxProbationDuration:
		return usageError(stderr, name, fmt.Errorf("-duration %v must be within [1s, %v]", *duration, maxProbationDuration))
	case !(*rate > 0 && *rate <= maxProbationRate):
		return usageError(stderr, name, fmt.Errorf("-rate %v must be within (0, %v]", *rate, maxProbationRate))
	case *rate*duration.Seconds() > lab.MaxProbationReads:
		return usageError(stderr, name, fmt.Errorf("-rate %v for -duration %v would be %.0f reads per run: keep it within %d", *rate, *duration, *rate*duration.Seconds(), lab.MaxProbationReads))
	case *replicas < 2 || *replicas > lab.MaxProbationReplicas:
		return usageError(stderr, name, fmt.Errorf("-replicas %d must be within [2, %d]", *replicas, lab.MaxProbationReplicas))
	case *from < 0 || *to < 0:
		return usageError(stderr, name, fmt.Errorf("-degrade-from %v and -degrade-to %v must not be negative", *from, *to))
	case !(*factor > 1 && *factor <= 1000):
		return usageError(stderr, name, fmt.Errorf("-factor %v must be within (1, 1000]", *factor))
	case *window < 0 || *window > maxProbationWindow:
		return usageError(stderr, name, fmt.Errorf("-probation-window %v must be within [0, %v] (0: the default)", *window, maxProbationWindow))
	case *pfactor != 0 && !(*pfactor > 1 && *pfactor <= 1000):
		return usageError(stderr, name, fmt.Errorf("-probation-factor %v must be within (1, 1000] (0: the default)", *pfactor))
	case *shadowRate < 0 || *shadowRate > maxProbationShadowRate:
		return usageError(stderr, name, fmt.Errorf("-shadow-rate %v must be within [0, %d] (0: the default)", *shadowRate, maxProbationShadowRate))
	}
	// Either bound given alone leaves the other at its default.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["degrade-from"] || set["degrade-to"] {
		if !set["degrade-from"] {
			*from = *duration / 5
		}
		if !set["degrade-to"] {
			*to = *duration / 2
		}
		if !(*from < *to && *to <= *duration) {
			return usageError(stderr, name, fmt.Errorf("-degrade-from %v and -degrade-to %v must satisfy from < to <= -duration %v", *from, *to, *duration))
		}
	}
	m, err := lab.ParseModel(*model)
	if err != nil {
		return usageError(stderr, name, fmt.Errorf("-model: %w", err))
	}
	p, err := policyFlag(*delay)
	if err != nil {
		return usageError(stderr, name, err)
	}
	cfg := lab.ProbationConfig{Duration: *duration, Rate: *rate, Replicas: *replicas, Model: m, DegradeFrom: *from, DegradeTo: *to,
		Factor: *factor, Seed: o.seed, Progress: progress(stderr, "probation"),
		Gateway: gateway.Config{Policy: p, Replica: replica.Config{Probation: replica.Probation{Window: *window, Factor: *pfactor, ShadowRate: *shadowRate}}}}
	if _, err := cfg.Check(); err != nil {
		return usageError(stderr, name, err)
	}
	if err := o.check(); err != nil {
		return usageError(stderr, name, err)
	}
	rep, err := lab.RunProbation(ctx, cfg)
	if err != nil {
		if errors.Is(err, lab.ErrProbationConfig) {
			return usageError(stderr, name, err)
		}
		return failed(stderr, "probation", err)
	}
	type second struct {
		Experiment string `json:"experiment"`
		Line       string `json:"line"`
		Condition  string `json:"condition"`
		lab.ProbationSecond
	}
	type summary struct {
		Experiment string `json:"experiment"`
		Line       string `json:"line"`
		lab.ProbationRun
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
	return o.write("probation", stdout, stderr, rep, rep.Environment, rep.Config, lines...)
}
