package lab

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
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

// settleAll lets work that outlived its client finish, so it is counted.
func settleAll(ctx context.Context, fixtures []*Fixture) error {
	settle, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, f := range fixtures {
		if err := f.Settle(settle); err != nil {
			return fmt.Errorf("lab: fixtures still busy: %w", err)
		}
	}
	return nil
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
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = AcceptValue(resp)
	io.Copy(io.Discard, resp.Body)
	return err
}
