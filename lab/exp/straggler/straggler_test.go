package straggler

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/load"
	"github.com/tailgate-dev/tailgate/lab/load/loadtest"
)

func TestStragglerReconciles(t *testing.T) {
	rep, err := Run(context.Background(), Config{Requests: 120, Rate: 200, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, h := rep.Baseline, rep.Hedged
	// Every direct read reaches a replica. Through the gateway, a hedge
	// cancelled before it was written never reaches one: the difference
	// is at most the hedges.
	hedges := h.Work.ClientAttempts - int64(h.Requests)
	if b.Work.Unreconciled != 0 || h.Work.Unreconciled < 0 || h.Work.Unreconciled > hedges {
		t.Errorf("client (gateway) attempts and replica starts disagree: %+v %+v", b.Work, h.Work)
	}
	if b.Succeeded != 120 || h.Succeeded != 120 || b.BackendAttemptsPerRequest != 1 || h.BackendAttemptsPerRequest <= 1 {
		t.Errorf("sides %+v %+v", b, h)
	}
	bl, hl := rep.latencies[0], rep.latencies[1]
	if len(bl) != 120 || len(hl) != 120 {
		t.Errorf("latencies %d %d", len(bl), len(hl))
	}
	var buf bytes.Buffer
	if err := exp.WriteHTML(&buf, "t", rep.Environment, rep); err != nil || !bytes.Contains(buf.Bytes(), []byte("<svg")) {
		t.Errorf("HTML: %v", err)
	}
}

// A curve rises to the share of reads that succeeded: failed reads never
// arrive.
func TestStragglerCDFTopsOutAtSuccessShare(t *testing.T) {
	base := loadtest.Outcomes(6, 80*time.Millisecond, 3, 1)
	hedged := loadtest.Outcomes(10, 5*time.Millisecond, 0, 0)
	tops := []float64{0.6, 1}
	st := &Report{Requests: 10, Baseline: Side{Summary: load.Summarize(base, time.Second)}, Hedged: Side{Summary: load.Summarize(hedged, time.Second)}}
	st.latencies = [2][]float64{load.LatenciesMs(base), load.LatenciesMs(hedged)}
	for i, s := range st.Section().Plots[0].Series {
		if n := len(s.Points); n == 0 || s.Points[n-1].Y != tops[i] {
			t.Errorf("straggler series %q ends at %v, want Y = %v", s.Name, s.Points, tops[i])
		}
	}
}
