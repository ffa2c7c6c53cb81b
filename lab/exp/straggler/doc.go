// Package straggler is the lab experiment "tailgate lab straggler": two
// replicas on which a few requests straggle as primaries, read directly and
// then through the real gateway, which hedges them.
package straggler
