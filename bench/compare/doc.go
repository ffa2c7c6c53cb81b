// Package compare benchmarks Tailgate's hedging transport side by side with
// a bare transport and with github.com/cristalhq/hedgedhttp, on the same
// in-memory and loopback backends, so the overhead of each is a ratio
// measured in one run. It is a separate module so that the comparison's
// dependency never reaches Tailgate's own go.mod.
//
//	cd bench/compare && go test -run '^$' -bench . -benchmem -count 10
package compare
