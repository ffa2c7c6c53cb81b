package fanout

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// A tiny fraction still waits for one shard: Need is never 0.
func TestTinyFractionNeedsOne(t *testing.T) {
	for _, fr := range []float64{1e-10, 0.01, 0.1} {
		f := mustFanout(t, Config{Shards: 10, Completion: Completion{Fraction: fr}, Policy: noHedge()})
		if f.Need() != 1 {
			t.Errorf("fraction %v of 10 shards: need %d, want 1", fr, f.Need())
		}
	}
	if f := mustFanout(t, Config{Shards: 10, Completion: Completion{Fraction: 0.11}}); f.Need() != 2 {
		t.Errorf("fraction 0.11 of 10 shards: need %d, want 2", f.Need())
	}
	synctest.Test(t, func(t *testing.T) {
		c := &sleepCall{lat: func(s int, _ hedge.Attempt) time.Duration { return ms(5 + s) }}
		f := mustFanout(t, Config{Shards: 10, Completion: Completion{Fraction: 1e-10}, Policy: noHedge()})
		res, err := Do(t.Context(), f, c.call)
		if err != nil || res.Elapsed != ms(5) || !res.Answered[0] || res.Need != 1 || len(res.Missing) != 9 {
			t.Errorf("%v %+v: want the first answer, at 5ms", err, res)
		}
		synctest.Wait()
	})
}
