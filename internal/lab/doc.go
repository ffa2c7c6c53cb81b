// Package lab measures hedging honestly: controlled replicas (fixtures) on
// 127.0.0.1 whose latency follows a seeded model and whose handlers keep
// working after the client cancels, so duplicate work is counted where it
// is paid, at the server; a load generator; and experiments that compare
// plain and hedged reads against them, reported as JSON and HTML.
//
// # Fixtures
//
// A Fixture answers GET with JSON {"value": "<name>:<id>"} after a latency
// drawn from its Model (ParseModel reads the compact text form, such as
// "lognormal:p50=8ms,p99=90ms"). Each request draws from a random source
// seeded by the fixture's seed, the request's id and its attempt (primary or
// which hedge), so a request's latency does not depend on what arrived
// before it: with the same seed, a request sent to the same fixture gets
// the same draw under any concurrency, and plain and hedged reads of the
// same ids are compared on the same draws. With a Capacity it serves that
// many requests at once and queues the rest in FIFO order, so overload produces
// real queueing; hedges may be served after primaries. It counts requests
// started, completed, completed after their client had gone (wasted work),
// cancellations observed, queueing and rejections, and serves the counters
// at /stats.
//
// # Experiments
//
// Generate offers load in open loop (Poisson arrivals, latency from the
// scheduled time, so a stalled system cannot hide its queue) or closed
// loop. RunCompare, RunStraggler, RunSweep, RunOverload, RunFanout,
// RunBigtable, RunTied and RunProbation are the experiments of "tailgate lab"
// (SimulateFanout and SimulateBigtable their fleet-scale counterparts, on
// package lab/sim); RunDemo runs short versions of straggler, sweep and
// overload for "tailgate demo". Each report carries its seed, configuration and
// environment, reconciles the client's attempts with the fixtures' counters,
// and renders itself for WriteHTML.
package lab
