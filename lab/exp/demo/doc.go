// Package demo is "tailgate demo": short runs of the straggler, sweep and
// overload experiments, for a first look.
package demo
