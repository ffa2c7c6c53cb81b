package hedge

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// suppressHooks are testHooks that also have a Suppressed method and
// record what it is told.
type suppressHooks struct {
	testHooks
	smu        sync.Mutex
	suppressed []string
}

func (h *suppressHooks) Suppressed(a Attempt, r SuppressReason) {
	h.smu.Lock()
	defer h.smu.Unlock()
	h.suppressed = append(h.suppressed, fmt.Sprintf("%d %s %s", a.Index, a.Trigger, r))
}

func (h *suppressHooks) got() string {
	h.smu.Lock()
	defer h.smu.Unlock()
	return fmt.Sprint(h.suppressed)
}

// Each hedge a request wanted and did not send is told to that request's
// hooks, with the attempt it would have been, why it was wanted and why it
// was not sent, as the Observer hears of it: for the budget, for Admit
// (capacity) and for the attempt limit after a failure.
func TestSuppressHookToldPerRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: 2 * time.Millisecond, body: "a"}
		b := &backend{lat: 30 * time.Millisecond, body: "b"}
		budget, err := NewBudget(0, 1) // one hedge, and no more
		if err != nil {
			t.Fatal(err)
		}
		p := Policy{Delay: 10 * time.Millisecond, Budget: budget, Gate: Gate{Disabled: true}}
		tr, c := newMemTransport(t, p, TransportConfig{Targets: []string{"http://a", "http://b"}},
			map[string]*backend{"a": a, "b": b})
		do := func(h Steering) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
			resp, err := tr.RoundTripWith(req, nil, h)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			synctest.Wait()
		}

		// The budget's one credit: the hedge goes, nothing suppressed.
		h := &suppressHooks{testHooks: testHooks{admit: true}}
		do(h)
		if got := h.got(); got != "[]" || len(h.done) != 2 {
			t.Errorf("first request: suppressed %s, %d attempts done; want a hedge sent and nothing suppressed", got, len(h.done))
		}
		// No credit left: the hedge wanted at the delay is suppressed for
		// the budget, and the engine never asks Pick for it.
		h = &suppressHooks{testHooks: testHooks{admit: true}}
		do(h)
		if got := h.got(); got != "[1 delay budget]" || len(h.picks) != 1 {
			t.Errorf("budget spent: suppressed %s, picks %v; want [1 delay budget] and only the primary picked", got, h.picks)
		}
		if n := c.count(EventSuppress); n != 1 {
			t.Errorf("the Observer heard of %d suppressions, want the same one", n)
		}

		// Credit again, but Admit refuses: suppressed for capacity.
		budget.SetRates(1, 1)
		h = &suppressHooks{testHooks: testHooks{admit: false}}
		do(h)
		if got := h.got(); got != "[1 delay capacity]" {
			t.Errorf("Admit refused: suppressed %s, want [1 delay capacity]", got)
		}
	})
}

// After the last attempt allowed fails, the hedge it would want is
// suppressed for the attempt limit, and the hook hears it was wanted for a
// failure.
func TestSuppressHookMaxAttemptsAfterFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: time.Millisecond, status: 503}
		b := &backend{lat: time.Millisecond, status: 503}
		budget, _ := NewBudget(1, 10)
		p := Policy{Delay: time.Second, Budget: budget, Gate: Gate{Disabled: true}, MaxAttempts: 2}
		tr, _ := newMemTransport(t, p, TransportConfig{Targets: []string{"http://a", "http://b"}},
			map[string]*backend{"a": a, "b": b})
		h := &suppressHooks{testHooks: testHooks{admit: true}}
		req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		resp, err := tr.RoundTripWith(req, nil, h)
		if resp == nil || !errors.Is(err, ErrNotAccepted) {
			t.Fatalf("RoundTripWith = %v, %v; want the last response refused and ErrNotAccepted", resp, err)
		}
		resp.Body.Close()
		synctest.Wait()
		if got := h.got(); got != "[2 failure maxAttempts]" {
			t.Errorf("suppressed %s, want [2 failure maxAttempts]", got)
		}
	})
}
