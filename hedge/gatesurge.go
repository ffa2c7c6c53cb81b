package hedge

import (
	"math"
	"math/bits"
	"time"
)

// A surge (see Gate): the late share of the last 32 operations against the
// window's. Each operation sets one bit, when its delay runs out (late) or
// when it ends before that (on time), so that a late operation counts at
// once rather than when its slow answer comes back.

// late notes an operation that wanted a hedge because its answer was late
// at now: it counts in the window, and in the last 32 for a surge.
func (g *gate) late(now time.Time) {
	g.counts.add(now, countWanted)
	g.shiftLate(1)
}

// ended notes an operation that ended; one that was not late (wanted no
// hedge because of its delay) counts as on time among the last 32.
func (g *gate) ended(late bool) {
	if !late {
		g.shiftLate(0)
	}
}

func (g *gate) shiftLate(bit uint32) {
	if g.cfg.Disabled {
		return
	}
	for {
		old := g.lateBits.Load()
		if g.lateBits.CompareAndSwap(old, old<<1|bit) {
			break
		}
	}
	if g.settled.Load() < 32 {
		g.settled.Add(1)
	}
}

// surging reports whether the late operations of the last 32 make a
// surge, and starts one at n if none is on.
func (g *gate) surging(n int64) bool {
	k := g.surgeK.Load()
	if k == 0 || int32(bits.OnesCount32(g.lateBits.Load())) < k {
		return g.surgeFrom.Load() != 0
	}
	if g.surgeFrom.CompareAndSwap(0, n+1) {
		g.surgeWon.Store(false)
	}
	return true
}

// surge updates the surge's threshold from the window's late share in t,
// starts or ends a surge, and reports whether it is unproven (no hedge
// sent since it began has won at the old speed). Called with g.mu held.
func (g *gate) surge(now time.Time, t gateTotals) bool {
	k := int32(0)
	if g.settled.Load() >= 32 && t[countOps] > 0 {
		k = surgeThreshold(float64(t[countWanted]) / float64(t[countOps]))
	}
	g.surgeK.Store(k)
	if !g.surging(g.nanos(now)) {
		g.state.Surge = false
		return false
	}
	if int32(bits.OnesCount32(g.lateBits.Load())) < k/2 {
		g.surgeFrom.Store(0) // over: half the threshold, for hysteresis
		g.state.Surge = false
		return false
	}
	g.state.Surge = true
	return !g.surgeWon.Load()
}

// surgeThreshold returns the least number of late operations among 32
// that chance alone reaches with probability below surgeChance when each
// is late with probability p (at least surgeMin), or 0 when no number of
// them would be a surge.
func surgeThreshold(p float64) int32 {
	// The binomial tail, from the top: P(X = 32) down to P(X = k).
	tail := 0.0
	for k := 32; k >= surgeMin; k-- {
		tail += binomial(32, k, p)
		if tail >= surgeChance {
			if k == 32 {
				return 0
			}
			return int32(k + 1)
		}
	}
	return surgeMin
}

// binomial returns P(X = k) for X ~ Binomial(n, p).
func binomial(n, k int, p float64) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
	if p <= 0 {
		if k == 0 {
			return 1
		}
		return 0
	}
	if p >= 1 {
		if k == n {
			return 1
		}
		return 0
	}
	return math.Exp(lg(n) - lg(k) - lg(n-k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
}
