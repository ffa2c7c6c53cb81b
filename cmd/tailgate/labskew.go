package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/exp/skew"
	"github.com/tailgate-dev/tailgate/partition"
)

func runLabSkew(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lab skew", `A tier of -replicas cache fixtures on 127.0.0.1 (each an LRU of -cache-keys
keys: a hit takes -hit, a miss pays an origin fetch of -miss; -workers at once,
the rest queue) read for -keys keys of Zipf popularity (-exponent) at -load of
the tier's capacity, through four policies on the same arrivals, each hedged
(the hedge engine's default policy, the hedge to another of the key's
replicas) and not: no affinity (power of two choices over every replica,
today's gateway without a key), one partition per replica (hash mod N),
micro-partitions (package partition, rebalancing on: a key's primaries to its
partition's home, as the gateway's affinity mode) and micro-partitions +
selective replication (hot keys over more replicas). One JSON line per policy (p50/p99/
p99.9, hit ratio, load max/mean, partitions moved, hot keys, attempts per
read), then one per run of the -exponents sweep (hedged policies) and one per
goal of issue 14; -html plots the load per replica over time and p99 against
skew. About 3.5 minutes with the defaults (-exponents "" halves it). With
-simulate, the same placements (without hedging) for -replicas virtual
replicas in the simulator instead: no sockets, deterministic for a seed.`, stderr)
	var o outputs
	o.register(fs)
	d := skew.Defaults()
	replicas := fs.Int("replicas", d.Replicas, fmt.Sprintf("cache replicas (2 to %d)", skew.MaxReplicas))
	workers := fs.Int("workers", d.Workers, fmt.Sprintf("reads each replica serves at once (1 to %d)", skew.MaxWorkers))
	keys := fs.Int("keys", d.Keys, fmt.Sprintf("key space (1 to %d)", skew.MaxKeys))
	cacheKeys := fs.Int("cache-keys", d.CacheKeys, "keys each replica caches, an LRU (1 to -keys)")
	exponent := fs.Float64("exponent", d.Exponent, fmt.Sprintf("Zipf exponent of key popularity (0: uniform; up to %g)", skew.MaxExponent))
	hit := fs.Duration("hit", d.Hit, "service time of a read whose key is cached")
	miss := fs.Duration("miss", d.Miss, fmt.Sprintf("service time of a miss, the origin fetch (>= -hit, up to %v)", skew.MaxServiceTime))
	loadShare := fs.Float64("load", d.Load, fmt.Sprintf("offered rate as a share of the tier's capacity at the hit ratio of a tier partitioned by key (up to %g)", skew.MaxLoad))
	warmup := fs.Duration("warmup", d.Warmup, "how long each run reads before its reads count (caches fill, the rebalancer settles)")
	duration := fs.Duration("duration", d.Duration, fmt.Sprintf("how long each run is measured after its warm-up (1s to %v)", skew.MaxDuration))
	var sweep []string
	for _, e := range d.Exponents {
		sweep = append(sweep, strconv.FormatFloat(e, 'g', -1, 64))
	}
	exponents := fs.String("exponents", strings.Join(sweep, ","), fmt.Sprintf(`Zipf exponents of the p99-against-skew sweep, hedged policies only ("" for none; at most %d)`, skew.MaxExponents))
	perReplica := fs.Int("partitions-per-replica", 0, fmt.Sprintf("micro-partitions per replica (default %d)", partition.DefaultPartitionsPerReplica))
	owners := fs.Int("owners", 0, fmt.Sprintf("owners per partition: the first, its home, takes a key's primaries, the others its hedges (default %d)", partition.DefaultOwners))
	bound := fs.Float64("load-bound", 0, fmt.Sprintf("a replica above this × the mean load hands partitions' homes to others (default %g; > 1)", partition.DefaultLoadBound))
	hotKeys := fs.Int("hot-keys", 0, fmt.Sprintf("most keys replicated at once (default %d)", partition.DefaultHotKeys))
	hotReplicas := fs.Int("hot-replicas", 0, fmt.Sprintf("replicas a hot key's reads spread over (default %d)", partition.DefaultHotReplicas))
	window := fs.Duration("window", d.Partitions.Window, "time constant of the partition table's load estimates (the gateway's default is 10s)")
	cooldown := fs.Duration("cooldown", d.Partitions.Cooldown, "least time between rebalancing rounds that move partitions (the gateway's default is 5s)")
	every := fs.Duration("rebalance-every", d.RebalanceEvery, "how often a rebalancing round runs (up to 10s; the gateway's default is 1s)")
	timeout := fs.Duration("timeout", d.Timeout, "bound on each read, hedges included (100ms to 1m)")
	inflight := fs.Float64("inflight-bound", 0, "micro-partitions: judge a key's home per read, as HAProxy's hash-balance-factor: its primary goes to another owner when the home would have more than this × the mean attempts in flight per replica (0, the default and the gateway's way: the home whenever it admits one; else within (1, 10])")
	sd := skew.SimDefaults()
	simulate := fs.Bool("simulate", false, fmt.Sprintf("simulate the placements (no hedging) for -replicas virtual replicas instead (default %d replicas, %d keys, a window of %v and a cooldown of %v of virtual time)",
		sd.Replicas, sd.Keys, sd.Partitions.Window, sd.Partitions.Cooldown))
	simRequests := fs.Int("sim-requests", sd.Requests, fmt.Sprintf("with -simulate: reads per placement, the first third a warm-up (1000 to %d)", skew.MaxSimRequests))
	gateways := fs.Int("gateways", 1, fmt.Sprintf("with -simulate: gateways routing the micro-partition placements' reads in turn, each with its own partition table (1 to %d): whether they agree on the homes without talking", skew.MaxGateways))
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	const name = "lab skew"
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, f := range []struct {
		flag string
		v    int
	}{{"-partitions-per-replica", *perReplica}, {"-owners", *owners}, {"-hot-keys", *hotKeys}, {"-hot-replicas", *hotReplicas}} {
		if f.v < 0 {
			return usageError(stderr, name, fmt.Errorf("%s %d must not be negative", f.flag, f.v))
		}
	}
	parts := partition.Config{PartitionsPerReplica: *perReplica, Owners: *owners, LoadBound: *bound, HotKeys: *hotKeys, HotReplicas: *hotReplicas,
		Window: *window, Cooldown: *cooldown}
	if *simulate && set["inflight-bound"] {
		return usageError(stderr, name, errors.New("-inflight-bound applies to loopback runs, not -simulate"))
	}
	if *simulate {
		cfg := skew.SimConfig{Workers: *workers, CacheKeys: *cacheKeys, Exponent: *exponent, Hit: *hit, Miss: *miss, Load: *loadShare,
			Requests: *simRequests, Partitions: parts, RebalanceEvery: *every, Gateways: *gateways, Seed: o.seed, Progress: progress(stderr, "skew")}
		// Flags whose defaults are the loopback tier's take the
		// simulation's unless given.
		cfg.Replicas, cfg.Keys = sd.Replicas, sd.Keys
		if set["replicas"] {
			cfg.Replicas = *replicas
		}
		if set["keys"] {
			cfg.Keys = *keys
		}
		if !set["window"] {
			cfg.Partitions.Window = sd.Partitions.Window
		}
		if !set["cooldown"] {
			cfg.Partitions.Cooldown = sd.Partitions.Cooldown
		}
		return o.run(ctx, "skew", stdout, stderr, cfg.Validate, func(ctx context.Context) (exp.Report, any, []any, error) {
			rep, err := skew.Simulate(ctx, cfg)
			if err != nil {
				return nil, nil, nil, err
			}
			type result struct {
				Experiment string `json:"experiment"`
				skew.SimResult
			}
			var lines []any
			for _, r := range rep.Results {
				lines = append(lines, result{"skew-simulated", r})
			}
			return rep, rep.Config, lines, nil
		})
	}
	if set["sim-requests"] || set["gateways"] {
		return usageError(stderr, name, errors.New("-sim-requests and -gateways need -simulate"))
	}
	cfg := skew.Config{Replicas: *replicas, Workers: *workers, Keys: *keys, CacheKeys: *cacheKeys, Exponent: *exponent, Hit: *hit, Miss: *miss,
		Load: *loadShare, Warmup: *warmup, Duration: *duration, Exponents: []float64{}, RebalanceEvery: *every, Timeout: *timeout, InFlightBound: *inflight, Seed: o.seed,
		Partitions: parts, Progress: progress(stderr, "skew")}
	if *warmup == 0 { // on the command line 0 means none; in a Config, the default
		cfg.Warmup = skew.NoWarmup
	}
	for _, s := range splitList(*exponents) {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return usageError(stderr, name, fmt.Errorf("-exponents: %q is not a number", s))
		}
		cfg.Exponents = append(cfg.Exponents, x)
	}
	return o.run(ctx, "skew", stdout, stderr, cfg.Validate, func(ctx context.Context) (exp.Report, any, []any, error) {
		rep, err := skew.Run(ctx, cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		type result struct {
			Experiment string `json:"experiment"`
			Line       string `json:"line"`
			skew.Result
		}
		type goal struct {
			Experiment string `json:"experiment"`
			Line       string `json:"line"`
			skew.Goal
		}
		var lines []any
		for _, set := range []struct {
			line string
			rs   []skew.Result
		}{{"policy", rep.Results}, {"sweep", rep.Sweep}} {
			for _, r := range set.rs {
				r.Timeline = nil // in -out and -html
				lines = append(lines, result{"skew", set.line, r})
			}
		}
		for _, g := range rep.Goals {
			lines = append(lines, goal{"skew", "goal", g})
		}
		return rep, rep.Config, lines, nil
	})
}
