// Package fanout is the lab experiment "tailgate lab fanout": one request
// to many shards, waiting for all of them and then the remedies (per-shard
// hedging, good enough results, both), on loopback cross-checked against the
// simulator, or simulated at fleet scale against the arithmetic of fan-out
// and the shape of Table 1 of The Tail at Scale.
package fanout
