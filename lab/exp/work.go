package exp

import (
	"math"
	"net/http"

	"github.com/tailgate-dev/tailgate/lab/fixture"
)

// Work is what fixtures did during one run, from their own counters, next
// to what the client believes it sent. The two need not match: an attempt
// cancelled before it was written never reaches a server. Unreconciled
// says by how much they differ.
type Work struct {
	ClientAttempts        int64 `json:"clientAttempts"`
	Started               int64 `json:"started"`
	Completed             int64 `json:"completed"`
	CompletedAfterCancel  int64 `json:"completedAfterCancel"`
	CancellationsObserved int64 `json:"cancellationsObserved"`
	Rejected              int64 `json:"rejected"`
	// Unreconciled is ClientAttempts - Started.
	Unreconciled int64 `json:"unreconciled"`
	// PerRequest is Started per client request.
	PerRequest float64 `json:"perRequest"`
}

func WorkBetween(before, after fixture.Stats, clientAttempts int64, requests int) Work {
	w := Work{
		ClientAttempts:        clientAttempts,
		Started:               after.Started - before.Started,
		Completed:             after.Completed - before.Completed,
		CompletedAfterCancel:  after.CompletedAfterCancel - before.CompletedAfterCancel,
		CancellationsObserved: after.CancellationsObserved - before.CancellationsObserved,
		Rejected:              after.Rejected - before.Rejected,
	}
	w.Unreconciled = w.ClientAttempts - w.Started
	if requests > 0 {
		w.PerRequest = float64(w.Started) / float64(requests)
	}
	return w
}

// CloseIdle returns rt's CloseIdleConnections, or a function that does
// nothing when rt has none: for fixture.QuiesceAll.
func CloseIdle(rt http.RoundTripper) func() {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		return c.CloseIdleConnections
	}
	return func() {}
}

// Round2 rounds a figure to two decimals, as reports give shares in %.
func Round2(x float64) float64 { return math.Round(x*100) / 100 }

// Round3 rounds a figure to three decimals, as reports give times in ms.
func Round3(x float64) float64 { return math.Round(x*1000) / 1000 }
