// Package load offers requests to a system under test and condenses what
// happened to them. Generate sends in open loop (Poisson arrivals, latency
// from the scheduled time, so a stalled system cannot hide its queue) or
// closed loop; Summarize turns the outcomes into counts, goodput and
// percentiles in which a request without a good answer counts as
// infinitely slow.
package load
