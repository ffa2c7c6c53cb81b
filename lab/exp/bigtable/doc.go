// Package bigtable is the lab experiment "tailgate lab bigtable": the shape
// of the Bigtable benchmark of The Tail at Scale, 1,000 keys from 100
// servers hedged after 10ms, on loopback or simulated. It runs its
// operations with package fanout's runner.
package bigtable
