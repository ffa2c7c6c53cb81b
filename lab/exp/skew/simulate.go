package skew

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/report"
	"github.com/tailgate-dev/tailgate/lab/sim"
	"github.com/tailgate-dev/tailgate/partition"
)

// SimConfig configures Simulate: the skew experiment's placements at
// fleet scale in the simulator (sim.Skew), without sockets, hedging or
// failures. Zero fields take the defaults shown.
type SimConfig struct {
	// Replicas is the tier's size. Default 1000; within [2,
	// MaxSimReplicas].
	Replicas int
	// Workers, CacheKeys, Exponent, Hit, Miss and Load are as in Config.
	// Defaults as Config's.
	Workers   int
	CacheKeys int
	Exponent  float64
	Hit, Miss time.Duration
	Load      float64
	// Keys is the key space. Default 250 a replica (Config's 2000 for 8
	// replicas); within [1, sim.MaxZipfKeys].
	Keys int
	// Requests is how many reads each placement is simulated for, the
	// first third of them a warm-up. Default 2,000,000; within [1000,
	// MaxSimRequests].
	Requests int
	// Partitions configures the micro-partition placements' tables. Its
	// zero fields take the simulation's defaults: 20 partitions a replica
	// (20,000 for 1,000 replicas), a Window of 2 s and a Cooldown of 1 s of
	// virtual time, MovesPerRound a fiftieth of the replicas (20 for
	// 1,000: a fleet moves more partitions a round than 8 replicas do), and
	// the package's defaults for the rest.
	Partitions partition.Config
	// RebalanceEvery is how often, in virtual time, a round runs. Default
	// 250ms.
	RebalanceEvery time.Duration
	// Gateways is how many gateways route the micro-partition placements'
	// reads, each with a partition table of its own fed the reads it
	// routes, the reads dealt to them in turn (a round-robin balancer in
	// front): whether gateways that do not talk agree on the homes, and
	// what it costs when they do not. Default 1; within [1, MaxGateways].
	Gateways int
	// Seed makes the simulation reproducible. Default 1.
	Seed uint64
	// Progress, when non-nil, is told as each placement completes.
	Progress func(done, total int)
}

// Limits of a simulation.
const (
	MaxSimReplicas = 100_000
	MaxSimRequests = 100_000_000
	MaxGateways    = 16
)

// SimDefaults returns the configuration a zero SimConfig runs with but
// for Partitions.MovesPerRound, which follows Replicas (a fiftieth, at
// least the package's default).
func SimDefaults() SimConfig {
	d := Defaults()
	return SimConfig{Replicas: 1000, Workers: d.Workers, CacheKeys: d.CacheKeys, Exponent: d.Exponent, Hit: d.Hit, Miss: d.Miss, Load: d.Load,
		Keys: 250_000, Requests: 2_000_000, Partitions: partition.Config{Window: 2 * time.Second, Cooldown: time.Second},
		RebalanceEvery: 250 * time.Millisecond, Gateways: 1, Seed: 1}
}

func (cfg SimConfig) withDefaults() SimConfig {
	d := SimDefaults()
	exp.Default(&cfg.Replicas, d.Replicas)
	exp.Default(&cfg.Workers, d.Workers)
	exp.Default(&cfg.CacheKeys, d.CacheKeys)
	exp.Default(&cfg.Exponent, d.Exponent)
	exp.Default(&cfg.Hit, d.Hit)
	exp.Default(&cfg.Miss, d.Miss)
	exp.Default(&cfg.Load, d.Load)
	exp.Default(&cfg.Keys, d.Keys)
	exp.Default(&cfg.Requests, d.Requests)
	exp.Default(&cfg.Partitions.Window, d.Partitions.Window)
	exp.Default(&cfg.Partitions.Cooldown, d.Partitions.Cooldown)
	exp.Default(&cfg.Partitions.MovesPerRound, max(cfg.Replicas/50, partition.DefaultMovesPerRound))
	exp.Default(&cfg.RebalanceEvery, d.RebalanceEvery)
	exp.Default(&cfg.Gateways, d.Gateways)
	exp.Default(&cfg.Seed, d.Seed)
	return cfg
}

// Validate checks cfg as given, with its defaults filled in (Simulate
// fills them first).
func (cfg SimConfig) Validate() error {
	_, _, err := cfg.setup()
	return err
}

