// Package overload is the lab experiment "tailgate lab overload": offered
// load past the replicas' capacity, without hedging, with hedging bounded by
// the budget and gate, and unbounded.
package overload
