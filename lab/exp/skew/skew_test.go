package skew

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/partition"
	"github.com/tailgate-dev/tailgate/replica"
)

func TestConfigDefaults(t *testing.T) {
	cfg := Config{}.withDefaults()
	s, err := cfg.setup()
	if err != nil {
		t.Fatal(err)
	}
	// The tier is sized at the hit ratio of a tier partitioned by key:
	// 8 × 2 workers over 0.89 × 10ms + 0.11 × 50ms.
	if s.PlannedHitRatio < 0.85 || s.PlannedHitRatio > 0.93 || s.NoAffinityHitRatio > s.PlannedHitRatio-0.2 {
		t.Errorf("hit ratios planned %v, without affinity %v", s.PlannedHitRatio, s.NoAffinityHitRatio)
	}
	mean := s.PlannedHitRatio*10 + (1-s.PlannedHitRatio)*50
	if want := 16 * 1000 / mean; math.Abs(s.CapacityPerSec-want) > 2 || math.Abs(s.Rate-0.7*s.CapacityPerSec) > 1 {
		t.Errorf("capacity %v (want %.0f), rate %v", s.CapacityPerSec, want, s.Rate)
	}
	if len(s.Policies) != 8 || s.Policies[0] != NoAffinity || s.Policies[7] != MicroHot+noHedgeTitle || s.Partitions.WindowMs != 1000 ||
		s.Partitions.Owners != partition.DefaultOwners || s.MaxAttempts != 2 || len(s.Exponents) != 2 {
		t.Errorf("setup %+v", s)
	}
}

func TestConfigRejects(t *testing.T) {
	for field, mod := range map[string]func(*Config){
		"replicas":        func(c *Config) { c.Replicas = 17 },
		"workers":         func(c *Config) { c.Workers = -1 },
		"cache-keys":      func(c *Config) { c.CacheKeys = c.Keys + 1 },
		"exponent":        func(c *Config) { c.Exponent = math.NaN() },
		"hit":             func(c *Config) { c.Hit = time.Second },
		"miss":            func(c *Config) { c.Miss = 2 * time.Second },
		"load":            func(c *Config) { c.Load = 3 },
		"duration":        func(c *Config) { c.Duration = time.Millisecond },
		"warmup":          func(c *Config) { c.Warmup = -time.Second },
		"exponents":       func(c *Config) { c.Exponents = []float64{1, 4} },
		"rebalance-every": func(c *Config) { c.RebalanceEvery = time.Minute },
		"timeout":         func(c *Config) { c.Timeout = time.Millisecond },
		"inflight-bound":  func(c *Config) { c.InFlightBound = 0.5 },
	} {
		cfg := Config{}.withDefaults()
		mod(&cfg)
		err := cfg.Validate()
		var fe *exp.FieldError
		if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, exp.ErrConfig) {
			t.Errorf("%s: %v", field, err)
		}
	}
	// Too fast for one machine: many fast workers.
	cfg := Config{Workers: 16, Hit: time.Millisecond, Miss: 2 * time.Millisecond}.withDefaults()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "reads/s") {
		t.Errorf("rate past the limit: %v", err)
	}
	cfg = Config{Partitions: partition.Config{LoadBound: 0.5}}.withDefaults()
	if err := cfg.Validate(); !errors.Is(err, exp.ErrConfig) || !strings.Contains(err.Error(), "LoadBound") {
		t.Errorf("partitions: %v", err)
	}
}

func TestKeyNamesFollowTheSeed(t *testing.T) {
	seen := map[string]bool{}
	for r := range 10_000 {
		seen[keyName(1, r)] = true
	}
	if len(seen) != 10_000 || keyName(1, 0) == keyName(2, 0) || keyName(1, 5) != keyName(1, 5) {
		t.Errorf("%d distinct names of 10000; seed 1 and 2 name rank 0 %s and %s", len(seen), keyName(1, 0), keyName(2, 0))
	}
}

// Hash mod N is a fixed function of the key: the same replica in every
// run, every process, spread evenly over many keys.
func TestModOfIsFixedAndEven(t *testing.T) {
	if got := modOf("k-fixed", 8); got != 1 { // FNV-1a("k-fixed") mod 8
		t.Errorf("modOf(k-fixed, 8) = %d, want 1", got)
	}
	counts := make([]int, 8)
	for r := range 80_000 {
		counts[modOf(keyName(7, r), 8)]++
	}
	for i, c := range counts {
		if c < 9500 || c > 10500 {
			t.Errorf("replica %d got %d of 80000 keys", i, c)
		}
	}
}

