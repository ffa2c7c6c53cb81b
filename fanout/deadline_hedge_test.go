package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// The fan-out deadline is on the shards' context, so the hedging engine
// does not launch a hedge that cannot finish before it: attempts are known
// to take 10ms, the hedge delay is 20ms, and a fan-out ending at 25ms gets
// no hedge, while one ending at 40ms does (and completes because of it).
func TestNoHedgeThatCannotBeatTheFanoutDeadline(t *testing.T) {
	for _, tc := range []struct {
		deadline time.Duration
		hedges   int32
		partial  bool
	}{
		{deadline: ms(25), hedges: 0, partial: true},
		{deadline: ms(40), hedges: 2, partial: false},
	} {
		t.Run(fmt.Sprint(tc.deadline), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				budget, _ := hedge.NewBudget(1, 1000)
				var slow atomic.Bool
				c := &sleepCall{lat: func(s int, a hedge.Attempt) time.Duration {
					if slow.Load() && !a.IsHedge() {
						return time.Second
					}
					return ms(10)
				}}
				f := mustFanout(t, Config{Shards: 2, Replicas: 2, Completion: Completion{Deadline: tc.deadline},
					Policy: hedge.Policy{Delay: ms(20), Budget: budget, Gate: hedge.Gate{Disabled: true}}})
				// Teach the engine that attempts take 10ms.
				for range 60 {
					if _, err := Do(t.Context(), f, c.call); err != nil {
						t.Fatal(err)
					}
					time.Sleep(ms(10))
				}
				synctest.Wait()
				if e := f.Hedger().Stats().Expected; e < ms(9) {
					t.Fatalf("expected latency %v after warm-up", e)
				}
				slow.Store(true)
				before := c.hedges.Load()
				res, err := Do(t.Context(), f, c.call)
				if err != nil || res.Partial != tc.partial {
					t.Fatalf("%v %+v", err, res)
				}
				synctest.Wait()
				if n := c.hedges.Load() - before; n != tc.hedges {
					t.Errorf("%d hedges launched at 20ms for a fan-out that ends at %v, with attempts known to take 10ms; want %d", n, tc.deadline, tc.hedges)
				}
			})
		})
	}
}

// When the deadline passes, the shards' context ends with ErrDeadline as
// its cause, Do returns what arrived and no error, and the shards it cut
// off are missing without an error of their own.
func TestDeadlineCutsOffShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := make(chan error, 5)
		f := mustFanout(t, Config{Shards: 5, Completion: Completion{Deadline: ms(25)}, Policy: noHedge()})
		res, err := Do(t.Context(), f, func(ctx context.Context, shard int, _ hedge.Attempt) (int, error) {
			select {
			case <-time.After(ms(10 * (shard + 1))):
				return shard, nil
			case <-ctx.Done():
				causes <- context.Cause(ctx)
				return 0, ctx.Err()
			}
		})
		if err != nil || res.Elapsed != ms(25) || fmt.Sprint(res.Missing) != "[2 3 4]" || fmt.Sprint(res.Values) != "[0 1 0 0 0]" {
			t.Fatalf("%v %+v", err, res)
		}
		for s, e := range res.Errors {
			if e != nil {
				t.Errorf("shard %d: error %v, want none for a shard the deadline cut off", s, e)
			}
		}
		synctest.Wait()
		close(causes)
		n := 0
		for c := range causes {
			n++
			if !errors.Is(c, ErrDeadline) {
				t.Errorf("cut-off shard saw cause %v", c)
			}
		}
		if n != 3 {
			t.Errorf("%d shards cut off, want 3", n)
		}
	})
}

// The caller's own deadline, shorter than the fan-out's, is an error, not
// a partial result.
func TestCallerDeadlineBeforeFanoutDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &sleepCall{lat: func(s int, _ hedge.Attempt) time.Duration { return ms(10 * (s + 1)) }}
		f := mustFanout(t, Config{Shards: 5, Completion: Completion{Deadline: ms(100)}, Policy: noHedge()})
		ctx, cancel := context.WithTimeout(t.Context(), ms(25))
		defer cancel()
		res, err := Do(ctx, f, c.call)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrDeadline) || res.Elapsed != ms(25) || len(res.Missing) != 3 {
			t.Errorf("%v %+v", err, res)
		}
		synctest.Wait()
	})
}