// SimSetup is a simulation's configuration with its defaults filled in,
// and what follows from it.
type SimSetup struct {
	Tier
	Requests       int      `json:"requests"`
	Warmup         int      `json:"warmup"`
	VirtualSeconds float64  `json:"virtualSeconds"`
	Partitions     settings `json:"partitions"`
	Gateways       int      `json:"gateways"`
	Seed           uint64   `json:"seed"`
	Policies       []string `json:"policies"`
}

func (cfg SimConfig) setup() (SimSetup, sim.SkewConfig, error) {
	c := exp.NewChecker("skew")
	tier, z := tierSpec{cfg.Replicas, cfg.Workers, cfg.Keys, cfg.CacheKeys, cfg.Exponent, cfg.Hit, cfg.Miss, cfg.Load,
		MaxSimReplicas, sim.MaxSkewWorkers, sim.MaxZipfKeys}.plan(c)
	exp.Within(c, "sim-requests", cfg.Requests, 1000, MaxSimRequests)
	exp.Above(c, "rebalance-every", cfg.RebalanceEvery, 0, 10*time.Second)
	exp.Within(c, "gateways", cfg.Gateways, 1, MaxGateways)
	if c.Err() != nil {
		return SimSetup{}, sim.SkewConfig{}, c.Err()
	}
	if _, err := partition.New(simNames(cfg.Replicas), cfg.Partitions); err != nil {
		return SimSetup{}, sim.SkewConfig{}, &exp.FieldError{Experiment: "skew", Problem: "partitions: " + err.Error()}
	}
	s := SimSetup{Tier: tier, Requests: cfg.Requests, Warmup: cfg.Requests / 3, Partitions: settingsOf(cfg.Partitions, cfg.RebalanceEvery),
		Gateways: cfg.Gateways, Seed: cfg.Seed}
	s.VirtualSeconds = exp.Round3(float64(cfg.Requests) / s.Rate)
	for _, p := range policies() {
		if !p.hedging {
			s.Policies = append(s.Policies, p.Name)
		}
	}
	sc := sim.SkewConfig{Replicas: cfg.Replicas, Workers: cfg.Workers, CacheKeys: cfg.CacheKeys, Hit: cfg.Hit, Miss: cfg.Miss, Zipf: z,
		Rate: s.Rate, Requests: cfg.Requests, Warmup: s.Warmup, Seed: cfg.Seed}
	return s, sc, nil
}

// simNames names n simulated replicas r0, r1, ...
func simNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "r" + strconv.Itoa(i)
	}
	return names
}

// SimResult is one placement's simulation (see sim.SkewResult): over
// the reads after the warm-up, latency from arrival to the end of service.
type SimResult struct {
	Policy   string  `json:"policy"`
	Requests int     `json:"requests"`
	P50Ms    float64 `json:"p50Ms"`
	P99Ms    float64 `json:"p99Ms"`
	P999Ms   float64 `json:"p999Ms"`
	Balance
	// TopHotKeyShare is the most read hot key's share of all reads at the
	// end, over its replicas: what one of them must take from it alone.
	TopHotKeyShare float64 `json:"topHotKeyShare"`
	// HomesDiffer counts the partitions whose home was not the same in
	// every gateway's table at the end (micro-partitions, Gateways > 1).
	HomesDiffer     int     `json:"homesDiffer"`
	AttemptsPerRead float64 `json:"attemptsPerRead"`
}

// SimReport is the simulated skew experiment's report.
type SimReport struct {
	exp.Header
	Config  SimSetup    `json:"config"`
	Results []SimResult `json:"results"`
}

// Simulate runs the skew experiment's placements (without hedging) in the
// simulator: cfg.Replicas virtual cache servers, reads in virtual time.
// The placements are independent and each single-threaded: they run side
// by side, and each result depends only on its own seeded draws.
func Simulate(ctx context.Context, cfg SimConfig) (*SimReport, error) {
	cfg = cfg.withDefaults()
	s, sc, err := cfg.setup()
	if err != nil {
		return nil, err
	}
	rep := &SimReport{Header: exp.Start("skew-simulated", cfg.Seed), Config: s}
	var ps []Policy
	for _, p := range policies() {
		if !p.hedging {
			ps = append(ps, p)
		}
	}
	rep.Results = make([]SimResult, len(ps))
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range ps {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rep.Results[i], errs[i] = simulateOne(ps[i], cfg, s, sc)
		})
	}
	wg.Wait()
	if err := exp.Run(ctx, &rep.Header, len(ps), cfg.Progress, func(i int) error { return errs[i] }); err != nil {
		return nil, err
	}
	return rep, nil
}

