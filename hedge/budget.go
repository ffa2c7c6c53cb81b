package hedge

import (
	"fmt"
	"math"
	"sync/atomic"
)

// creditUnit is the fixed-point scale of budget credits: one hedge costs
// creditUnit micro-credits. Integer arithmetic keeps the bound exact.
const creditUnit = 1_000_000

// Default budget parameters.
const (
	DefaultBudgetFraction = 0.1
	DefaultBudgetBurst    = 10
)

// Budget limits duplicate work. Every admitted operation earns Fraction of a
// credit, credits are capped at Burst, and every hedge spends one credit. So
// over any interval the hedges sent are at most Burst + Fraction × admissions,
// and an idle period never saves up more than Burst hedges in a row.
//
// A Budget is safe for concurrent use and may be shared by several Hedgers
// (for example all the shards of a fan-out) so that they draw on one pool.
// SetRates changes its fraction and burst while it is in use.
type Budget struct {
	perAdmit atomic.Int64 // micro-credits earned per admission
	max      atomic.Int64 // micro-credits cap
	credits  atomic.Int64
}

// NewBudget returns a budget that earns fraction (in [0, 1]) of a credit per
// admitted operation and holds at most burst (>= 1) credits. It starts full,
// so a cold process may hedge its first burst operations.
func NewBudget(fraction, burst float64) (*Budget, error) {
	if err := checkRates(fraction, burst); err != nil {
		return nil, err
	}
	b := &Budget{}
	b.perAdmit.Store(int64(fraction * creditUnit))
	b.max.Store(int64(burst * creditUnit))
	b.credits.Store(b.max.Load())
	return b, nil
}

func checkRates(fraction, burst float64) error {
	if math.IsNaN(fraction) || fraction < 0 || fraction > 1 {
		return fmt.Errorf("%w: budget fraction %v outside [0, 1]", ErrInvalid, fraction)
	}
	if math.IsNaN(burst) || burst < 1 || burst > 1e9 {
		return fmt.Errorf("%w: budget burst %v outside [1, 1e9]", ErrInvalid, burst)
	}
	return nil
}

// SetRates changes the budget's fraction and burst, as NewBudget checks
// them, keeping the credits it holds: a smaller burst cuts them to it at
// once, a larger one lets them grow as operations earn them (it does not
// fill the budget, so a change cannot release a burst of hedges that the
// operations did not pay for). Operations in flight and those to come
// earn and spend under the new rates, so that the bound holds from the
// change on: hedges <= burst + fraction × admissions, with the credits
// held at the change counting as part of the burst.
func (b *Budget) SetRates(fraction, burst float64) error {
	if err := checkRates(fraction, burst); err != nil {
		return err
	}
	b.perAdmit.Store(int64(fraction * creditUnit))
	m := int64(burst * creditUnit)
	b.max.Store(m)
	for {
		cur := b.credits.Load()
		if cur <= m || b.credits.CompareAndSwap(cur, m) {
			return nil
		}
	}
}

// Admit records one admitted operation and earns its share of a credit.
func (b *Budget) Admit() {
	per := b.perAdmit.Load()
	if per == 0 {
		return
	}
	for {
		cur, m := b.credits.Load(), b.max.Load()
		if cur >= m {
			return
		}
		next := min(cur+per, m)
		if b.credits.CompareAndSwap(cur, next) {
			return
		}
	}
}

// TrySpend takes one credit for a hedge and reports whether there was one.
func (b *Budget) TrySpend() bool {
	for {
		cur := b.credits.Load()
		if cur < creditUnit {
			return false
		}
		if b.credits.CompareAndSwap(cur, cur-creditUnit) {
			return true
		}
	}
}

// refund returns a credit taken for a hedge that was not sent after all.
func (b *Budget) refund() {
	for {
		cur := b.credits.Load()
		next := min(cur+creditUnit, b.max.Load())
		if b.credits.CompareAndSwap(cur, next) {
			return
		}
	}
}

// Credits reports the hedges the budget would allow right now.
func (b *Budget) Credits() float64 {
	return float64(b.credits.Load()) / creditUnit
}

// Fraction reports the credit earned per admitted operation.
func (b *Budget) Fraction() float64 { return float64(b.perAdmit.Load()) / creditUnit }

// Burst reports the credit cap.
func (b *Budget) Burst() float64 { return float64(b.max.Load()) / creditUnit }
