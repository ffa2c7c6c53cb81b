// Package skew is the lab experiment "tailgate lab skew": a tier of cache
// replicas (fixtures with an LRU of keys, a fast hit and a slow miss, and
// a worker pool) read under Zipf key popularity through four placement
// policies, with and without hedging, on the same arrivals: no affinity
// (the replica set's power of two choices over every replica, today's
// gateway), one partition per replica (hash mod N), micro-partitions
// (package partition, rebalancing on) and micro-partitions with selective
// replication of hot keys. Each policy's reads are hedged by the hedge
// engine (its default policy) to another of the key's replicas. The report
// gives, per policy, latency percentiles, the cache hit ratio, how evenly
// the replicas were loaded, the partitions moved and the hot keys; a sweep
// over the Zipf exponent gives p99 against skew; Simulate runs the same
// placements at fleet scale in the simulator (package lab/sim).
package skew
