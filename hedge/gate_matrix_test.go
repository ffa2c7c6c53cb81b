package hedge

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The gate matrix: the real engine, in virtual time (testing/synctest),
// against two simulated replicas, over straggler shares × offered loads.
// Each replica is a FIFO queue in front of simWorkers workers, each of
// which spends simService on every attempt it is given, and keeps working
// on attempts whose caller has gone, as the lab's fixtures do; a
// straggling attempt then waits simSlow more before it answers, without
// holding its worker (a pause, a slow disk, a slow network), so the share
// of stragglers leaves the replicas' capacity at 2·simWorkers/simService
// (1,000 reads/s). Reads arrive in open loop (Poisson): simWarm at half
// the capacity, as a healthy system runs before its load rises, then the
// cell's load for simRun, which alone is measured; each has a 1s timeout, primaries alternating, under the default policy with
// a fixed 10ms delay: the budget's 10% and burst of 10, and the gate with
// its defaults.
const (
	simWorkers = 2
	simService = 4 * time.Millisecond
	simSlow    = 40 * time.Millisecond
	simDelay   = 10 * time.Millisecond
	simTimeout = time.Second
	simWarm    = 5 * time.Second  // at half the capacity, before the cell's load
	simRun     = 12 * time.Second // more than a gate window
)

type simReplica struct {
	mu    sync.Mutex
	free  [simWorkers]time.Time // when each worker finishes what it has been given
	share float64
	rng   *rand.Rand
}

// serve queues one attempt and returns when it is answered, or when ctx
// ends (the work stays queued: the replica does it anyway).
func (r *simReplica) serve(ctx context.Context, work *atomic.Int64) error {
	r.mu.Lock()
	now := time.Now()
	w := 0
	for i := range r.free {
		if r.free[i].Before(r.free[w]) {
			w = i
		}
	}
	start := r.free[w]
	if start.Before(now) {
		start = now
	}
	r.free[w] = start.Add(simService)
	done := r.free[w]
	if r.rng.Float64() < r.share {
		done = done.Add(simSlow)
	}
	r.mu.Unlock()
	work.Add(1)
	t := time.NewTimer(done.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// simCell is one run of the matrix.
type simCell struct {
	share, load float64
	hedging     bool

	reads, succeeded int
	work             int64     // attempts the replicas received
	hedges, held     int       // hedges sent because an answer was late; wanted ones the gate held
	lat              []float64 // ms, sorted; a failed read is +Inf
	gate             GateState // as the run ended
	everShut         GateSignals
}

func runSimCell(t *testing.T, share, load float64, hedging bool) simCell {
	c := simCell{share: share, load: load, hedging: hedging}
	synctest.Test(t, func(t *testing.T) {
		seed := uint64(share*1000) + uint64(load*10)
		reps := []*simReplica{
			{share: share, rng: rand.New(rand.NewPCG(seed, 1))},
			{share: share, rng: rand.New(rand.NewPCG(seed, 2))},
		}
		var ev eventCounts
		p := Policy{Delay: simDelay, Observer: &ev}
		if !hedging {
			p.MaxAttempts = 1
		}
		h := mustNew(t, p)
		var work atomic.Int64
		var shut atomic.Uint32
		arrivals := rand.New(rand.NewPCG(seed, 3))
		capacity := 2 * simWorkers / simService.Seconds()
		var lat []float64
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		var workBefore int64
		var evBefore [2]int
		for i := 0; ; i++ {
			// A healthy warm-up at half the capacity, then the cell's load.
			warm := time.Since(start) < simWarm
			rate := load * capacity
			if warm {
				rate = capacity / 2
			}
			time.Sleep(time.Duration(arrivals.ExpFloat64() / rate * float64(time.Second)))
			if time.Since(start) >= simWarm+simRun {
				break
			}
			if warm {
				go Do(context.Background(), h, Op[int]{Targets: []string{"a", "b"}, First: i % 2,
					Call: func(ctx context.Context, a Attempt) (int, error) { return 0, reps[a.Target].serve(ctx, &work) }})
				continue
			}
			if c.reads == 0 {
				workBefore = work.Load()
				evBefore[0], evBefore[1], _ = ev.read(false)
			}
			c.reads++
			wg.Go(func() {
				begin := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), simTimeout)
				defer cancel()
				_, err := Do(ctx, h, Op[int]{Targets: []string{"a", "b"}, First: i % 2,
					Call: func(ctx context.Context, a Attempt) (int, error) {
						return 0, reps[a.Target].serve(ctx, &work)
					}})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					lat = append(lat, math.Inf(1))
					return
				}
				c.succeeded++
				lat = append(lat, float64(time.Since(begin))/1e6)
			})
			if i%16 == 0 {
				shut.Store(shut.Load() | uint32(h.Stats().Gate.Shut))
			}
		}
		wg.Wait()
		c.gate = h.Stats().Gate
		time.Sleep(2 * simTimeout) // the replicas finish what they were given
		c.work = work.Load() - workBefore
		c.hedges, c.held, _ = ev.read(false)
		c.hedges -= evBefore[0]
		c.held -= evBefore[1]
		c.everShut = GateSignals(shut.Load())
		slices.Sort(lat)
		c.lat = lat
	})
	return c
}

