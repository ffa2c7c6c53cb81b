package hedge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/internal/memnet"
)

// TestPooledStateNeverCrossesRequests drives many concurrent requests, some
// hedged and some not, through one Transport whose per-request state is
// pooled: every answer and every receipt must belong to its own request,
// also when read after later requests have reused the state.
func TestPooledStateNeverCrossesRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := &memnet.Transport{}
		for _, host := range []string{"a", "b"} {
			net.Handle(host, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id, _ := strconv.Atoi(r.URL.Query().Get("id"))
				switch {
				case id%5 == 0 && r.Header.Get(HedgeHeader) == "":
					memnet.Sleep(r.Context(), 20*time.Millisecond) // a straggling primary
				case id%5 == 1 && r.Header.Get(HedgeHeader) == "":
					time.Sleep(6 * time.Millisecond) // wins just after its hedge left
				case id%5 == 1:
					memnet.Sleep(r.Context(), 20*time.Millisecond) // a losing hedge
				default:
					time.Sleep(time.Duration(id%3) * time.Millisecond)
				}
				fmt.Fprintf(w, "%s:%d", host, id)
			}))
		}
		var mu sync.Mutex
		receipts := map[int]Receipt{}
		tr, err := NewTransport(TransportConfig{
			Base: slowTeardown{net}, Targets: []string{"http://a", "http://b"}, Policy: Policy{Delay: 5 * time.Millisecond, Budget: mustBudget(t, 1, 1e6), Gate: Gate{Disabled: true}},
			OnReceipt: func(req *http.Request, r Receipt) {
				id, _ := strconv.Atoi(req.URL.Query().Get("id"))
				mu.Lock()
				receipts[id] = r
				mu.Unlock()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		bodies := make([]*http.Response, 400)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for id := w; id < len(bodies); id += 8 {
					req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://x/item?id="+strconv.Itoa(id), nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Error(err)
						return
					}
					bodies[id] = resp // read later, after others reused the state
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		hedged := 0
		for id, resp := range bodies {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			r, ok := receipts[id]
			mu.Unlock()
			if err != nil || !ok {
				t.Fatalf("request %d: %v, receipt %v", id, err, ok)
			}
			want := fmt.Sprintf("%s:%d", r.WinnerTargetName[len("http://"):], id)
			if string(b) != want || len(r.Attempts) != r.AttemptsLaunched || r.Attempts[r.WinnerAttempt].Fate != FateWon {
				t.Fatalf("request %d: body %q, receipt %+v", id, b, r)
			}
			if resp.Request.URL.Query().Get("id") != strconv.Itoa(id) {
				t.Fatalf("request %d: response names request %s", id, resp.Request.URL)
			}
			if r.AttemptsLaunched > 1 {
				hedged++
			}
		}
		if hedged < 70 || hedged == len(bodies) {
			t.Errorf("%d of %d requests hedged: the mix of pooled and unpooled requests is not exercised", hedged, len(bodies))
		}
	})
}

// slowTeardown returns a cancelled hedge's error only 2ms later, as a
// connection torn down over a slow network would: the losing attempt then
// reports well after the winner's RoundTrip has returned.
type slowTeardown struct{ next http.RoundTripper }

func (s slowTeardown) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(r)
	if err != nil && r.Header.Get(HedgeHeader) != "" {
		time.Sleep(2 * time.Millisecond)
	}
	return resp, err
}

// TestPooledDoOperations: inline operations reuse their state; results and
// receipts must still be each operation's own.
func TestPooledDoOperations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Policy{Delay: 2 * time.Millisecond, Budget: mustBudget(t, 1, 1e6), Gate: Gate{Disabled: true}})
		var kept []Receipt
		for i := range 300 {
			v, err := Do(t.Context(), h, Op[int]{
				Targets: []string{"a", "b"},
				Call: func(ctx context.Context, a Attempt) (int, error) {
					if a.Index == 0 && i%4 == 0 {
						<-ctx.Done() // hedged: the primary loses
						return 0, ctx.Err()
					}
					return i*10 + a.Index, nil
				},
				OnReceipt: func(r Receipt) { kept = append(kept, r) },
			})
			want := i * 10
			if i%4 == 0 {
				want++
			}
			if err != nil || v != want {
				t.Fatalf("op %d: %d, %v; want %d", i, v, err, want)
			}
		}
		synctest.Wait()
		for i, r := range kept {
			if want := 1 + btoi(i%4 == 0); r.AttemptsLaunched != want || len(r.Attempts) != want {
				t.Fatalf("receipt %d changed or wrong: %+v", i, r)
			}
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestHandedOutStateIsNeverReused: what a request's primary hands to the
// base (its request, its context) may be kept, and must stay as it was
// when later requests reuse the rest of the request's state: the request
// unchanged, the context cancelled and still the primary's.
func TestHandedOutStateIsNeverReused(t *testing.T) {
	for _, targets := range [][]string{nil, {"http://a", "http://b"}} {
		var kept []*http.Request
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			kept = append(kept, req)
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(req.URL.Query().Get("id"))), Request: req}, nil
		})
		tr, err := NewTransport(TransportConfig{Base: base, Targets: targets})
		if err != nil {
			t.Fatal(err)
		}
		var bodies []*http.Response
		for id := range 50 {
			req, _ := http.NewRequest(http.MethodGet, "http://x/item?id="+strconv.Itoa(id), nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, resp)
		}
		for id, req := range kept {
			if got := req.URL.Query().Get("id"); got != strconv.Itoa(id) {
				t.Errorf("targets %v: request %d kept by the base now asks for id %s", targets, id, got)
			}
			if err := req.Context().Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("targets %v: request %d's context: %v, want it cancelled", targets, id, err)
			}
			if a, ok := AttemptFrom(req.Context()); !ok || a.Index != 0 {
				t.Errorf("targets %v: request %d's context is attempt %v, %v", targets, id, a, ok)
			}
		}
		for id, resp := range bodies {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != strconv.Itoa(id) {
				t.Errorf("targets %v: answer %d reads %q", targets, id, b)
			}
		}
	}
}
