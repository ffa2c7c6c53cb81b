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

// PartitionsState is what /debug/partitions shows: where keys are read
// from, and the partition table's state as of its last round.
type PartitionsState struct {
	// Key is where a read's key is: path, query:NAME or header:NAME.
	Key string `json:"key"`
	// RebalanceEveryMs is how often a rebalancing round runs.
	RebalanceEveryMs float64 `json:"rebalanceEveryMs"`
	// Keyless counts reads without a key, routed as without affinity;
	// Fallbacks the attempts sent outside their key's replicas because
	// none of those admitted one.
	Keyless   int64 `json:"keyless"`
	Fallbacks int64 `json:"fallbacks"`
	// The table: partitions, owners, each replica's partitions, load and
	// served rate, the assignment, moves (recent, total), hot keys.
	partition.Snapshot
}

// PartitionsState returns affinity mode's state; ok is false when the gateway
// is not in affinity mode.
func (g *Gateway) PartitionsState() (s PartitionsState, ok bool) {
	if g.aff == nil {
		return s, false
	}
	v := g.view.Load()
	return PartitionsState{
		Key:              v.affinityKey.String(),
		RebalanceEveryMs: ms(g.aff.every),
		Keyless:          counterInt(g.aff.keyless),
		Fallbacks:        counterInt(g.aff.fallbacks),
		Snapshot:         g.aff.table.Snapshot(),
	}, true
}

// servePartitions serves /debug/partitions.
func (g *Gateway) servePartitions(w http.ResponseWriter, _ *http.Request) {
	s, ok := g.PartitionsState()
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
		"Partitions moved off a replica whose load exceeded the load bound, to the least loaded replica that could take them (affinity mode; the reasons are in /debug/partitions).", nil, nil)
	descHotKeys = prometheus.NewDesc("tailgate_hot_keys",
		"Keys read from more replicas than their partition's owners because they are hot (affinity mode).", nil, nil)
	descLoadImbalance = prometheus.NewDesc("tailgate_partition_load_imbalance",
		"The busiest replica's read rate over the mean, as the last rebalancing round measured the reads each replica served (affinity mode; 0 before any read).", nil, nil)
)

// partitionCollector reports the partition table's series at scrape time.
type partitionCollector struct{ t *partition.Table }

func (c partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPartitionMoves
	ch <- descHotKeys
	ch <- descLoadImbalance
}

func (c partitionCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.t.Snapshot()
	ch <- prometheus.MustNewConstMetric(descPartitionMoves, prometheus.CounterValue, float64(s.MovesTotal))
	ch <- prometheus.MustNewConstMetric(descHotKeys, prometheus.GaugeValue, float64(len(s.HotKeys)))
	ch <- prometheus.MustNewConstMetric(descLoadImbalance, prometheus.GaugeValue, s.ServedMaxOverMean)
}
