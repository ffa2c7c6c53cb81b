package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestZipfDrawsFollowTheLaw(t *testing.T) {
	for _, s := range []float64{0, 0.8, 1.1, 1.5} {
		z, err := NewZipf(1000, s)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		const draws = 400_000
		counts := make([]int, z.Keys())
		for range draws {
			counts[z.Draw(rng)]++
		}
		// The head ranks one by one, and the tail as a block, within 5
		// standard deviations of their binomial counts.
		check := func(what string, got int, p float64) {
			want := p * draws
			if sd := math.Sqrt(want * (1 - p)); math.Abs(float64(got)-want) > 5*sd+1 {
				t.Errorf("s=%v %s: %d draws, want %.0f ± %.0f", s, what, got, want, sd)
			}
		}
		tail := 0
		for k, c := range counts {
			if k < 10 {
				check("rank "+string(rune('0'+k)), c, z.Prob(k))
			} else {
				tail += c
			}
		}
		check("ranks 10+", tail, 1-z.Mass(10))
		if s > 0 {
			// The law itself: P(k)/P(0) = (k+1)^-s.
			if r := z.Prob(9) / z.Prob(0); math.Abs(r-math.Pow(10, -s)) > 1e-9 {
				t.Errorf("s=%v: P(9)/P(0) = %v, want %v", s, r, math.Pow(10, -s))
			}
		}
	}
	for _, bad := range []struct {
		n int
		s float64
	}{{0, 1}, {MaxZipfKeys + 1, 1}, {10, -1}, {10, math.NaN()}, {10, 11}} {
		if _, err := NewZipf(bad.n, bad.s); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewZipf(%d, %v): %v", bad.n, bad.s, err)
		}
	}
}

func TestLRUEvictsTheLeastRecentlyUsed(t *testing.T) {
	c := NewLRU[string](3)
	for _, k := range []string{"a", "b", "c"} {
		if c.Touch(k) {
			t.Fatalf("%s hit in an empty cache", k)
		}
	}
	if !c.Touch("a") { // a is now the most recent: b goes next
		t.Fatal("a missed")
	}
	if c.Touch("d") || c.Contains("b") || !c.Contains("a") || !c.Contains("c") || c.Len() != 3 {
		t.Fatalf("after d: b should be evicted, a and c kept (len %d)", c.Len())
	}
	if c.Touch("b") || c.Contains("c") { // c was the least recent
		t.Fatal("b should miss and evict c")
	}
	// A long run against a map-and-slice model.
	rng := rand.New(rand.NewPCG(3, 4))
	lru := NewLRU[int](50)
	var order []int // least recent first
	for range 20_000 {
		k := rng.IntN(120)
		at := -1
		for i, x := range order {
			if x == k {
				at = i
			}
		}
		if hit := lru.Touch(k); hit != (at >= 0) {
			t.Fatalf("key %d: hit %v, model says %v", k, hit, at >= 0)
		}
		if at >= 0 {
			order = append(order[:at], order[at+1:]...)
		} else if len(order) == 50 {
			order = order[1:]
		}
		order = append(order, k)
	}
}

func TestLRUHitRatioMatchesSimulation(t *testing.T) {
	z, _ := NewZipf(20_000, 1.1)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, capacity := range []int{100, 2000} {
		c := NewLRU[int](capacity)
		hits, n := 0, 0
		for i := range 600_000 {
			hit := c.Touch(z.Draw(rng))
			if i >= 100_000 {
				n++
				if hit {
					hits++
				}
			}
		}
		got, che := float64(hits)/float64(n), z.LRUHitRatio(capacity)
		if math.Abs(got-che) > 0.01 {
			t.Errorf("capacity %d: simulated hit ratio %.4f, Che's approximation %.4f", capacity, got, che)
		}
	}
	if z.LRUHitRatio(20_000) != 1 || z.LRUHitRatio(0) != 0 {
		t.Error("a cache of every key must always hit, an empty one never")
	}
}

// modN places each key on one replica by its rank; every replica is a
// candidate for every key with all.
type modN struct {
	n, moved int
	all      bool
	one      []int
	every    []int
}

func newModN(n int, all bool) *modN {
	p := &modN{n: n, all: all, one: make([]int, 1)}
	for i := range n {
		p.every = append(p.every, i)
	}
	return p
}

func (p *modN) Candidates(key int, _ time.Duration) []int {
	if p.all {
		return p.every
	}
	p.one[0] = key % p.n
	return p.one
}
func (p *modN) Served(int, int, time.Duration) {}
func (p *modN) Rebalance(time.Duration) int    { p.moved++; return 1 }