// simulateOne simulates policy pol.
func simulateOne(pol Policy, cfg SimConfig, s SimSetup, sc sim.SkewConfig) (SimResult, error) {
	p := newSimPlacement(pol, cfg, s)
	if p.table != nil {
		sc.RebalanceEvery = cfg.RebalanceEvery
	}
	r, err := sim.Skew(sc, p)
	if err != nil {
		return SimResult{}, err
	}
	res := SimResult{Policy: pol.Name, Requests: r.Requests, P50Ms: load.Ms(r.P50), P99Ms: load.Ms(r.P99), P999Ms: load.Ms(r.P999), AttemptsPerRead: 1,
		Balance: Balance{HitRatio: exp.Round3(r.HitRatio), LoadMaxOverMean: exp.Round3(r.LoadMaxOverMean), WorkMaxOverMean: exp.Round3(r.BusyMaxOverMean),
			Utilization: exp.Round3(r.Utilization), MaxUtilization: exp.Round3(r.MaxUtilization), PartitionsMoved: r.PartitionsMoved}}
	if p.table != nil {
		snap := p.table.Snapshot()
		res.HotKeys = len(snap.HotKeys)
		if len(snap.HotKeys) > 0 {
			h := snap.HotKeys[0]
			// Each gateway's sketch sees its share of the reads.
			res.TopHotKeyShare = exp.Round3(h.Rate * float64(len(p.tables)) / s.Rate / float64(len(h.Replicas)))
		}
		res.HomesDiffer = homesDiffer(p.tables)
	}
	return res, nil
}

// homesDiffer counts the partitions whose home is not the same in every
// table.
func homesDiffer(tables []*partition.Table) int {
	var homes [][][]string
	for _, t := range tables {
		homes = append(homes, t.Snapshot().Assignment)
	}
	n := 0
	for q := range homes[0] {
		for _, h := range homes[1:] {
			if h[q][0] != homes[0][q][0] {
				n++
				break
			}
		}
	}
	return n
}

// simPlacement places the simulation's keys (Zipf ranks) as a policy does.
type simPlacement struct {
	pol    Policy
	seed   uint64
	n      int
	all    []int
	one    []int
	tables []*partition.Table // micro: one a gateway
	table  *partition.Table   // the table of the gateway routing the read at hand
	next   int                // the gateway the next read is dealt to
	index  map[string]int
	names  []string
	epoch  time.Time // virtual time 0
	// The last key named, and its name: Candidates and Served ask for the
	// same key one after the other.
	lastKey  int
	lastName string
}

func newSimPlacement(pol Policy, cfg SimConfig, s SimSetup) *simPlacement {
	p := &simPlacement{pol: pol, seed: s.Seed, n: cfg.Replicas, one: make([]int, 0, 64), index: map[string]int{},
		names: simNames(cfg.Replicas), epoch: time.Unix(0, 0), lastKey: -1}
	for i, name := range p.names {
		p.all = append(p.all, i)
		p.index[name] = i
	}
	if pol.placement == micro {
		pc := cfg.Partitions
		if !pol.hot {
			pc.HotKeys = -1
		}
		for range cfg.Gateways {
			t, _ := partition.New(p.names, pc) // validated by setup
			p.tables = append(p.tables, t)
		}
		p.table = p.tables[0]
	}
	return p
}

func (p *simPlacement) name(key int) string {
	if key != p.lastKey {
		p.lastKey, p.lastName = key, keyName(p.seed, key)
	}
	return p.lastName
}

