// Package probation is the lab experiment "tailgate lab probation": one
// replica degrades mid-run and recovers, read through the gateway with and
// without latency-induced probation, as a timeline per second.
package probation
