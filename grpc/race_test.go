package hedgegrpc

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/typepb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// answerAt returns a handler that answers a primary after primary and a
// hedge (sent 5ms after the primary) after 5ms.
func answerAt(primary time.Duration) handler {
	return func(ctx context.Context, b *backend, _ string) (*typepb.Field, error) {
		d := primary
		if IsHedge(ctx) {
			d = 5 * time.Millisecond
		}
		if err := sleep(ctx, d); err != nil {
			return nil, err
		}
		return b.answer(), nil
	}
}

// TestConcurrentHedgesNeverMix runs many concurrent hedged calls, each
// caller reusing its request and reply messages (and changing them) from
// one call to the next: calls whose two attempts answer at the same
// instant (the primary after 10ms, the hedge sent at 5ms after 5ms), and
// calls whose primary answers just as the hedge is launched (at 5ms).
// Every reply must be exactly one server's, and in Replicas, the winner's;
// under -race, no attempt may touch the caller's messages or options
// concurrently with the caller.
func TestConcurrentHedgesNeverMix(t *testing.T) {
	for _, mode := range []string{"interceptor", "replicas"} {
		for _, primary := range []time.Duration{10 * time.Millisecond, 5 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/primary %v", mode, primary), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { concurrentHedges(t, mode, primary) })
			})
		}
	}
}

func concurrentHedges(t *testing.T, mode string, primary time.Duration) {
	const callers, calls = 64, 8
	n := newNetwork(t)
	n.add("a:1", answerAt(primary))
	n.add("b:1", answerAt(primary))
	budget, err := hedge.NewBudget(1, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Policy:  hedge.Policy{Delay: 5 * time.Millisecond, Budget: budget, Gate: hedge.Gate{Disabled: true}},
		Methods: []string{getMethod},
	}
	var cc grpc.ClientConnInterface
	if mode == "interceptor" {
		cc = n.conn([]string{"a:1", "b:1"}, interceptor(mustClient(t, cfg)))
	} else {
		r, err := NewReplicas(ReplicasConfig{Config: cfg, Targets: []Target{
			{Name: "a:1", Conn: n.direct("a:1")}, {Name: "b:1", Conn: n.direct("b:1")},
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		cc = r
	}
	type result struct {
		name    string
		receipt atomic.Pointer[hedge.Receipt]
	}
	results := make([]result, callers*calls)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			req, out := wrapperspb.String(""), new(typepb.Field)
			for j := range calls {
				res := &results[i*calls+j]
				req.Value = string(rune('a'+i%26)) + string(rune('a'+j%26))
				var header metadata.MD
				err := cc.Invoke(context.Background(), getMethod, req, out, grpc.Header(&header), OnReceipt(func(x hedge.Receipt) {
					res.receipt.Store(&x)
				}))
				if err != nil {
					t.Error(err)
					return
				}
				if !whole(out) {
					t.Errorf("reply %v mixes servers", out)
				}
				res.name = out.Name
				req.Value = "changed after the call" // a loser must not see this
				out.Name = "scribbled by the caller"
			}
		})
	}
	wg.Wait()
	synctest.Wait() // every receipt delivered
	hedged, late := 0, 0
	for i := range results {
		r := results[i].receipt.Load()
		if r == nil {
			t.Fatalf("call %d: no receipt", i)
		}
		if r.AttemptsLaunched == 2 {
			hedged++
		}
		late += r.LateCompletions
		if mode == "replicas" && r.WinnerTargetName != results[i].name {
			t.Errorf("reply from %s, receipt says %s won", results[i].name, r.WinnerTargetName)
		}
	}
	if primary > 5*time.Millisecond {
		if hedged != callers*calls {
			t.Errorf("%d of %d calls hedged, want all", hedged, callers*calls)
		}
		if late == 0 {
			t.Error("no loser answered: the test did not make both attempts answer")
		}
	}
	t.Logf("%d calls, %d hedged, %d losers answered too", callers*calls, hedged, late)
}
