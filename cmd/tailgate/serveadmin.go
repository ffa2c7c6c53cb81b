package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tailgate-dev/tailgate/gateway"
)

// processRegistry returns a registry with the series that describe the
// process rather than the gateway: the Go runtime's (go_*), the process's
// (process_*: RSS, CPU, open file descriptors) and extra, such as the
// client connection limit's.
//
// They live here, not in the gateway's registry, because the gateway is
// also a library: gateway.Registry is documented as something to register
// with a registry of one's own, and most programs' registries already hold
// the Go and process collectors, so a gateway carrying them too would make
// that registration fail with duplicate series. The binary owns the
// process, so the binary reports it.
func processRegistry(extra ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	reg.MustRegister(extra...)
	return reg
}

// adminHandler is the gateway's admin handler with /metrics serving the
// gateway's series and proc's together, in one exposition, and /-/reload
// reloading the configuration through r (see reloadHandler; nil: off).
func adminHandler(g *gateway.Gateway, proc prometheus.Gatherer, r *reloader) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", g.Admin())
	mux.Handle("/-/reload", reloadHandler(r))
	// A name in both registries fails the scrape with an error (promhttp's
	// default), so a clash cannot pass unnoticed.
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{g.Registry(), proc}, promhttp.HandlerOpts{}))
	return mux
}
