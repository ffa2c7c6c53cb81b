package latency_test

import (
	"fmt"
	"time"

	"github.com/tailgate-dev/tailgate/internal/latency"
)

func Example() {
	var h latency.Histogram // the zero value is ready; Record is safe from any goroutine
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	s := h.Snapshot()
	fmt.Println("count:", s.Count(), "min:", s.Min(), "max:", s.Max(), "mean:", s.Mean())
	for _, q := range []float64{0.5, 0.99} {
		// Estimates within latency.RelativeError (1/64) of the exact
		// nearest-rank answers, here 500ms and 990ms.
		fmt.Printf("p%v: %v\n", q*100, s.Quantile(q).Round(time.Millisecond))
	}
	// Output:
	// count: 1000 min: 1ms max: 1s mean: 500.5ms
	// p50: 499ms
	// p99: 998ms
}

func ExampleWindow() {
	w := latency.NewWindow(10*time.Second, 10)
	start := time.Unix(1_700_000_000, 0)
	w.RecordAt(start, 80*time.Millisecond)                  // an old slow phase
	w.RecordAt(start.Add(20*time.Second), time.Millisecond) // the recent past
	now := start.Add(20 * time.Second)
	fmt.Println("window max:", w.SnapshotAt(now).Max())
	fmt.Println("cumulative max:", w.Cumulative().Max())
	// Output:
	// window max: 1ms
	// cumulative max: 80ms
}
