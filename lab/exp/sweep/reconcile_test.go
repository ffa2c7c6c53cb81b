package sweep

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/fixture"
)

// The sweep counts the client's attempts on the client. Reads rotate over
// two replicas without hedging, but only one is counted as a fixture: the
// client launched every read's attempt, the counted fixture started half,
// and the report must say so rather than copy the fixtures' count.
func TestSweepPointCountsClientAttemptsOnClient(t *testing.T) {
	var rig exp.Rig
	defer rig.Close()
	fixtures, err := rig.StartPair(fixture.Constant(0), 1)
	if err != nil {
		t.Fatal(err)
	}
	base := rig.Transport()
	targets := []string{fixtures[0].URL(), fixtures[1].URL()}
	const n = 40
	cfg := Config{Requests: n, Rate: 1000, Seed: 1}
	pt, err := runPoint(context.Background(), cfg, 0, base, targets, fixtures[:1], hedge.Policy{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := fixture.SettleAll(context.Background(), fixtures); err != nil {
		t.Fatal(err)
	}
	if pt.Succeeded != n || pt.ReceiptsMissing != 0 {
		t.Fatalf("%d of %d reads succeeded, %d receipts missing (%s)", pt.Succeeded, n, pt.ReceiptsMissing, pt.FirstError)
	}
	if w := pt.Work; w.ClientAttempts != n || w.Started != n/2 || w.Unreconciled != n/2 {
		t.Errorf("work %+v: want %d client attempts, %d started, %d unreconciled", w, n, n/2, n/2)
	}
}

// With hedging, the reported client attempts are the sum of the receipts'
// attempts launched, and the difference from the fixtures' count is
// reported as it is.
func TestSweepPointReconcilesReceiptsWithFixtures(t *testing.T) {
	var rig exp.Rig
	defer rig.Close()
	fixtures, err := rig.StartPair(fixture.Lognormal{P50: time.Millisecond, P99: 4 * time.Millisecond}, 1)
	if err != nil {
		t.Fatal(err)
	}
	base := rig.Transport()
	targets := []string{fixtures[0].URL(), fixtures[1].URL()}
	b, _ := hedge.NewBudget(1, 1000)
	p := hedge.Policy{Delay: time.Millisecond, Budget: b, Gate: hedge.Gate{Disabled: true}}
	var launched, receipts atomic.Int64
	ctx := hedge.WithReceipt(context.Background(), func(r hedge.Receipt) {
		launched.Add(int64(r.AttemptsLaunched))
		receipts.Add(1)
	})
	const n = 60
	pt, err := runPoint(ctx, Config{Requests: n, Rate: 400, Seed: 1}, 1, base, targets, fixtures, p)
	if err != nil {
		t.Fatal(err)
	}
	// The context's receipt callback runs just after the client's own.
	for deadline := time.Now().Add(time.Second); receipts.Load() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	w := pt.Work
	if pt.ReceiptsMissing != 0 || receipts.Load() != n {
		t.Fatalf("receipts: %d missing in the report, %d of %d seen here", pt.ReceiptsMissing, receipts.Load(), n)
	}
	if w.ClientAttempts != launched.Load() || w.ClientAttempts < n {
		t.Errorf("client attempts %d, receipts say %d (reads %d)", w.ClientAttempts, launched.Load(), n)
	}
	if w.Unreconciled != w.ClientAttempts-w.Started || w.Unreconciled < 0 {
		t.Errorf("work %+v: unreconciled must be client attempts less started, and not negative", w)
	}
}
