package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// fetch sends a request through get and validates the answer with
// AcceptValue, reading the body within the lab client's limit.
func fetch(get func(int) (*http.Response, error), i int) error {
	resp, err := get(i)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, hedge.DefaultClientMaxBodyBytes+1))
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytesReader(body))
	return AcceptValue(resp)
}

func sumStats(fs []*Fixture) Stats {
	var t Stats
	for _, f := range fs {
		s := f.Stats()
		t.Started += s.Started
		t.Completed += s.Completed
		t.CompletedAfterCancel += s.CompletedAfterCancel
		t.CancellationsObserved += s.CancellationsObserved
		t.Rejected += s.Rejected
		t.Hedges += s.Hedges
		t.HedgesServed += s.HedgesServed
		t.Queued += s.Queued
	}
	return t
}

// Limits of settleAll. A point's backlog can be long (an overload point's
// queues keep serving reads whose clients have gone), so settleAll does not
// give the fixtures a fixed time: it waits as long as they keep finishing
// work, which scales the wait with what is outstanding (a fixture with W
// waves of queued work, W = waiting/Capacity, is given up to W stall
// limits), up to a cap.
const (
	// settleStall is how long settleAll waits without any busy fixture
	// finishing a request before it gives up: a fixture that finishes
	// nothing for this long is stuck, or its service times are longer
	// than the lab handles.
	settleStall = 30 * time.Second
	// settleCap bounds settleAll's whole wait, however steadily the
	// fixtures drain: past it, the backlog is too long for a lab run.
	settleCap = 10 * time.Minute
)

// errStillBusy marks settleAll giving up on fixtures that are still busy.
var errStillBusy = errors.New("lab: fixtures still busy")

// settleAll lets work that outlived its client finish, so it is counted:
// it returns once no fixture has a request waiting or in service. It gives
// up, with an error naming each busy fixture and what it still holds, when
// no request has finished for settleStall, after settleCap in all, or when
// ctx ends.
func settleAll(ctx context.Context, fixtures []*Fixture) error {
	return settleWithin(ctx, fixtures, settleStall, settleCap)
}

// settleWithin is settleAll with its limits as arguments.
func settleWithin(ctx context.Context, fixtures []*Fixture, stall, limit time.Duration) error {
	start := time.Now()
	progress := start // when a busy fixture last finished a request
	prev := make([]int64, len(fixtures))
	for i, f := range fixtures {
		prev[i] = f.pending.Load()
	}
	// Poll every millisecond at first, every 10ms once the wait is long.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	slow := false
	for {
		busy := false
		for i, f := range fixtures {
			n := f.pending.Load()
			if n < prev[i] {
				progress = time.Now()
			}
			prev[i] = n
			busy = busy || n > 0
		}
		if !busy {
			return nil
		}
		now := time.Now()
		switch {
		case now.Sub(progress) >= stall:
			return fmt.Errorf("%w: no request finished for %v (waited %v in all): %s",
				errStillBusy, stall, now.Sub(start).Round(time.Millisecond), describeBusy(fixtures))
		case now.Sub(start) >= limit:
			return fmt.Errorf("%w after %v, the most the lab waits for a backlog to drain: %s",
				errStillBusy, limit, describeBusy(fixtures))
		}
		if !slow && now.Sub(start) > 100*time.Millisecond {
			slow = true
			tick.Reset(10 * time.Millisecond)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: %w", errStillBusy, describeBusy(fixtures), ctx.Err())
		}
	}
}

// describeBusy names the busy fixtures and the requests each still holds.
func describeBusy(fixtures []*Fixture) string {
	var parts []string
	for _, f := range fixtures {
		pending, working := f.pending.Load(), f.inFlight.Load()
		if pending == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("fixture %s has %d requests in service and %d waiting for a slot",
			f.Name(), working, max(pending-working, 0)))
	}
	if parts == nil {
		return "none busy now"
	}
	return strings.Join(parts, "; ")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sortFloats(x []float64) { slices.Sort(x) }

// rankF returns the nearest-rank q-quantile of sorted x.
func rankF(x []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(x)))) - 1
	return x[min(max(i, 0), len(x)-1)]
}

// readValue GETs url with client and checks the answer with AcceptValue. A
// hedging client's winner has passed AcceptValue already; when nothing won,
// it hands back the last refused answer, which fails the check here.
func readValue(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// A hedge made by hedge.Do (the fan-out's per-shard hedging) is marked
	// as hedge.Transport marks its own, so fixtures count and may
	// deprioritise it.
	if a, ok := hedge.AttemptFrom(ctx); ok && a.IsHedge() {
		req.Header.Set(hedge.HedgeHeader, strconv.Itoa(a.Index))
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = AcceptValue(resp)
	io.Copy(io.Discard, resp.Body)
	return err
}
