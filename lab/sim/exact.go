package sim

import (
	"math/rand/v2"
	"time"
)

// The exact method draws the first attempt of every shard of every
// request, and a second attempt for every hedged shard: N to 2N draws per
// request. It makes no approximation, so it is the reference the
// order-statistics method is tested against, and it is the only method
// that can apply a budget, because a budget couples requests: whether
// request i may hedge depends on how many hedges the requests before it
// sent.

// runExact simulates every request exactly. grants, when non-nil, caps the
// hedges of request i at grants[i] (from the budget); nil means unlimited.
func (s *sim) runExact(lats []time.Duration, grants []int32, tallies []tally) {
	bufs := make([][]time.Duration, s.workers)
	s.forRequests(func(w, i int, rng *rand.Rand) {
		if bufs[w] == nil {
			bufs[w] = make([]time.Duration, s.n)
		}
		grant := -1
		if grants != nil {
			grant = int(grants[i])
		}
		lat, hedges, partial := s.exactRequest(rng, bufs[w], grant)
		lats[i] = lat
		tallies[w].hedges += int64(hedges)
		if partial {
			tallies[w].partial++
		}
	})
}

// exactRequest simulates one request: buf (len N) receives the shards'
// answer times. At most grant shards are hedged (grant < 0: no limit), the
// first ones in shard order, because all of a request's hedges are due at
// the same virtual moment and the budget serves them in turn. It returns
// the user-facing latency, the hedges sent and whether the result is
// partial.
func (s *sim) exactRequest(rng *rand.Rand, buf []time.Duration, grant int) (time.Duration, int, bool) {
	x := s.requestFactor(rng)
	answered := 0 // shards whose first attempt answers by HedgeAfter
	for j := range buf {
		buf[j] = scale(draw(s.lat, rng), x)
		if buf[j] <= s.d {
			answered++
		}
	}
	hedges := 0
	if s.hedging && answered < s.k {
		// The request is still waiting at HedgeAfter, so every shard that
		// has not answered gets a hedge, as far as the grant goes.
		hedges = s.n - answered
		if grant >= 0 && grant < hedges {
			hedges = grant
		}
		left := hedges
		for j := 0; left > 0; j++ {
			if buf[j] > s.d {
				left--
				buf[j] = min(buf[j], satAdd(s.d, scale(draw(s.lat, rng), x)))
			}
		}
	}
	lat, partial := s.finish(kthSmallest(buf, s.k))
	return lat, hedges, partial
}

// wanted returns the hedges request i would send with no budget, from the
// same draws exactRequest makes first: the number of its shards that have
// not answered at HedgeAfter, if it is still waiting then.
func (s *sim) wanted(rng *rand.Rand) int {
	x := s.requestFactor(rng)
	answered := 0
	for range s.n {
		if scale(draw(s.lat, rng), x) <= s.d {
			answered++
		}
	}
	if answered >= s.k {
		return 0
	}
	return s.n - answered
}

// runBudget applies a fleet-wide budget in request order. Requests are
// treated as arriving one after another: request i's N shard requests earn
// their credit, then its hedges (all due at HedgeAfter) spend it, before
// request i+1 arrives. The budget makes request i depend on every request
// before it, but only through the number of hedges each wants, and that
// depends only on its first attempts. So the work splits in three passes
// that keep the parallelism and the determinism: count the hedges each
// request wants (parallel), grant them from the budget in request order
// (sequential, O(1) per request), then simulate each request with its grant
// (parallel, redrawing the same first attempts from the request's own
// stream). The first attempts are drawn twice, at most doubling the cost.
func (s *sim) runBudget(lats []time.Duration, tallies []tally) {
	grants := make([]int32, s.requests)
	s.forRequests(func(_, i int, rng *rand.Rand) {
		grants[i] = int32(s.wanted(rng))
	})
	credits := s.maxCredit // a budget starts full, as hedge.Budget does
	earn := int64(s.n) * s.perAdmit
	for i, want := range grants {
		credits = min(credits+earn, s.maxCredit)
		g := min(int64(want), credits/creditUnit)
		credits -= g * creditUnit
		grants[i] = int32(g)
	}
	s.runExact(lats, grants, tallies)
}

// kthSmallest returns the k-th smallest (1-based) of a, reordering a. The
// common cases, waiting for all or for the first, are a single scan; other
// k use quickselect, O(N) on average, rather than an O(N log N) sort.
func kthSmallest(a []time.Duration, k int) time.Duration {
	switch k {
	case len(a):
		return maxOf(a)
	case 1:
		return minOf(a)
	}
	lo, hi, t := 0, len(a)-1, k-1
	for lo < hi {
		// Median of three guards against sorted and reverse-sorted input.
		mid := lo + (hi-lo)/2
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		pivot := a[mid]
		i, j := lo, hi
		for i <= j { // Hoare partition: a[lo..j] <= pivot <= a[i..hi]
			for a[i] < pivot {
				i++
			}
			for a[j] > pivot {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		switch {
		case t <= j:
			hi = j
		case t >= i:
			lo = i
		default: // j < t < i: a[t] == pivot
			return a[t]
		}
	}
	return a[t]
}

func maxOf(a []time.Duration) time.Duration {
	m := a[0]
	for _, v := range a[1:] {
		m = max(m, v)
	}
	return m
}

func minOf(a []time.Duration) time.Duration {
	m := a[0]
	for _, v := range a[1:] {
		m = min(m, v)
	}
	return m
}
