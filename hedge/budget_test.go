package hedge

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestBudgetIntervalBound checks the budget's promise on random sequences of
// admissions and hedge attempts: over every interval, hedges granted are at
// most burst + fraction × admissions in that interval.
func TestBudgetIntervalBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		fraction := []float64{0, 0.01, 0.05, 0.1, 0.333, 1}[trial%6]
		burst := float64(1 + rng.IntN(10))
		b := mustBudget(t, fraction, burst)
		const n = 400
		// events[i] is +1 for an admission, or the outcome of a spend.
		adm := make([]int, n+1)   // prefix sums of admissions
		spent := make([]int, n+1) // prefix sums of granted hedges
		for i := 1; i <= n; i++ {
			adm[i], spent[i] = adm[i-1], spent[i-1]
			if rng.IntN(3) == 0 {
				b.Admit()
				adm[i]++
			} else if b.TrySpend() {
				spent[i]++
			}
		}
		for i := 0; i <= n; i++ {
			for j := i + 1; j <= n; j++ {
				h, a := spent[j]-spent[i], adm[j]-adm[i]
				if float64(h) > burst+fraction*float64(a)+1e-9 {
					t.Fatalf("trial %d: %d hedges over (%d,%d] with %d admissions: above burst %v + fraction %v", trial, h, i, j, a, burst, fraction)
				}
			}
		}
	}
}

// TestBudgetNoStormAfterIdle: however long the quiet spell, at most burst
// hedges go out in a row.
func TestBudgetNoStormAfterIdle(t *testing.T) {
	b := mustBudget(t, 0.5, 4)
	for range 1000 {
		b.Admit() // a long, hedge-free stretch
	}
	granted := 0
	for range 100 {
		if b.TrySpend() {
			granted++
		}
	}
	if granted != 4 {
		t.Errorf("%d hedges in a row after idle, want burst 4", granted)
	}
	if b.Credits() != 0 {
		t.Errorf("credits %v", b.Credits())
	}
	b.Admit()
	b.Admit()
	if !b.TrySpend() || b.TrySpend() {
		t.Error("two admissions at fraction 0.5 should earn exactly one hedge")
	}
	if b.Fraction() != 0.5 || b.Burst() != 4 {
		t.Errorf("Fraction %v Burst %v", b.Fraction(), b.Burst())
	}
}

func TestBudgetConcurrent(t *testing.T) {
	b := mustBudget(t, 0.1, 5)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 8 {
		wg.Go(func() {
			n := 0
			for range 1000 {
				b.Admit()
				if b.TrySpend() {
					n++
				}
			}
			mu.Lock()
			granted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if limit := 5 + 0.1*8000; float64(granted) > limit {
		t.Errorf("%d hedges granted, limit %v", granted, limit)
	}
	if granted < 790 {
		t.Errorf("%d hedges granted: the budget should allow ~805", granted)
	}
}

func TestBudgetRefundCapped(t *testing.T) {
	b := mustBudget(t, 0.1, 2)
	b.refund()
	if b.Credits() != 2 {
		t.Errorf("refund above burst: %v", b.Credits())
	}
}

func TestNewBudgetRejects(t *testing.T) {
	for _, c := range []struct{ f, b float64 }{{-0.1, 1}, {1.1, 1}, {math.NaN(), 1}, {0.1, 0.5}, {0.1, math.NaN()}, {0.1, 2e9}} {
		if _, err := NewBudget(c.f, c.b); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewBudget(%v, %v): err %v", c.f, c.b, err)
		}
	}
}
