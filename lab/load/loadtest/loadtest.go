// Package loadtest makes outcomes for tests of what summarises them.
package loadtest

import (
	"context"
	"time"

	"github.com/tailgate-dev/tailgate/lab/load"
)

// Outcomes returns ok successes of lat, then failed failures and dropped
// drops.
func Outcomes(ok int, lat time.Duration, failed, dropped int) []load.Outcome {
	var outs []load.Outcome
	for range ok {
		outs = append(outs, load.Outcome{Latency: lat})
	}
	for range failed {
		outs = append(outs, load.Outcome{Latency: time.Second, Err: context.DeadlineExceeded})
	}
	for range dropped {
		outs = append(outs, load.Outcome{Err: load.ErrDropped})
	}
	return outs
}
