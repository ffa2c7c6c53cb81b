package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailgate-dev/tailgate/internal/jsonerr"
	"github.com/tailgate-dev/tailgate/partition"
)

// This file: affinity mode's admin view (/debug/partitions) and its
// series, read from the partition table at scrape time.

// partitionsView is what /debug/partitions shows: where keys are read
// from, and the partition table's state as of its last round.
type partitionsView struct {
	// Key is where a read's key is: path, query:NAME or header:NAME.
	Key string `json:"key"`
	// RebalanceEveryMs is how often a rebalancing round runs.
	RebalanceEveryMs float64 `json:"rebalanceEveryMs"`
	// Keyless counts reads without a key, routed as without affinity;
	// Fallbacks the attempts sent outside their key's replicas because
	// none of those admitted one; Spills the primaries of cold keys sent
	// past a busy home to another owner (replica.Set.RouteCold).
	Keyless   int64 `json:"keyless"`
	Fallbacks int64 `json:"fallbacks"`
	Spills    int64 `json:"spills"`
	// The table: partitions, owners, each replica's partitions, load and
	// served rate, the assignment, moves (recent, total), hot keys.
	partition.Snapshot
}

// partitionsState returns affinity mode's state over the top-level
// Backends' pool; ok is false when none of its reads is read by key.
func (g *Gateway) partitionsState() (s partitionsView, ok bool) {
	v := g.view.Load()
	var rt *route
	for _, r := range append([]*route{v.def}, v.routes...) {
		if r.pool == v.defaultPool() && r.affinity != nil {
			rt = r
			break
		}
	}
	if rt == nil {
		return s, false
	}
	return partitionsView{
		Key:              rt.affinityKey.String(),
		RebalanceEveryMs: ms(g.affinity.every),
		Keyless:          counterInt(g.affinity.keyless),
		Fallbacks:        counterInt(g.affinity.fallbacks),
		Spills:           counterInt(g.affinity.spills),
		Snapshot:         rt.affinity.Snapshot(),
	}, true
}

// servePartitions serves /debug/partitions.
func (g *Gateway) servePartitions(w http.ResponseWriter, _ *http.Request) {
	s, ok := g.partitionsState()
	if !ok {
		jsonerr.Write(w, http.StatusNotFound, "affinity mode is off (tailgate serve -affinity-key)")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(s)
}

var (
	descPartitionMoves = prometheus.NewDesc("tailgate_partition_moves_total",
		"Partitions moved off a replica whose load exceeded the load bound, to the least loaded replica that could take them (affinity mode; the reasons are in /debug/partitions).", []string{"pool"}, nil)
	descHotKeys = prometheus.NewDesc("tailgate_hot_keys",
		"Keys read from more replicas than their partition's owners because they are hot (affinity mode).", []string{"pool"}, nil)
	descLoadImbalance = prometheus.NewDesc("tailgate_partition_load_imbalance",
		"The busiest replica's read rate over the mean, as the last rebalancing round measured the reads each replica served (affinity mode; 0 before any read).", []string{"pool"}, nil)
)

// partitionCollector reports the partition tables' series at scrape
// time, by pool.
type partitionCollector struct{ g *Gateway }

func (c partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPartitionMoves
	ch <- descHotKeys
	ch <- descLoadImbalance
}

func (c partitionCollector) Collect(ch chan<- prometheus.Metric) {
	for pool, t := range c.g.view.Load().tables() {
		s := t.Snapshot()
		ch <- prometheus.MustNewConstMetric(descPartitionMoves, prometheus.CounterValue, float64(s.MovesTotal), pool)
		ch <- prometheus.MustNewConstMetric(descHotKeys, prometheus.GaugeValue, float64(len(s.HotKeys)), pool)
		ch <- prometheus.MustNewConstMetric(descLoadImbalance, prometheus.GaugeValue, s.ServedMaxOverMean, pool)
	}
}