// newTestRouter builds a router over n replicas named as the experiment
// names them, without sockets.
func newTestRouter(t *testing.T, pol Policy, n int) *router {
	t.Helper()
	names := replicaNames(n)
	r := &router{pol: pol, names: names, index: map[string]int{}, attempts: make([]atomic.Int32, 1)}
	for i, name := range names {
		r.index[name] = i
	}
	var err error
	if r.set, err = replica.New(names, replica.Config{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if pol.placement == micro {
		if r.table, err = partition.New(names, partition.Config{}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// pickBoth picks a read's primary and then its hedge, as the hedge engine
// does, and gives the tickets back.
func pickBoth(t *testing.T, r *router, key string) (primary, hedged int) {
	t.Helper()
	rd := &read{key: key}
	r.route(rd, time.Now())
	p, ok := r.pick(rd, hedge.Attempt{Index: 0}, nil)
	if !ok {
		t.Fatalf("%s: no primary", key)
	}
	h, ok := r.pick(rd, hedge.Attempt{Index: 1}, []int{p})
	if !ok {
		t.Fatalf("%s: no hedge", key)
	}
	if rd.useRoute {
		rd.route.Done(0, replica.Success, time.Millisecond)
		rd.route.Done(1, replica.Canceled, time.Millisecond)
	} else {
		r.set.Done(rd.tickets[0], replica.Success, time.Now())
		r.set.Done(rd.tickets[1], replica.Canceled, time.Now())
	}
	return p, h
}

func TestRoutingOnePartitionPerReplica(t *testing.T) {
	r := newTestRouter(t, Policy{Name: OnePerRepl, placement: modN, hedging: true}, 8)
	for k := range 200 {
		key := keyName(3, k)
		for range 3 { // the same replica every time, whatever the load
			p, h := pickBoth(t, r, key)
			if want := modOf(key, 8); p != want || h != (want+1)%8 {
				t.Fatalf("%s: primary %d, hedge %d; want %d and %d", key, p, h, want, (want+1)%8)
			}
		}
	}
	if r.fallbacks.Load() != 0 || r.launched.Load() != 200*3*2 {
		t.Errorf("fallbacks %d, attempts %d", r.fallbacks.Load(), r.launched.Load())
	}
}

func TestRoutingMicroPartitionsStaysWithOwners(t *testing.T) {
	r := newTestRouter(t, Policy{Name: Micro, placement: micro, hedging: true}, 8)
	for k := range 200 {
		key := keyName(3, k)
		owners := r.table.OwnersAt(key, time.Now()).Replicas
		p, h := pickBoth(t, r, key)
		if p == h || !slices.Contains(owners, r.names[p]) || !slices.Contains(owners, r.names[h]) {
			t.Fatalf("%s: primary %s, hedge %s; owners %v", key, r.names[p], r.names[h], owners)
		}
	}
	// Without affinity, any replica.
	r = newTestRouter(t, Policy{Name: NoAffinity, hedging: true}, 8)
	seen := map[int]bool{}
	for k := range 200 {
		p, h := pickBoth(t, r, "same-key")
		seen[p] = true
		if p == h {
			t.Fatalf("read %d: the hedge went to the primary's replica %d", k, p)
		}
	}
	if len(seen) < 4 {
		t.Errorf("without affinity one key's primaries went to %d replicas only", len(seen))
	}
}

// Under micro-partitions a key's primaries go to its home, its
// partition's first owner, however loaded; with an in-flight bound, a
// home past it sends them to another owner.
func TestRoutingMicroPartitionsSendsPrimariesHome(t *testing.T) {
	r := newTestRouter(t, Policy{Name: Micro, placement: micro, hedging: true}, 4)
	key := keyName(3, 0)
	owners := r.table.OwnersAt(key, time.Now()).Replicas
	home := r.index[owners[0]]
	var held []replica.Ticket
	for range 6 { // the home busy with six reads, the others idle
		_, t, _ := r.set.Pick(time.Now(), replica.Attempt{Role: replica.Primary, Among: []int{home}})
		held = append(held, t)
	}
	for range 20 {
		if p, _ := pickBoth(t, r, key); p != home {
			t.Fatalf("primary %s, want the home %s of %v", r.names[p], owners[0], owners)
		}
	}
	r.bound = 1.25
	if p, _ := pickBoth(t, r, key); p == home || !slices.Contains(owners, r.names[p]) {
		t.Fatalf("with an in-flight bound, primary %s; want another owner than the busy home, of %v", r.names[p], owners)
	}
	for _, tk := range held {
		r.set.Done(tk, replica.Success, time.Now())
	}
}

// A short run on loopback: every policy is reported, and its figures are
// what they can be.
func TestRunShort(t *testing.T) {
	if testing.Short() {
		t.Skip("loopback run")
	}
	cfg := Config{Replicas: 3, Workers: 2, Keys: 300, CacheKeys: 30, Hit: 2 * time.Millisecond, Miss: 8 * time.Millisecond, Load: 0.3,
		Warmup: 200 * time.Millisecond, Duration: time.Second, Exponents: []float64{1.4}, Seed: 3}
	var progress []int
	cfg.Progress = func(done, total int) { progress = append(progress, done) }
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 8 || len(rep.Sweep) != 4 || len(progress) != 12 || len(rep.Goals) != 10 {
		t.Fatalf("%d results, %d sweep runs, progress %v, %d goals", len(rep.Results), len(rep.Sweep), progress, len(rep.Goals))
	}
	for i, res := range slices.Concat(rep.Results, rep.Sweep) {
		if i < 8 && res.Policy != rep.Config.Policies[i] {
			t.Errorf("result %d is %q, want %q", i, res.Policy, rep.Config.Policies[i])
		}
		if !(res.HitRatio > 0 && res.HitRatio <= 1) || res.AttemptsPerRead < 1 || res.Requests == 0 || res.LoadMaxOverMean < 1 ||
			len(res.Replicas) != 3 || len(res.Timeline) != 3 || res.Work.Started == 0 {
			t.Errorf("%s at %g: hit ratio %v, attempts/read %v, %d reads, load max/mean %v, %d replicas, work %+v",
				res.Policy, res.Exponent, res.HitRatio, res.AttemptsPerRead, res.Requests, res.LoadMaxOverMean, len(res.Replicas), res.Work)
		}
		if !res.Hedging && res.AttemptsPerRead != 1 {
			t.Errorf("%s hedged: %v attempts a read", res.Policy, res.AttemptsPerRead)
		}
		if res.Policy == OnePerRepl && (res.PartitionsMoved != 0 || res.HotKeys != 0) {
			t.Errorf("%s moved %d partitions, %d hot keys", res.Policy, res.PartitionsMoved, res.HotKeys)
		}
	}
	var buf bytes.Buffer
	if err := exp.WriteHTML(&buf, "skew", rep.Environment, rep); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Reads each replica received: " + MicroHot, "p99 against skew", "The issue&#39;s goals", "cache-c"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
}

func TestSimulateIsDeterministic(t *testing.T) {
	cfg := SimConfig{Replicas: 40, Keys: 4000, CacheKeys: 50, Requests: 30_000, Seed: 9}
	a, err := Simulate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Simulate(context.Background(), cfg)
	if len(a.Results) != 4 || !slices.Equal(a.Results, b.Results) {
		t.Fatalf("two runs of one seed differ:\n%+v\n%+v", a.Results, b.Results)
	}
	cfg.Seed++
	c, _ := Simulate(context.Background(), cfg)
	if slices.Equal(a.Results, c.Results) {
		t.Error("another seed, the same results")
	}
	byName := map[string]SimResult{}
	for _, r := range a.Results {
		byName[r.Policy] = r
	}
	none, one := byName[NoAffinity+noHedgeTitle], byName[OnePerRepl+noHedgeTitle]
	if none.HitRatio >= one.HitRatio || none.LoadMaxOverMean >= one.LoadMaxOverMean || one.PartitionsMoved != 0 || byName[Micro+noHedgeTitle].HotKeys != 0 {
		t.Errorf("no affinity %+v, one partition per replica %+v", none, one)
	}
	if err := (SimConfig{Replicas: 1, Keys: 10, CacheKeys: 1, Workers: 1, Exponent: 1, Hit: 1, Miss: 1, Load: 0.5, Requests: 1000, RebalanceEvery: 1}).Validate(); !errors.Is(err, exp.ErrConfig) {
		t.Errorf("one replica: %v", err)
	}
}

// Three gateways, each with a table fed the reads it routes, route the
// micro-partition placements' reads in turn; the partitions whose homes
// they disagree on are counted, and a run is as deterministic as one
// gateway's.
func TestSimulateGateways(t *testing.T) {
	cfg := SimConfig{Replicas: 8, Keys: 4000, CacheKeys: 50, Requests: 60_000, Gateways: 3, Seed: 9,
		Partitions: partition.Config{Window: 500 * time.Millisecond, Cooldown: 250 * time.Millisecond}}
	a, err := Simulate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Simulate(context.Background(), cfg)
	if !slices.Equal(a.Results, b.Results) || a.Config.Gateways != 3 {
		t.Fatalf("two runs of one seed differ, or gateways %d:\n%+v\n%+v", a.Config.Gateways, a.Results, b.Results)
	}
	moved := false
	for _, r := range a.Results {
		if r.HomesDiffer < 0 || r.HomesDiffer > 0 && !strings.HasPrefix(r.Policy, Micro) {
			t.Errorf("%s: %d homes differ", r.Policy, r.HomesDiffer)
		}
		moved = moved || strings.HasPrefix(r.Policy, Micro) && r.PartitionsMoved > 0
	}
	if !moved {
		t.Error("no gateway moved a home: the run shows no agreement to measure")
	}
	cfg.Gateways = 1
	one, _ := Simulate(context.Background(), cfg)
	for _, r := range one.Results {
		if r.HomesDiffer != 0 {
			t.Errorf("one gateway: %s has %d homes that differ", r.Policy, r.HomesDiffer)
		}
	}
	cfg.Gateways = MaxGateways + 1
	if err := cfg.Validate(); !errors.Is(err, exp.ErrConfig) {
		t.Errorf("%d gateways: %v", cfg.Gateways, err)
	}
}
