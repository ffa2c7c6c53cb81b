package skew

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/partition"
	"github.com/tailgate-dev/tailgate/replica"
)

// Run runs the skew experiment: for each policy in turn, Replicas cache
// fixtures on 127.0.0.1, fresh (cold caches) for each run, read in open
// loop at Rate for Warmup + Duration by a client that routes each read as
// the policy says (see router) and hedges it with the hedge engine's
// default policy, or not at all; then, for each exponent of the sweep, the
// hedged policies again on reads of that skew. Every run of an exponent
// reads the same arrivals of the same keys. Latency is from each read's
// scheduled time, and a read that fails or times out counts as infinitely
// slow; the hit ratio, the load and the work per replica are the
// fixtures' own counts, over the reads that arrived after the warm-up.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	s, err := cfg.setup()
	if err != nil {
		return nil, err
	}
	cfg.Warmup = max(cfg.Warmup, 0) // NoWarmup
	rep := &Report{Header: exp.Start("skew", cfg.Seed), Config: s}
	type job struct {
		exponent, rate float64
		pol            Policy
		sweep          bool
	}
	var jobs []job
	for _, p := range policies() {
		jobs = append(jobs, job{cfg.Exponent, s.Rate, p, false})
	}
	for i, e := range cfg.Exponents {
		for _, p := range policies() {
			if p.hedging {
				jobs = append(jobs, job{e, s.SweepRates[i], p, true})
			}
		}
	}
	keys := map[float64][]string{}
	err = exp.Run(ctx, &rep.Header, len(jobs), cfg.Progress, func(i int) error {
		j := jobs[i]
		if keys[j.exponent] == nil {
			ks, err := Keys(cfg.Keys, j.exponent, Arrivals(j.rate, cfg.Warmup+cfg.Duration, s.Seed).Requests, s.Seed)
			if err != nil {
				return err
			}
			keys[j.exponent] = ks
		}
		res, err := runOne(ctx, cfg, s, j.pol, j.exponent, j.rate, keys[j.exponent])
		if err != nil {
			return fmt.Errorf("lab: skew, %s at exponent %g: %w", j.pol.Name, j.exponent, err)
		}
		if j.sweep {
			rep.Sweep = append(rep.Sweep, res)
		} else {
			rep.Results = append(rep.Results, res)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.Goals = goals(rep.Results)
	return rep, nil
}

// bucket is the width of the load timeline's buckets.
const bucket = 500 * time.Millisecond

// arrivals counts what each replica receives: per bucket of the run, and
// after the warm-up. It is safe for concurrent use.
type arrivals struct {
	start    atomic.Int64 // Unix ns the run's reads start; 0 before
	warmup   time.Duration
	buckets  [][]atomic.Int64 // [replica][bucket]
	measured []atomic.Int64   // [replica]
}

func newArrivals(replicas int, run, warmup time.Duration) *arrivals {
	a := &arrivals{warmup: warmup, buckets: make([][]atomic.Int64, replicas), measured: make([]atomic.Int64, replicas)}
	for i := range a.buckets {
		a.buckets[i] = make([]atomic.Int64, int((run+bucket-1)/bucket))
	}
	return a
}

// wrap counts replica i's arrivals (reads, not /stats).
func (a *arrivals) wrap(i int) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if start := a.start.Load(); start > 0 && r.URL.Path != "/stats" {
				at := time.Duration(time.Now().UnixNano() - start)
				if b := int(at / bucket); b >= 0 && b < len(a.buckets[i]) {
					a.buckets[i][b].Add(1)
				}
				if at >= a.warmup {
					a.measured[i].Add(1)
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// runOne runs one policy on fresh fixtures, reading keys[i] as read i.
func runOne(ctx context.Context, cfg Config, s Setup, pol Policy, exponent, rate float64, keys []string) (Result, error) {
	res := Result{Policy: pol.Name, Exponent: exponent, Rate: rate, Hedging: pol.hedging}
	arr := newArrivals(s.Replicas, cfg.Warmup+cfg.Duration, cfg.Warmup)
	var fixtures []*fixture.Fixture
	defer func() { fixture.CloseAll(fixtures) }()
	r := &router{pol: pol, names: s.ReplicaNames, index: map[string]int{}, attempts: make([]atomic.Int32, len(keys)),
		suppressed: make([]hedge.Suppressions, len(keys)), bound: cfg.InFlightBound}
	for i, name := range s.ReplicaNames {
		f, err := fixture.Start(fixture.Config{Name: name, Seed: s.Seed*1_000_003 + uint64(i), Capacity: cfg.Workers, Middleware: arr.wrap(i),
			Cache: &fixture.Cache{Keys: cfg.CacheKeys, Hit: fixture.Constant(cfg.Hit), Miss: fixture.Constant(cfg.Miss)}})
		if err != nil {
			return res, err
		}
		fixtures = append(fixtures, f)
		r.urls = append(r.urls, f.URL())
		r.index[name] = i
	}
	var err error
	if r.set, err = replica.New(s.ReplicaNames, replica.Config{Seed: s.PickSeed}); err != nil {
		return res, err
	}
	if pol.placement == micro {
		pc := cfg.Partitions
		if !pol.hot {
			pc.HotKeys = -1
		}
		if r.table, err = partition.New(s.ReplicaNames, pc); err != nil {
			return res, err
		}
	}
	hp := hedge.Policy{Timeout: cfg.Timeout}
	if !pol.hedging {
		hp.MaxAttempts = 1
	}
	if r.hedger, err = hedge.New(hp); err != nil {
		return res, err
	}
	base := hedge.NewBaseTransport()
	base.MaxIdleConnsPerHost = 256
	r.client = &http.Client{Transport: base}
	defer base.CloseIdleConnections()

	start := time.Now()
	arr.start.Store(start.UnixNano())
	stop := make(chan struct{})
	var bg sync.WaitGroup
	// The counters as the warm-up ends and as the run ends, for the hit
	// ratio and the work in between.
	var marks [2][]fixture.Stats
	bg.Go(func() {
		for k, at := range []time.Duration{cfg.Warmup, cfg.Warmup + cfg.Duration} {
			t := time.NewTimer(time.Until(start.Add(at)))
			select {
			case <-t.C:
			case <-stop:
			}
			t.Stop()
			for _, f := range fixtures {
				marks[k] = append(marks[k], f.Stats())
			}
			if k == 1 {
				hs := r.hedger.Stats()
				res.HedgeDelayMs, res.Gate = load.Ms(hs.Delay), hs.Gate.String()
			}
		}
	})
	if r.table != nil {
		bg.Go(func() {
			tick := time.NewTicker(cfg.RebalanceEvery)
			defer tick.Stop()
			for {
				select {
				case now := <-tick.C:
					res.PartitionsMoved += len(r.table.RebalanceAt(now))
					if now.Sub(start) >= cfg.Warmup {
						res.HotKeysMax = max(res.HotKeysMax, len(r.table.Snapshot().HotKeys))
					}
				case <-stop:
					return
				}
			}
		})
	}
	offer := Arrivals(rate, cfg.Warmup+cfg.Duration, s.Seed)
	offer.Concurrency = int(rate*cfg.Timeout.Seconds()) + 100 // a read is dropped only if the client could not have waited for it
	outs := load.Generate(ctx, offer, func(ctx context.Context, i int) error {
		arrived := time.Now()
		if !WarmupSends(s.Seed, i, arrived.Sub(start), cfg.Warmup) {
			return nil // thinned out of the warm-up's ramp
		}
		rd := &read{id: i, key: keys[i]}
		winner, err := r.do(ctx, rd)
		if err != nil {
			winner = -1
		}
		r.record(rd, winner, arrived)
		return err
	})
	close(stop)
	bg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	// Work that outlived its read (a hedge's loser, a timed-out read)
	// fills caches and holds workers: let it finish, so it is counted.
	if err := fixture.SettleAll(ctx, fixtures); err != nil {
		return res, err
	}
	if pol.hedging {
		if missing := exp.AwaitReceipts(ctx, &r.receipts, int(r.sent.Load())); missing > 0 {
			return res, fmt.Errorf("%d reads' receipts never came", missing)
		}
	}
	res.finish(cfg, s, outs, marks, fixtures, arr, r)
	if r.table != nil {
		snap := r.table.Snapshot()
		for i := range res.Replicas {
			res.Replicas[i].Model = exp.Round3(snap.Replicas[i].Load)
		}
		res.HotKeys = len(snap.HotKeys)
		res.PartitionsAway = snap.Moved
		for _, h := range snap.HotKeys {
			res.HotKeyNames = append(res.HotKeyNames, h.Key)
		}
	}
	return res, nil
}
