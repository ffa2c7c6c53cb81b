package fanout

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// primaries runs one request and returns, by shard, the replica its
// primary went to.
func primaries(t *testing.T, f *Fanout) ([]int, *Result[int]) {
	t.Helper()
	var mu sync.Mutex
	got := make([]int, f.cfg.Shards)
	res, err := Do(t.Context(), f, func(ctx context.Context, shard int, a hedge.Attempt) (int, error) {
		if a.Index == 0 {
			mu.Lock()
			got[shard] = a.Target
			mu.Unlock()
		}
		return a.Target, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, res
}

// Every shard of a request sends its primary to the same replica, and
// requests take the replicas in turn, whatever the scheduling.
func TestOnePrimaryReplicaPerRequest(t *testing.T) {
	for _, replicas := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(replicas), func(t *testing.T) {
			f := mustFanout(t, Config{Shards: 16, Replicas: replicas, Policy: noHedge()})
			for i := range 12 {
				got, _ := primaries(t, f)
				for s, r := range got {
					if r != i%replicas {
						t.Fatalf("request %d: shard %d's primary went to replica %d, want %d (all: %v)", i, s, r, i%replicas, got)
					}
				}
			}
		})
	}
}

// In the layout where shard s lives on servers s and s+N/2 of N, every
// server gets exactly one primary per request.
func TestOnePrimaryPerServerPerRequest(t *testing.T) {
	const servers = 10
	f := mustFanout(t, Config{Shards: servers, Replicas: 2, Policy: noHedge()})
	for i := range 6 {
		got, _ := primaries(t, f)
		load := make([]int, servers)
		for s, r := range got {
			load[(s+r*servers/2)%servers]++
		}
		for srv, l := range load {
			if l != 1 {
				t.Fatalf("request %d: server %d got %d primaries (load %v)", i, srv, l, load)
			}
		}
	}
}

// Hedges go to the next replica after the request's primary replica.
func TestHedgeGoesToTheNextReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget, _ := hedge.NewBudget(1, 100)
		f := mustFanout(t, Config{Shards: 3, Replicas: 3, Policy: hedge.Policy{Delay: ms(10), Budget: budget, Gate: hedge.Gate{Disabled: true}}})
		for i := range 4 {
			var mu sync.Mutex
			var hedges []int
			c := &sleepCall{lat: func(s int, a hedge.Attempt) time.Duration {
				if a.IsHedge() {
					mu.Lock()
					hedges = append(hedges, a.Target)
					mu.Unlock()
					return ms(1)
				}
				return time.Second
			}}
			if _, err := Do(t.Context(), f, c.call); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			for _, r := range hedges {
				if r != (i+1)%3 {
					t.Errorf("request %d: hedges to %v, want replica %d", i, hedges, (i+1)%3)
				}
			}
			if len(hedges) != 3 {
				t.Errorf("request %d: %d hedges", i, len(hedges))
			}
		}
	})
}

// Canaries go round every (shard, replica) pair in turn.
func TestCanariesRotate(t *testing.T) {
	const shards, replicas = 3, 2
	f := mustFanout(t, Config{Shards: shards, Replicas: replicas, Canaries: 1, Policy: noHedge()})
	seen := map[[2]int]int{}
	for range 2 * shards * replicas {
		got, res := primaries(t, f)
		c := res.Canaries[0]
		seen[[2]int{c, got[c]}]++
	}
	if len(seen) != shards*replicas {
		t.Errorf("canary (shard, replica) pairs %v, want each of the %d twice", seen, shards*replicas)
	}
	for p, n := range seen {
		if n != 2 {
			t.Errorf("canary pair %v used %d times, want 2", p, n)
		}
	}
}
