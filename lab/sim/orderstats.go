package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// runOrderStats simulates each request in O(log N) work whatever its
// fan-out, from order statistics of the empirical distribution e (see the
// package documentation for the derivation and its error).
func (s *sim) runOrderStats(e *empirical, lats []time.Duration, tallies []tally) {
	// F(HedgeAfter): the share of first attempts that answer by then.
	// Computed once here unless a request factor rescales d per request.
	fd := 1.0
	if s.hedging {
		fd = e.cdf(s.d)
	}
	s.forRequests(func(w, i int, rng *rand.Rand) {
		lat, hedges, partial := s.orderStatRequest(e, fd, rng)
		lats[i] = lat
		tallies[w].hedges += int64(hedges)
		if partial {
			tallies[w].partial++
		}
	})
}

// orderStatRequest draws one request's completion time: the k-th smallest
// of N iid shard times.
//
// Without hedging that is F⁻¹(U₍k₎), where U₍k₎, the k-th smallest of N
// uniforms, is Beta(k, N−k+1).
//
// With hedging, it conditions on A, the number of shards whose first
// attempt answers by HedgeAfter: A ~ Binomial(N, F(d)). Those A shards are
// iid F restricted to [0, d]; the other N−A are iid G restricted to
// (d, ∞), where G(x) = 1 − (1 − F(x))(1 − F(x−d)) is a hedged shard's
// distribution, and they all answer after the first A. So if A >= k the
// request completes before any hedge is due, at the k-th smallest of the A
// early answers, and sends no hedge; otherwise every late shard is hedged
// (N−A hedges) and the request completes at the (k−A)-th smallest of the
// N−A late shards. Conditioning makes the hedge count and the latency of
// the same request consistent, where an independent Binomial(N, 1−F(d))
// hedge count would charge hedges to requests that finished before d.
//
// A request factor x scales every attempt of the request, so the request
// is the unscaled one with hedge delay d/x, scaled by x.
func (s *sim) orderStatRequest(e *empirical, fd float64, rng *rand.Rand) (time.Duration, int, bool) {
	x := s.requestFactor(rng)
	d := s.d
	if x != 1 && s.hedging {
		d = math.MaxInt64 // x == 0: every attempt answers at once
		if q := float64(s.d) / x; q < math.MaxInt64 {
			d = time.Duration(q)
		}
		fd = e.cdf(d)
	}
	var tk time.Duration
	hedges := 0
	if !s.hedging {
		tk = e.quantile(orderStat(rng, s.k, s.n))
	} else if a := binomial(rng, s.n, fd); a >= s.k {
		// Clamp: within-bucket interpolation may land a hair past d.
		tk = min(e.quantile(fd*orderStat(rng, s.k, a)), d)
	} else {
		hedges = s.n - a
		tk = e.hedgedQuantile(d, fd+(1-fd)*orderStat(rng, s.k-a, s.n-a))
	}
	lat, partial := s.finish(scale(tk, x))
	return lat, hedges, partial
}
