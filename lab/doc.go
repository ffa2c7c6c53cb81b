// Package lab measures hedging honestly: controlled replicas (fixtures) on
// 127.0.0.1 whose latency follows a seeded model and whose handlers keep
// working after the client cancels, so duplicate work is counted where it
// is paid, at the server; and experiments that compare plain and hedged
// clients against them.
//
// A Fixture answers GET requests with JSON {"value": "..."} after a latency
// drawn from its Model, and counts requests started, completed, completed
// after the client had cancelled (wasted work), cancellations observed and
// the peak in flight; it serves those counters as JSON at /stats.
//
// RunDemo is the first experiment: baseline against hedged reads over two
// straggling replicas, as run by "tailgate demo".
package lab
