package exp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// errNotValue is the verdict on an answer that is not HTTP 200 with JSON
// {"value": "<non-empty string>"}.
var errNotValue = errors.New(`lab: answer is not 200 with JSON {"value": non-empty}`)

// AcceptValue is the lab client's acceptance check: HTTP 200 and a JSON
// body whose "value" is a non-empty string. Anything else is refused with
// a reason that names what was wrong, so that a misbehaving endpoint shows
// in the receipts per attempt instead of counting as a win.
func AcceptValue(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: status %d", errNotValue, resp.StatusCode)
	}
	var body []byte
	if b, ok := resp.Body.(interface{ Bytes() []byte }); ok {
		body = b.Bytes() // the hedging transport's buffer: leave it unread
	} else {
		var err error
		if body, err = io.ReadAll(resp.Body); err != nil {
			return fmt.Errorf("%w: reading body: %w", errNotValue, err)
		}
	}
	var v struct {
		Value *string `json:"value"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("%w: body %.40q is not JSON", errNotValue, body)
	}
	if v.Value == nil || *v.Value == "" {
		return fmt.Errorf("%w: body %.40q has no non-empty value", errNotValue, body)
	}
	return nil
}

// Fetch sends req with client and checks the answer with AcceptValue,
// reading the body within the lab client's limit.
func Fetch(client *http.Client, req *http.Request) error {
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, hedge.DefaultClientMaxBodyBytes+1))
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return AcceptValue(resp)
}

// Read GETs url with client and checks the answer with AcceptValue. A
// hedging client's winner has passed AcceptValue already; when nothing won,
// it hands back the last refused answer, which fails the check here.
func Read(ctx context.Context, client *http.Client, url string) error {
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

// receiptWait bounds AwaitReceipts: a read's receipt comes once its losers
// are accounted for, within the policy's observation window (100ms by
// default) after the read returned.
const receiptWait = 2 * time.Second

// AwaitReceipts waits until got reaches want receipts (one per read sent),
// for receiptWait at most, and returns how many are still missing.
func AwaitReceipts(ctx context.Context, got *atomic.Int64, want int) int {
	deadline := time.Now().Add(receiptWait)
	for got.Load() < int64(want) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(2 * time.Millisecond)
	}
	return max(want-int(got.Load()), 0)
}

// Rotating returns t with its primaries spread round-robin over its
// targets, each hedge to the next target: the lab's experiments fix where
// each read goes, so that a straggler shape ("5% of reads take 40ms on
// their primary") means the same in every condition they compare, rather
// than depending on what the latency-aware default steering learns. One
// class of read ("lab"): the experiments' reads are alike.
func Rotating(t *hedge.Transport) http.RoundTripper { return steered(t, true) }

// InOrder returns t with every primary to its first target and each hedge
// to the next: an experiment that compares a primary and its alternate as
// configured. One class of read, as Rotating.
func InOrder(t *hedge.Transport) http.RoundTripper { return steered(t, false) }

func steered(t *hedge.Transport, rotate bool) http.RoundTripper {
	if t.Replicas() == nil {
		return t // no targets: every attempt goes to the request's URL
	}
	return &rotating{t: t, h: t.Classes().Hedger("lab"), n: t.Replicas().Len(), rotate: rotate}
}

type rotating struct {
	t      *hedge.Transport
	h      *hedge.Hedger
	n      int
	rotate bool
	next   atomic.Uint64
}

// RoundTrip implements http.RoundTripper, as hedge.Transport's does.
func (r *rotating) RoundTrip(req *http.Request) (*http.Response, error) {
	first := 0
	if r.rotate {
		first = int(r.next.Add(1)-1) % r.n
	}
	resp, err := r.t.RoundTripWith(req, r.h, rotation{first: first, n: r.n})
	if resp != nil {
		return resp, nil // the last refused, when err is not nil
	}
	return nil, err
}

// rotation steers attempt i of a read to target (first+i) mod n.
type rotation struct{ first, n int }

func (s rotation) Pick(a hedge.Attempt, _ []int) (int, error) { return (s.first + a.Index) % s.n, nil }
func (rotation) Done(hedge.Attempt, hedge.Result)             {}
