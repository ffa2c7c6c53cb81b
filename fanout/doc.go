// Package fanout holds the arithmetic of fan-out: why a server's tail
// becomes a user's median once a request waits on many servers, and what
// each server's tail must be for the user-facing latency to hold.
//
// With N servers each slow with probability p (p = 0.01 when "slow" means
// beyond its p99), a request that waits for all of them is slow with
// probability 1 − (1 − p)^N: 63% at N = 100. Conversely, for a request to be
// fast with probability t, each server must be slow with at most
// 1 − t^(1/N). Waiting for only k of the N (a good-enough result) tolerates
// N − k slow servers: the request is slow only when more than N − k are.
//
// The numbers follow Dean and Barroso, "The Tail at Scale" (CACM 2013).
package fanout
