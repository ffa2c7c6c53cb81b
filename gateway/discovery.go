package gateway

import (
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// This file: discovery's side of the gateway. The gateway resolves no
// names: whoever does (tailgate serve's DNS discovery) changes the
// backends with SetBackends and reports each name's state through
// SetDiscovery, which /readyz, /debug/replicas and the tailgate_discovery_*
// series show.

// DiscoveryStatus is one discovered name's state.
type DiscoveryStatus struct {
	// Name is the name as configured (dns+http://replicas.ns.svc:8080).
	Name string `json:"name"`
	// Backends is its last good set of replicas.
	Backends []string `json:"backends"`
	// Resolved is when it last resolved to replicas; zero: never.
	Resolved time.Time `json:"resolved,omitzero"`
	// Next is when it is resolved again.
	Next time.Time `json:"next,omitzero"`
	// Stale says that its last resolution failed or came back empty:
	// Backends is kept, and may be out of date. Problem says why, Since
	// since when.
	Stale   bool      `json:"stale"`
	Problem string    `json:"problem,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	// Errors counts its failed and empty resolutions.
	Errors uint64 `json:"errors"`
}

// SetDiscovery makes status the source of the discovered names' state,
// called as /readyz, /debug/replicas and /metrics are served; nil (the
// default) means no name is discovered. status must be safe for
// concurrent use.
func (g *Gateway) SetDiscovery(status func() []DiscoveryStatus) {
	g.discovery.Store(&status)
}

// discovered returns the names' state, or nil.
func (g *Gateway) discovered() []DiscoveryStatus {
	if f := g.discovery.Load(); f != nil && *f != nil {
		return (*f)()
	}
	return nil
}

// writeStale writes a line to w for each stale name of ds: /readyz's
// body says that the replicas it reports ready with are a set kept from
// before, and why. Readiness itself does not change: the kept replicas
// still serve, and a gateway that turned unready on a DNS outage would
// take a whole fleet out at once.
func writeStale(w io.Writer, ds []DiscoveryStatus) {
	for _, d := range ds {
		if d.Stale {
			fmt.Fprintf(w, "discovery stale: %s: %s (since %s; keeping %d replicas)\n",
				d.Name, d.Problem, d.Since.UTC().Format(time.RFC3339), len(d.Backends))
		}
	}
}

var (
	descDiscoveryErrors = prometheus.NewDesc("tailgate_discovery_errors_total",
		"Resolutions of a discovered name that failed or came back empty; its last good set of replicas is kept.", []string{"name"}, nil)
	descDiscoveryReplicas = prometheus.NewDesc("tailgate_discovery_replicas",
		"Replicas a discovered name gives: its last good set.", []string{"name"}, nil)
	descDiscoveryStale = prometheus.NewDesc("tailgate_discovery_stale",
		"1 while a discovered name's last resolution failed or came back empty (its last good set is kept), else 0.", []string{"name"}, nil)
)

// NewDiscoveryCollector returns a collector of the tailgate_discovery_*
// series of the names status reports, as a gateway's registry holds them
// (see SetDiscovery): for a process that reports its names before it has
// a gateway (tailgate serve, waiting for a name's first records).
func NewDiscoveryCollector(status func() []DiscoveryStatus) prometheus.Collector {
	return discoveryCollector{status}
}

// discoveryCollector reports the discovered names' series at scrape time.
type discoveryCollector struct{ status func() []DiscoveryStatus }

func (c discoveryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descDiscoveryErrors
	ch <- descDiscoveryReplicas
	ch <- descDiscoveryStale
}

func (c discoveryCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.status() {
		ch <- prometheus.MustNewConstMetric(descDiscoveryErrors, prometheus.CounterValue, float64(d.Errors), d.Name)
		ch <- prometheus.MustNewConstMetric(descDiscoveryReplicas, prometheus.GaugeValue, float64(len(d.Backends)), d.Name)
		ch <- prometheus.MustNewConstMetric(descDiscoveryStale, prometheus.GaugeValue, b2f(d.Stale), d.Name)
	}
}
