// Package compare benchmarks Tailgate side by side with a bare transport,
// github.com/cristalhq/hedgedhttp and failsafe-go, on the same in-memory
// and loopback backends, so the cost and the effect of each is a ratio
// measured in one run: the library's overhead (InMemory, Loopback), the
// straggler workload (Straggler), and the gateway on the reference
// experiment's shape beside httputil.ReverseProxy over hedgedhttp
// (GatewayShape). It is a separate module so that the peers never reach
// Tailgate's own go.mod.
//
//	cd bench/compare && go test -run '^$' -bench . -benchmem -count 10
package compare
