// Package sweep is the lab experiment "tailgate lab sweep": the
// latency/work frontier of fixed and adaptive hedge delays, and its knee.
package sweep
