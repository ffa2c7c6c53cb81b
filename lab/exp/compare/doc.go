// Package compare is the lab experiment "tailgate lab compare": the lab's
// bounded client reading from a slow primary alone, then hedging to a fast
// secondary, against fixtures or two real endpoints.
package compare
