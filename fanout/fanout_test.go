package fanout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// sleepCall answers "s<shard>" after lat(shard, attempt), honouring ctx,
// and records which shards were called and which attempts were cancelled.
type sleepCall struct {
	lat       func(shard int, a hedge.Attempt) time.Duration
	fail      func(shard int) error
	mu        sync.Mutex
	calls     []int
	hedges    atomic.Int32
	cancelled atomic.Int32
}

func (c *sleepCall) call(ctx context.Context, shard int, a hedge.Attempt) (string, error) {
	c.mu.Lock()
	c.calls = append(c.calls, shard)
	c.mu.Unlock()
	if a.IsHedge() {
		c.hedges.Add(1)
	}
	if c.fail != nil {
		if err := c.fail(shard); err != nil {
			return "", err
		}
	}
	t := time.NewTimer(c.lat(shard, a))
	defer t.Stop()
	select {
	case <-t.C:
		return fmt.Sprintf("s%d", shard), nil
	case <-ctx.Done():
		c.cancelled.Add(1)
		return "", ctx.Err()
	}
}

func (c *sleepCall) called() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.calls...)
}

// onlyCanaries reports whether every shard in calls is a canary.
func onlyCanaries(calls, canaries []int) bool {
	for _, s := range calls {
		if !slices.Contains(canaries, s) {
			return false
		}
	}
	return true
}

func noHedge() hedge.Policy { return hedge.Policy{MaxAttempts: 1} }

func mustFanout(t *testing.T, cfg Config) *Fanout {
	t.Helper()
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestAllShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &sleepCall{lat: func(s int, _ hedge.Attempt) time.Duration { return ms(s + 1) }}
		f := mustFanout(t, Config{Shards: 10, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if err != nil {
			t.Fatal(err)
		}
		if res.Partial || len(res.Missing) != 0 || res.Need != 10 || res.Elapsed != ms(10) {
			t.Errorf("result %+v", res)
		}
		for s, v := range res.Values {
			if v != fmt.Sprintf("s%d", s) || !res.Answered[s] {
				t.Errorf("shard %d: %q %v", s, v, res.Answered[s])
			}
		}
	})
}

func TestGoodEnoughReturnsAtKthAndCancelsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Shards 3 and 7 straggle; 8 of 10 is enough.
		c := &sleepCall{lat: func(s int, _ hedge.Attempt) time.Duration {
			if s == 3 || s == 7 {
				return time.Second
			}
			return ms(5)
		}}
		f := mustFanout(t, Config{Shards: 10, Completion: Completion{Need: 8}, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if err != nil {
			t.Fatal(err)
		}
		if res.Elapsed != ms(5) || !res.Partial || fmt.Sprint(res.Missing) != "[3 7]" || res.Errors[3] != nil {
			t.Errorf("result: elapsed %v partial %v missing %v", res.Elapsed, res.Partial, res.Missing)
		}
		synctest.Wait()
		if c.cancelled.Load() != 2 {
			t.Errorf("%d stragglers cancelled, want 2", c.cancelled.Load())
		}
	})
}

func TestFractionNeed(t *testing.T) {
	f := mustFanout(t, Config{Shards: 60, Completion: Completion{Fraction: 0.95}})
	if f.Need() != 57 {
		t.Errorf("95%% of 60: need %d", f.Need())
	}
	if f := mustFanout(t, Config{Shards: 3, Completion: Completion{Fraction: 1}}); f.Need() != 3 {
		t.Errorf("100%% of 3: need %d", f.Need())
	}
}

func TestDeadlineReturnsWhatArrived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &sleepCall{lat: func(s int, _ hedge.Attempt) time.Duration { return ms(10 * (s + 1)) }}
		f := mustFanout(t, Config{Shards: 5, Completion: Completion{Deadline: ms(25)}, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if err != nil {
			t.Fatal(err)
		}
		if res.Elapsed != ms(25) || !res.Partial || fmt.Sprint(res.Missing) != "[2 3 4]" || !res.Answered[1] {
			t.Errorf("result: elapsed %v missing %v", res.Elapsed, res.Missing)
		}
		synctest.Wait()
	})
}

func TestInsufficientWhenTooManyFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		c := &sleepCall{
			lat:  func(int, hedge.Attempt) time.Duration { return ms(50) },
			fail: func(s int) error { return map[bool]error{true: boom}[s < 3] },
		}
		f := mustFanout(t, Config{Shards: 10, Completion: Completion{Need: 8}, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if !errors.Is(err, ErrInsufficient) {
			t.Fatalf("err %v", err)
		}
		if res.Elapsed != 0 || !errors.Is(res.Errors[0], boom) || !res.Partial || len(res.Missing) != 10 {
			t.Errorf("result: elapsed %v errors %v missing %v", res.Elapsed, res.Errors[:3], res.Missing)
		}
		synctest.Wait()
	})
}

func TestCanaryGoesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &sleepCall{lat: func(int, hedge.Attempt) time.Duration { return ms(5) }}
		f := mustFanout(t, Config{Shards: 6, Canaries: 1, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if err != nil {
			t.Fatal(err)
		}
		calls := c.called()
		if len(res.Canaries) != 1 || calls[0] != res.Canaries[0] || len(calls) != 6 || res.Elapsed != ms(10) {
			t.Errorf("canaries %v calls %v elapsed %v: the canary first, the rest after its answer", res.Canaries, calls, res.Elapsed)
		}
	})
}

func TestFailingCanaryProtectsTheFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crash := errors.New("query of death")
		c := &sleepCall{lat: func(int, hedge.Attempt) time.Duration { return ms(5) }, fail: func(int) error { return crash }}
		f := mustFanout(t, Config{Shards: 50, Canaries: 2, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if !errors.Is(err, ErrCanaryFailed) || !errors.Is(err, crash) {
			t.Fatalf("err %v", err)
		}
		// The first failure ends it: the other canary may or may not have
		// been called by then, but no other shard is.
		synctest.Wait()
		if calls := c.called(); len(calls) == 0 || !onlyCanaries(calls, res.Canaries) || len(res.Missing) != 50 {
			t.Errorf("shards %v called (canaries %v), %d missing: only the canaries may see the query", calls, res.Canaries, len(res.Missing))
		}
		// A canary that stalls: the fan-out gives up after the timeout.
		stall := &sleepCall{lat: func(int, hedge.Attempt) time.Duration { return time.Hour }}
		f = mustFanout(t, Config{Shards: 50, Canaries: 1, CanaryTimeout: ms(100), Policy: noHedge()})
		start := time.Now()
		_, err = Do(t.Context(), f, stall.call)
		if !errors.Is(err, ErrCanaryFailed) || time.Since(start) != ms(100) || len(stall.called()) != 1 {
			t.Errorf("stalled canary: %v after %v, %d calls", err, time.Since(start), len(stall.called()))
		}
		synctest.Wait()
	})
}

func TestCanaryEnoughAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &sleepCall{lat: func(int, hedge.Attempt) time.Duration { return ms(5) }}
		f := mustFanout(t, Config{Shards: 10, Canaries: 1, Completion: Completion{Need: 1}, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if err != nil || len(c.called()) != 1 || !res.Partial || len(res.Missing) != 9 {
			t.Errorf("need 1 with a canary: %v, %d calls, %+v", err, len(c.called()), res)
		}
	})
}

func TestPerShardHedging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Shard 2's first replica straggles; its hedge to the other wins.
		c := &sleepCall{lat: func(s int, a hedge.Attempt) time.Duration {
			if s == 2 && !a.IsHedge() {
				return time.Second
			}
			return ms(3)
		}}
		budget, _ := hedge.NewBudget(1, 100)
		f := mustFanout(t, Config{Shards: 4, Replicas: 2, Policy: hedge.Policy{Delay: ms(10), Budget: budget}})
		res, err := Do(t.Context(), f, c.call)
		if err != nil {
			t.Fatal(err)
		}
		if res.Elapsed != ms(13) || c.hedges.Load() != 1 || res.Partial {
			t.Errorf("elapsed %v hedges %d", res.Elapsed, c.hedges.Load())
		}
		synctest.Wait()
	})
}

// A fan-out of 100 shares one budget: at most burst + fraction × 100
// hedges, not 100 bursts.
func TestBudgetComposesAcrossShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &sleepCall{lat: func(s int, a hedge.Attempt) time.Duration {
			if a.IsHedge() {
				return ms(2)
			}
			return ms(50) // every primary is slow: every shard wants a hedge
		}}
		budget, err := hedge.NewBudget(0.1, 5)
		if err != nil {
			t.Fatal(err)
		}
		f := mustFanout(t, Config{Shards: 100, Replicas: 2, Policy: hedge.Policy{Delay: ms(10), Budget: budget, Gate: hedge.Gate{Disabled: true}}})
		if _, err := Do(t.Context(), f, c.call); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// Credits are capped at the burst: admitting the 100 shard requests
		// at once cannot lift them above 5, so 5 hedges go out. Separate
		// budgets per shard would have let all 100 hedge.
		if got, limit := c.hedges.Load(), int32(5+0.1*100); got > limit || got != 5 {
			t.Errorf("%d hedges for a fan-out of 100, want the burst of 5 (bound: %d)", got, limit)
		}
	})
}

func TestCallerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &sleepCall{lat: func(int, hedge.Attempt) time.Duration { return time.Hour }}
		f := mustFanout(t, Config{Shards: 3, Policy: noHedge()})
		ctx, cancel := context.WithTimeout(t.Context(), ms(20))
		defer cancel()
		res, err := Do(ctx, f, c.call)
		if !errors.Is(err, context.DeadlineExceeded) || len(res.Missing) != 3 {
			t.Errorf("%v %+v", err, res)
		}
		synctest.Wait()
	})
}

func TestNewRejects(t *testing.T) {
	for _, cfg := range []Config{
		{}, {Shards: -1}, {Shards: 2, Replicas: -1}, {Shards: 2, Completion: Completion{Need: 3}},
		{Shards: 2, Completion: Completion{Need: -1}}, {Shards: 2, Completion: Completion{Fraction: 1.5}},
		{Shards: 2, Completion: Completion{Deadline: -1}}, {Shards: 2, Canaries: 3}, {Shards: 1, Canaries: 2},
		{Shards: 2, CanaryTimeout: -1}, {Shards: 2, Policy: hedge.Policy{MaxAttempts: 9}},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
}