// quantile returns the q-quantile of the cell's latencies (nearest rank).
func (c simCell) quantile(q float64) float64 {
	return c.lat[min(int(q*float64(len(c.lat))), len(c.lat)-1)]
}

func (c simCell) attemptsPerRead() float64 { return float64(c.work) / float64(c.reads) }
func (c simCell) goodput() float64         { return float64(c.succeeded) / simRun.Seconds() }

func ms(v float64) string {
	if math.IsInf(v, 1) {
		return "failed"
	}
	return fmt.Sprintf("%.0f", v)
}

// TestGateMatrix runs the matrix and checks what the gate promises:
//
//   - variance is not overload: below capacity, with a straggler share up
//     to the budget's fraction, the gate never holds a hedge, and below
//     the fraction the stragglers' tail (the latency at 1 - share/2) is
//     cut at least in half;
//   - above the fraction, the budget bounds the hedges, not the gate;
//   - under overload (150% and 200% of capacity) hedges stay within 1.05
//     attempts per read and goodput within 3% of no hedging's. These
//     replicas serve abandoned reads, so a read offered past capacity waits
//     its turn until the 1s timeout fails it and the goodput is what the
//     first seconds served; the hedges the budget lets out in the tenth of
//     a second before the median shows the slowdown cost 1-2% of it;
//   - the budget holds everywhere: hedges <= burst + fraction × reads.
//
// With -v it prints the table the README quotes:
//
//	go test -run TestGateMatrix -v ./hedge
//
// It takes about 15s of two cores; under the race detector it runs two
// cells only (with -race every operation costs ten times as much), and
// .ci/run runs it once more without.
func TestGateMatrix(t *testing.T) {
	shares := []float64{0.01, 0.05, 0.10, 0.20, 0.30}
	loads := []float64{0.5, 1, 1.5, 2}
	type cell struct {
		share, load  float64
		base, hedged simCell
	}
	var cells []*cell
	for _, share := range shares {
		for _, load := range loads {
			if !raceEnabled || share == 0.05 && (load == 0.5 || load == 1.5) {
				cells = append(cells, &cell{share: share, load: load})
			}
		}
	}
	t.Run("cells", func(t *testing.T) {
		for _, c := range cells {
			t.Run(fmt.Sprintf("%.0f%%/%.0f%%", 100*c.share, 100*c.load), func(t *testing.T) {
				t.Parallel()
				c.base, c.hedged = runSimCell(t, c.share, c.load, false), runSimCell(t, c.share, c.load, true)
			})
		}
	})
	var table strings.Builder
	fmt.Fprintf(&table, "| stragglers | load | gate | hedged / held by the gate | attempts per read | goodput (no hedging) | p99 ms (no hedging) | p99.9 ms (no hedging) |\n")
	fmt.Fprintf(&table, "| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range cells {
		base, hedged := c.base, c.hedged
		name := fmt.Sprintf("stragglers %.0f%%, load %.0f%%", 100*c.share, 100*c.load)
		gate := "open"
		if hedged.everShut != 0 {
			gate = "shut (" + hedged.everShut.String() + ")"
		}
		fmt.Fprintf(&table, "| %.0f%% | %.0f%% | %s | %d / %d | %.3f | %.0f/s (%.0f/s) | %s (%s) | %s (%s) |\n",
			100*c.share, 100*c.load, gate, hedged.hedges, hedged.held, hedged.attemptsPerRead(),
			hedged.goodput(), base.goodput(), ms(hedged.quantile(0.99)), ms(base.quantile(0.99)), ms(hedged.quantile(0.999)), ms(base.quantile(0.999)))

		budget := DefaultBudgetBurst + DefaultBudgetFraction*float64(hedged.reads)
		if float64(hedged.hedges) > budget {
			t.Errorf("%s: %d hedges, beyond the budget's %.0f", name, hedged.hedges, budget)
		}
		if c.load < 1 && c.share <= DefaultBudgetFraction && (hedged.held != 0 || hedged.everShut != 0) {
			t.Errorf("%s: the gate held %d hedges (%v); variance is not overload", name, hedged.held, hedged.everShut)
		}
		if q := 1 - c.share/2; c.load < 1 && c.share < DefaultBudgetFraction && hedged.quantile(q) > base.quantile(q)/2 {
			t.Errorf("%s: p%g %s ms hedged, %s ms without: not cut", name, 100*q, ms(hedged.quantile(q)), ms(base.quantile(q)))
		}
		if c.load < 1 && c.share > DefaultBudgetFraction && (hedged.held != 0 || float64(hedged.hedges) < 0.9*budget) {
			t.Errorf("%s: %d hedges, %d held by the gate; want the budget's %.0f, none held", name, hedged.hedges, hedged.held, budget)
		}
		if c.load >= 1.5 {
			if a := hedged.attemptsPerRead(); a > 1.05 {
				t.Errorf("%s: %.3f attempts per read under overload", name, a)
			}
			if hedged.goodput() < base.goodput()*0.97 {
				t.Errorf("%s: goodput %.0f/s hedged, %.0f/s without", name, hedged.goodput(), base.goodput())
			}
		}
	}
	t.Logf("the gate matrix (go test -run TestGateMatrix -v ./hedge):\n%s", table.String())
}
