package discovery

import "github.com/prometheus/client_golang/prometheus"

var (
	descErrors = prometheus.NewDesc("tailgate_discovery_errors_total",
		"Resolutions of a discovered name that failed or came back empty; its last good set of replicas is kept.", []string{"name"}, nil)
	descReplicas = prometheus.NewDesc("tailgate_discovery_replicas",
		"Replicas a discovered name gives: its last good set.", []string{"name"}, nil)
	descStale = prometheus.NewDesc("tailgate_discovery_stale",
		"1 while a discovered name's last resolution failed or came back empty (its last good set is kept), else 0.", []string{"name"}, nil)
)

// NewCollector returns a collector of the tailgate_discovery_* series of
// the names state reports (a Watcher's State), read at scrape time: the
// gateway's registry holds one, and so does tailgate serve's while it
// waits for a name's first records, before it has a gateway.
func NewCollector(state func() []State) prometheus.Collector { return collector{state} }

type collector struct{ state func() []State }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descErrors
	ch <- descReplicas
	ch <- descStale
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.state() {
		stale := 0.0
		if s.Stale {
			stale = 1
		}
		ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(s.Errors), s.Name)
		ch <- prometheus.MustNewConstMetric(descReplicas, prometheus.GaugeValue, float64(len(s.Backends)), s.Name)
		ch <- prometheus.MustNewConstMetric(descStale, prometheus.GaugeValue, stale, s.Name)
	}
}
