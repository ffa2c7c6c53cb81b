// Package sim simulates fan-out requests at fleet scale in virtual time, to
// reproduce the arithmetic of The Tail at Scale (Dean and Barroso, CACM
// 2013) and to price the remedies before building them. A user request
// fans out to N shards (leaves); each shard answers after a latency drawn
// from a Latency func; the request completes under a Policy: when all N
// have answered, when k of N have (good-enough), or at a deadline with what
// has arrived (partial). A shard that has not answered after HedgeAfter gets
// a duplicate to another replica (hedging), optionally limited by a budget
// shared by the whole fleet. There are no sockets and no clocks, so a run
// of a million requests takes a second and is reproducible from its Seed.
//
// Run simulates one policy and reports latency percentiles, the duplicate
// work (hedges per shard request), the share of partial results and the
// share of requests that waited on a slow shard; Table1 reproduces the
// rows of the paper's Table 1 (until one random leaf, 95% of leaves, and
// all leaves finish) for any fan-out and latency model. Package lab builds
// on it; sim depends on the standard library only.
//
// # The exact method
//
// MethodExact draws every shard of every request: N first attempts, and a
// second for every hedged shard, whose answer time is min(L1, d+L2). It is
// exact (the only error is sampling, from the number of requests), costs
// N to 2N draws per request, and is the only method that applies a budget,
// because a budget couples requests: request i may hedge only if the
// requests before it left credit. Requests are taken to arrive one after
// another (each earns N·fraction credit, then spends one credit per hedge),
// which keeps the bound the real budget promises, hedges <= burst +
// fraction × shard requests. At about 20ns a draw, fan-out 2,000 × 10^4
// requests is 2·10^7 draws: well under a second on two cores.
//
// # The order-statistics method
//
// For iid shards and no budget, MethodOrderStats draws each request's
// completion time directly instead of its N shards. A request that needs k
// answers completes at the k-th smallest of N shard times, which is
// G⁻¹(U₍k₎) with U₍k₎, the k-th smallest of N uniforms, Beta(k, N−k+1)
// distributed (drawn from two Gamma variates, or in closed form for the
// minimum and maximum). G is a shard's answer-time distribution: the
// single-attempt distribution F without hedging; with hedging after d,
// G(x) = F(x) below d and 1 − (1 − F(x))(1 − F(x − d)) from d on. The
// hedges a request sends, and whether it finished before any was due,
// come from conditioning on the Binomial(N, F(d)) number of shards that
// answer by d (drawn exactly, in O(log N)), so hedge counts and latencies
// are consistent request by request. A deadline makes the request partial
// when its k-th order statistic exceeds the deadline, and caps its latency
// there. Each request costs O(log N) whatever N is.
//
// F is known only through the Latency func, so each run first estimates it
// from SampleSize draws (default 2^22) into a log-linear histogram whose
// buckets are at most 1/1024 of their values wide and which keeps each
// bucket's smallest and largest draw (a single-valued bucket, such as an
// exact 1ms, stays exact); quantiles interpolate between them. G⁻¹ is found
// by bisection over nanoseconds.
//
// The error this introduces is that of the empirical F, and it concentrates
// in the tail of wide fan-outs. The request percentile p of the k-th order
// statistic is F's quantile at level q = B⁻¹(p) of the Beta(k, N−k+1)
// distribution; for waiting on all N, 1 − q ≈ (1 − p)/N. About
// SampleSize·(1 − q) draws lie beyond that quantile, and its relative error
// in exceedance is about 1/sqrt(SampleSize·(1 − q)): for the max, the same
// as an exact simulation of SampleSize/N requests would have at that
// percentile. On top of that comes at most one bucket's width (0.1%) of
// interpolation. Quantiles beyond the largest of the SampleSize draws
// (1 − q < 1/SampleSize) are clamped to it, so the slowest percentiles of
// very wide fan-outs are underestimated; raise SampleSize (its cost is
// linear) when they matter. The tests check the method against the exact
// one at fan-out 60 with 10^5 requests: p50 to p99 agree within 3%.
//
// MethodAuto uses the exact method whenever the policy has a budget, or
// when Requests × Fanout <= SampleSize, since drawing every shard then
// costs no more than estimating F.
//
// # Skew
//
// Skew is the other simulation: a tier of cache servers (an LRU and a few
// workers each) read through a Placement under Zipf key popularity, for
// the load balance, hit ratio and queueing of key-affinity routing at
// fleet scale (see SkewConfig). Zipf and LRU are its parts; the lab's
// loopback cache fixtures use them too.
//
// # Reproducibility
//
// Every random stream is derived from the Seed and an index (the request's,
// or the sample block's) by a SplitMix64 hash, never from the worker that
// runs it, and per-worker totals are integer sums, so a Result depends on
// the Seed and not on Workers.
package sim
