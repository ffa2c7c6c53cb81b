// Package fanout sends one request to many shards and gathers the answers,
// attacking the effect The Tail at Scale (Dean and Barroso, CACM 2013) is
// about: a request that waits on N servers is as slow as the slowest, so a
// server's tail becomes the user's median.
//
// # Scatter-gather
//
// Do sends a request to every shard, each through the hedging engine (a
// slow shard gets a hedge to another replica), and gathers the answers
// under a completion policy: every shard; at least k of N or a fraction of
// them (a good-enough result); or whatever has arrived by a deadline. The
// Result always says whether it is partial and which shards are missing: a
// silent partial result would be a correctness bug. A deadline is carried
// on the shards' context, so no hedge is sent that could not finish before
// it. Canary requests go to one or two shards first; the rest get the
// request only after every canary has answered in time. All the shards of
// a Fanout share one Hedger and so one budget: a fan-out to 100 shards may
// send at most one burst of hedges plus its earned fraction, never 100
// bursts.
//
// # The arithmetic
//
// With N servers each slow with probability p (p = 0.01 when "slow" means
// beyond its p99), a request that waits for all of them is slow with
// probability 1 − (1 − p)^N: 63% at N = 100. Conversely, for a request to be
// fast with probability t, each server must be slow with at most
// 1 − t^(1/N). Waiting for only k of the N tolerates N − k slow servers: the
// request is slow only when more than N − k are. SlowShare,
// MaxServerSlowProbability and SlowShareGoodEnough compute these.
//
// Usage and measurements: docs/library.md, docs/performance.md.
package fanout
