// Package classes is the lab's classes experiment: two kinds of read with
// stragglers of their own on one API, through the gateway with one class,
// with a class per kind (its default), and with a route per kind and a
// fixed delay, beside a per-endpoint p90 hedger the experiment contains
// as the reference, and one replica read directly.
//
// Two replicas serve GET /item?id=N (1ms; each replica has its own 5% of
// ids that take 40ms there and 1ms on the other) and GET /search?id=N
// (20ms; each replica its own 4% of ids at 200ms); 80% of the reads are
// items, 20% searches, open loop. One latency window for both kinds puts
// the delay where neither wants it: past every item's straggler and
// below every search, whose hedges then never win. A class per kind
// hedges each after its own percentile (The Tail at Scale: "the 95th
// percentile expected latency for this class of requests").
package classes