func skewConfig(t *testing.T) SkewConfig {
	z, err := NewZipf(5000, 1.1)
	if err != nil {
		t.Fatal(err)
	}
	return SkewConfig{Replicas: 8, Workers: 2, CacheKeys: 200, Hit: time.Millisecond, Miss: 20 * time.Millisecond,
		Zipf: z, Rate: 1000, Requests: 60_000, Warmup: 10_000, RebalanceEvery: time.Second, Seed: 7}
}

func TestSkewAffinityTradesBalanceForHits(t *testing.T) {
	cfg := skewConfig(t)
	one, err := Skew(cfg, newModN(8, false))
	if err != nil {
		t.Fatal(err)
	}
	spread, err := Skew(cfg, newModN(8, true))
	if err != nil {
		t.Fatal(err)
	}
	// Rank 0 alone draws 1/H of the reads, far more than 1/8: its replica
	// is the most loaded by far. Power of two choices over all replicas
	// balances reads but caches every key everywhere.
	if one.LoadMaxOverMean < 1.5 || spread.LoadMaxOverMean > 1.1 {
		t.Errorf("max/mean load: one replica a key %.2f (want > 1.5), spread %.2f (want < 1.1)", one.LoadMaxOverMean, spread.LoadMaxOverMean)
	}
	if one.HitRatio <= spread.HitRatio+0.05 {
		t.Errorf("hit ratio with affinity %.3f, without %.3f: affinity should hit more", one.HitRatio, spread.HitRatio)
	}
	// Che's approximation, for the tier partitioned by key (8 caches of
	// 200, about one of 1600) and for each cache seeing every key.
	if d := math.Abs(one.HitRatio - cfg.Zipf.LRUHitRatio(8*200)); d > 0.03 {
		t.Errorf("partitioned hit ratio %.3f is %.3f from Che's %.3f", one.HitRatio, d, cfg.Zipf.LRUHitRatio(1600))
	}
	if d := math.Abs(spread.HitRatio - cfg.Zipf.LRUHitRatio(200)); d > 0.03 {
		t.Errorf("spread hit ratio %.3f is %.3f from Che's %.3f", spread.HitRatio, d, cfg.Zipf.LRUHitRatio(200))
	}
	if one.Requests != 50_000 || one.PartitionsMoved < 49 || one.PartitionsMoved > 61 {
		t.Errorf("measured %d reads, %d rebalancing rounds over about 60 s", one.Requests, one.PartitionsMoved)
	}
	if !(one.P50 > 0 && one.P50 <= one.P99 && one.P99 <= one.P999) || one.Utilization <= 0 || one.MaxUtilization < one.Utilization {
		t.Errorf("percentiles %v %v %v, utilization %.2f max %.2f", one.P50, one.P99, one.P999, one.Utilization, one.MaxUtilization)
	}
}

func TestSkewIsReproducible(t *testing.T) {
	cfg := skewConfig(t)
	cfg.Requests, cfg.Warmup = 20_000, 1000
	a, _ := Skew(cfg, newModN(8, true))
	b, _ := Skew(cfg, newModN(8, true))
	if a.P99 != b.P99 || a.HitRatio != b.HitRatio || a.LoadMaxOverMean != b.LoadMaxOverMean {
		t.Errorf("same seed, different results: %+v vs %+v", a, b)
	}
	cfg.Seed++
	c, _ := Skew(cfg, newModN(8, true))
	if c.P99 == a.P99 && c.HitRatio == a.HitRatio {
		t.Error("another seed gave the same run")
	}
}

func TestSkewRefusesBadConfigs(t *testing.T) {
	for name, mod := range map[string]func(*SkewConfig){
		"replicas": func(c *SkewConfig) { c.Replicas = 0 }, "workers": func(c *SkewConfig) { c.Workers = 65 },
		"cache": func(c *SkewConfig) { c.CacheKeys = 0 }, "hit above miss": func(c *SkewConfig) { c.Hit = time.Second },
		"zipf": func(c *SkewConfig) { c.Zipf = nil }, "rate": func(c *SkewConfig) { c.Rate = math.NaN() },
		"warm-up": func(c *SkewConfig) { c.Warmup = c.Requests }, "rebalance": func(c *SkewConfig) { c.RebalanceEvery = -1 },
	} {
		cfg := skewConfig(t)
		mod(&cfg)
		if _, err := Skew(cfg, newModN(8, true)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Skew(skewConfig(t), nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil placement: %v", err)
	}
}

func BenchmarkSkew(b *testing.B) {
	z, _ := NewZipf(1_000_000, 1.1)
	cfg := SkewConfig{Replicas: 1000, Workers: 2, CacheKeys: 250, Hit: time.Millisecond, Miss: 20 * time.Millisecond,
		Zipf: z, Rate: 200_000, Requests: 100_000, Seed: 1}
	p := newModN(1000, true)
	b.ReportAllocs()
	for b.Loop() {
		Skew(cfg, p)
	}
}
