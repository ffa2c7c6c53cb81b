package partition

import (
	"slices"
	"time"
)

// Snapshot is a Table's state as of its last round, for an admin endpoint:
// it marshals to JSON as it is. Rates are decayed read counts divided by
// the Window: a steady rate reads as itself once a Window has passed.
type Snapshot struct {
	Partitions int `json:"partitions"`
	Owners     int `json:"owners"` // R in force: Config.Owners, or fewer replicas
	// Replicas are the members, in the order last given.
	Replicas []ReplicaLoad `json:"replicas"`
	// Assignment lists each partition's owners in force, best first: the
	// first is its home, where its keys' primaries go.
	Assignment [][]string `json:"assignment"`
	// Moved counts the partitions whose owners differ from what rendezvous
	// hashing gives: the rebalancer's standing overrides.
	Moved int `json:"moved"`
	// Shared lists the partitions too hot for one home, whose reads
	// spread over their owners (see Owners.Shared).
	Shared []int `json:"shared"`
	// LoadMaxOverMean is the busiest replica's model load over the mean:
	// what the rebalancer keeps at or below LoadBound. ServedMaxOverMean is
	// the same for the reads replicas actually served (hedges, fallbacks
	// and all).
	LoadMaxOverMean   float64   `json:"loadMaxOverMean"`
	ServedMaxOverMean float64   `json:"servedMaxOverMean"`
	HotKeys           []HotKey  `json:"hotKeys"`
	RecentMoves       []Move    `json:"recentMoves"` // at most 32, oldest first
	MovesTotal        uint64    `json:"movesTotal"`
	Rounds            uint64    `json:"rounds"`
	LastRound         time.Time `json:"lastRound"`
}

// ReplicaLoad is one replica's share.
type ReplicaLoad struct {
	Name       string  `json:"name"`
	Partitions int     `json:"partitions"` // partitions it owns
	Primaries  int     `json:"primaries"`  // partitions it is the home of (owns first)
	Load       float64 `json:"load"`       // reads/s the assignment gives it (the model: its homes' reads, its share of hot keys')
	Served     float64 `json:"served"`     // reads/s RecordAt counted for it
}

// HotKey is a key served by more replicas than its partition's owners.
type HotKey struct {
	Key       string   `json:"key"`
	Partition int      `json:"partition"`
	Replicas  []string `json:"replicas"`
	Rate      float64  `json:"rate"` // reads/s, as the sketch estimates it (at most its overestimate high)
}

// Snapshot returns the Table's state as of its last round (loads are those
// the last RebalanceAt computed). It allocates; it takes the Table's lock.
func (t *Table) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.cfg.Window.Seconds()
	s := Snapshot{
		Partitions:  t.parts,
		Owners:      t.r,
		Replicas:    make([]ReplicaLoad, len(t.members)),
		Assignment:  make([][]string, t.parts),
		HotKeys:     []HotKey{},
		Shared:      []int{},
		RecentMoves: slices.Clone(t.moves),
		MovesTotal:  t.total.moves,
		Rounds:      t.total.rounds,
		LastRound:   t.last,
	}
	if s.RecentMoves == nil {
		s.RecentMoves = []Move{}
	}
	for m, name := range t.members {
		s.Replicas[m] = ReplicaLoad{Name: name, Load: t.loads[m] / w, Served: t.served[name].load / w}
	}
	for p := range s.Assignment {
		own := t.owners(p)
		s.Assignment[p] = make([]string, len(own))
		for k, m := range own {
			s.Assignment[p][k] = t.members[m]
			s.Replicas[m].Partitions++
		}
		s.Replicas[own[0]].Primaries++
		if t.shared[p] {
			s.Shared = append(s.Shared, p)
		}
		if !slices.Equal(own, t.base[p*t.r:(p+1)*t.r]) {
			s.Moved++
		}
	}
	loads := make([]float64, len(s.Replicas))
	served := make([]float64, len(s.Replicas))
	for m, r := range s.Replicas {
		loads[m], served[m] = r.Load, r.Served
	}
	s.LoadMaxOverMean, s.ServedMaxOverMean = maxOverMean(loads), maxOverMean(served)
	for _, h := range t.hot {
		hk := HotKey{Key: h.key, Partition: h.partition, Rate: h.count / w}
		for _, m := range h.replicas {
			hk.Replicas = append(hk.Replicas, t.members[m])
		}
		s.HotKeys = append(s.HotKeys, hk)
	}
	return s
}

// maxOverMean returns the largest of xs over their mean, or 0 when the
// mean is 0.
func maxOverMean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum, top := 0.0, xs[0]
	for _, x := range xs {
		sum += x
		top = max(top, x)
	}
	if sum <= 0 {
		return 0
	}
	return top / (sum / float64(len(xs)))
}
