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
type Budget struct {
	perAdmit int64 // micro-credits earned per admission
	max      int64 // micro-credits cap
	credits  atomic.Int64
}

// NewBudget returns a budget that earns fraction (in [0, 1]) of a credit per
// admitted operation and holds at most burst (>= 1) credits. It starts full,
// so a cold process may hedge its first burst operations.
func NewBudget(fraction, burst float64) (*Budget, error) {
	if math.IsNaN(fraction) || fraction < 0 || fraction > 1 {
		return nil, fmt.Errorf("%w: budget fraction %v outside [0, 1]", ErrInvalidPolicy, fraction)
	}
	if math.IsNaN(burst) || burst < 1 || burst > 1e9 {
		return nil, fmt.Errorf("%w: budget burst %v outside [1, 1e9]", ErrInvalidPolicy, burst)
	}
	b := &Budget{
		perAdmit: int64(fraction * creditUnit),
		max:      int64(burst * creditUnit),
	}
	b.credits.Store(b.max)
	return b, nil
}

// Admit records one admitted operation and earns its share of a credit.
func (b *Budget) Admit() {
	if b.perAdmit == 0 {
		return
	}
	for {
		cur := b.credits.Load()
		if cur >= b.max {
			return
		}
		next := min(cur+b.perAdmit, b.max)
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
		next := min(cur+creditUnit, b.max)
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
func (b *Budget) Fraction() float64 { return float64(b.perAdmit) / creditUnit }

// Burst reports the credit cap.
func (b *Budget) Burst() float64 { return float64(b.max) / creditUnit }
