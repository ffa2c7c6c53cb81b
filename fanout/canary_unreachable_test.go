package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// scripted is a Call whose shards each answer or fail after their own
// latency, honouring ctx, and which records the shards called.
type scripted struct {
	lat   map[int]time.Duration // default 5ms
	fail  map[int]error
	mu    sync.Mutex
	calls []int
}

func (c *scripted) call(ctx context.Context, shard int, _ hedge.Attempt) (string, error) {
	c.mu.Lock()
	c.calls = append(c.calls, shard)
	c.mu.Unlock()
	d, ok := c.lat[shard]
	if !ok {
		d = ms(5)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if err := c.fail[shard]; err != nil {
		return "", err
	}
	return fmt.Sprintf("s%d", shard), nil
}

func (c *scripted) called() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.calls...)
}

// With Need = all and two canaries, one failing canary already makes Need
// unreachable: no other shard may be asked, whatever the scheduling. Run on
// the real scheduler, many times, so that a launch-then-cancel would show.
func TestNoFanoutAfterACanaryFails(t *testing.T) {
	f := mustFanout(t, Config{Shards: 50, Canaries: 2, Policy: noHedge()})
	boom := errors.New("boom")
	for i := range 100 {
		var mu sync.Mutex
		first := -1
		var calls []int
		res, err := Do(context.Background(), f, func(ctx context.Context, shard int, a hedge.Attempt) (int, error) {
			mu.Lock()
			calls = append(calls, shard)
			if first < 0 {
				first = shard
			}
			fail := shard == first
			mu.Unlock()
			if fail {
				return 0, boom
			}
			select {
			case <-time.After(time.Millisecond):
				return shard, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
		if !errors.Is(err, ErrCanaryFailed) || !errors.Is(err, boom) {
			t.Fatalf("request %d: err %v, want ErrCanaryFailed wrapping the canary's error", i, err)
		}
		time.Sleep(2 * time.Millisecond) // a wrongly launched shard would call by now
		mu.Lock()
		got := append([]int(nil), calls...)
		mu.Unlock()
		if !onlyCanaries(got, res.Canaries) {
			t.Fatalf("request %d: shards %v called, canaries %v: the query reached the fleet", i, got, res.Canaries)
		}
		if !res.Partial || len(res.Missing) < 49 || !errors.Is(res.Errors[first], boom) {
			t.Fatalf("request %d: result %+v", i, res)
		}
	}
}

// A canary that fails after the other has answered still stops the fan-out.
func TestSecondCanaryFailureStopsTheFanout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crash := errors.New("query of death")
		// A fresh Fanout's first request has canaries 0 and 1.
		c := &scripted{lat: map[int]time.Duration{0: ms(5), 1: ms(10)}, fail: map[int]error{1: crash}}
		f := mustFanout(t, Config{Shards: 20, Canaries: 2, Completion: Completion{Need: 10}, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if !errors.Is(err, ErrCanaryFailed) || !errors.Is(err, crash) {
			t.Fatalf("err %v", err)
		}
		synctest.Wait()
		if fmt.Sprint(res.Canaries) != "[0 1]" || fmt.Sprint(c.called()) != "[0 1]" && fmt.Sprint(c.called()) != "[1 0]" {
			t.Errorf("canaries %v, calls %v", res.Canaries, c.called())
		}
		if res.Elapsed != ms(10) || !res.Answered[0] || res.Values[0] != "s0" || !errors.Is(res.Errors[1], crash) || len(res.Missing) != 19 {
			t.Errorf("result %+v: should say canary 0 answered and canary 1 crashed", res)
		}
	})
}

// A canary that answers late stops the fan-out even if the other answered.
func TestLateCanaryStopsTheFanout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &scripted{lat: map[int]time.Duration{0: ms(5), 1: time.Hour}}
		f := mustFanout(t, Config{Shards: 20, Canaries: 2, CanaryTimeout: ms(100), Completion: Completion{Need: 10}, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if !errors.Is(err, ErrCanaryFailed) {
			t.Fatalf("err %v", err)
		}
		synctest.Wait()
		if calls := c.called(); len(calls) != 2 || !onlyCanaries(calls, res.Canaries) {
			t.Errorf("calls %v, canaries %v", calls, res.Canaries)
		}
		if res.Elapsed != ms(100) || !res.Answered[0] || res.Errors[1] == nil || res.Errors[2] != nil || len(res.Missing) != 19 {
			t.Errorf("result %+v: should say canary 0 answered and canary 1 was late", res)
		}
	})
}

// Both canaries must answer before the rest are asked.
func TestFanoutWaitsForEveryCanary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &scripted{lat: map[int]time.Duration{0: ms(5), 1: ms(8)}}
		f := mustFanout(t, Config{Shards: 6, Canaries: 2, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if err != nil || res.Partial || res.Elapsed != ms(13) || len(c.called()) != 6 {
			t.Errorf("%v %+v, calls %v: the rest start when the last canary answers at 8ms", err, res, c.called())
		}
	})
}

// With Need already met by a canary, nobody else is asked, not even the
// other canary waited for.
func TestCanaryMeetsNeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &scripted{lat: map[int]time.Duration{0: ms(5), 1: time.Hour}}
		f := mustFanout(t, Config{Shards: 6, Canaries: 2, Completion: Completion{Need: 1}, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if err != nil || res.Elapsed != ms(5) || !res.Answered[0] || len(res.Missing) != 5 || !onlyCanaries(c.called(), res.Canaries) {
			t.Errorf("%v %+v, calls %v", err, res, c.called())
		}
		synctest.Wait()
	})
}

// The fan-out deadline passing during the canary phase is a canary failure.
func TestDeadlineDuringCanaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &scripted{lat: map[int]time.Duration{0: time.Hour}}
		f := mustFanout(t, Config{Shards: 6, Canaries: 1, Completion: Completion{Deadline: ms(30)}, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if !errors.Is(err, ErrCanaryFailed) || res.Elapsed != ms(30) || len(c.called()) != 1 {
			t.Errorf("%v %+v, calls %v", err, res, c.called())
		}
		synctest.Wait()
	})
}