// Candidates implements sim.Placement.
func (p *simPlacement) Candidates(key int, now time.Duration) []int {
	switch p.pol.placement {
	case modN:
		p.one = append(p.one[:0], modOf(p.name(key), p.n))
		return p.one
	case micro:
		// A key's home serves it, as in the gateway; a hot key's
		// replicas, or a shared partition's owners, share it. The reads are dealt to the gateways in
		// turn; Served follows with the same read.
		p.table = p.tables[p.next]
		p.next = (p.next + 1) % len(p.tables)
		o := p.table.OwnersAt(p.name(key), p.epoch.Add(now))
		p.one = p.one[:0]
		for _, r := range o.Replicas {
			p.one = append(p.one, p.index[r])
			if !o.Hot && !o.Shared {
				break
			}
		}
		return p.one
	}
	return p.all
}

// Served implements sim.Placement.
func (p *simPlacement) Served(key, replica int, now time.Duration) {
	if p.table != nil {
		p.table.RecordAt(p.name(key), p.names[replica], p.epoch.Add(now))
	}
}

// Rebalance implements sim.Placement: every gateway's round; the moves
// counted are the first gateway's.
func (p *simPlacement) Rebalance(now time.Duration) int {
	moved := 0
	for i, t := range p.tables {
		if n := len(t.RebalanceAt(p.epoch.Add(now))); i == 0 {
			moved = n
		}
	}
	return moved
}

// Section implements exp.Sectioner.
func (r *SimReport) Section() report.Section {
	c := r.Config
	var rows [][]string
	for _, res := range r.Results {
		differ := "—"
		if strings.HasPrefix(res.Policy, Micro) && c.Gateways > 1 {
			differ = strconv.Itoa(res.HomesDiffer)
		}
		rows = append(rows, []string{res.Policy, exp.F1(res.P50Ms), exp.F1(res.P99Ms), exp.F1(res.P999Ms), exp.F3(res.HitRatio),
			exp.F2(res.LoadMaxOverMean), exp.F2(res.WorkMaxOverMean), exp.F2(res.Utilization), exp.F2(res.MaxUtilization),
			strconv.Itoa(res.PartitionsMoved), strconv.Itoa(res.HotKeys), differ})
	}
	return report.Section{
		Heading: fmt.Sprintf("skew, simulated: %d replicas, %d partitions", c.Replicas, c.Replicas*c.Partitions.PartitionsPerReplica),
		Text: fmt.Sprintf("The skew experiment's placements against %d virtual cache servers (an LRU of %d keys, %g ms a hit, %g ms a miss, %d workers each), "+
			"%d reads of %d keys of Zipf popularity with exponent %g (the hottest key draws %.1f%% of them, %.0f× a replica's mean share) at %.0f reads/s (%g of the tier's capacity at its planned hit ratio %.3f), "+
			"in virtual time: no sockets, no hedging; the first third warms the caches and the tables and is not measured. "+
			"A read goes to its key's one replica (under micro-partitions, its partition's home), or to the one with less work queued of two of a key's replicas drawn at random (no affinity; a hot key; a partition too hot for one home). "+
			"Partition tables: %d partitions a replica, %d owners, load bound %g, %d moves a round at most, window %.0f ms, cooldown %.0f ms, a round every %.0f ms of virtual time; up to %d hot keys over %d replicas. "+
			"%d gateway(s) route the micro-partition placements' reads, dealt to them in turn, each with a table of its own fed the reads it routes (moves: the first gateway's; homes differ: the partitions whose home the gateways' tables disagree on at the end).",
			c.Replicas, c.CacheKeys, c.HitMs, c.MissMs, c.Workers, c.Requests, c.Keys, c.Exponent, 100*c.TopKeyShare, c.TopKeyShare*float64(c.Replicas),
			c.Rate, c.Load, c.PlannedHitRatio, c.Partitions.PartitionsPerReplica, c.Partitions.Owners, c.Partitions.LoadBound, c.Partitions.MovesPerRound,
			c.Partitions.WindowMs, c.Partitions.CooldownMs, c.Partitions.RebalanceEveryMs, c.Partitions.HotKeys, c.Partitions.HotReplicas, c.Gateways),
		Tables: []report.Table{{Title: "Simulated placements",
			Columns: []string{"policy", "p50 ms", "p99 ms", "p99.9 ms", "hit ratio", "load max/mean", "work max/mean", "utilization", "busiest", "moves", "hot keys", "homes differ"},
			Rows:    rows, Align: []string{"left"}}},
	}
}
