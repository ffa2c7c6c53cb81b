package partition

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Table maps keys to partitions and partitions to the replicas that own
// them, moves partitions off overloaded replicas, and spreads hot keys over
// more replicas. All methods are safe for concurrent use; OwnersAt,
// RecordAt and Partition take no Table-wide lock and do not allocate.
type Table struct {
	cfg   Config
	parts int // P, fixed

	cur      atomic.Pointer[state]
	hotUntil atomic.Int64 // Unix ns until which cur's hot routes apply

	counts []atomic.Int64 // per partition: reads RecordAt counted since the last round
	sketch *sketch        // nil when hot keys are off
	recent *recent        // the keys read lately, and where their spilled reads went

	mu sync.Mutex // serialises rounds, membership changes and Snapshot
	// Guarded by mu:
	members  []string
	hashes   []uint64 // hashString of each member's name
	r        int      // owners per partition now: min(cfg.Owners, len(members))
	base     []int32  // P × r: the owners rendezvous hashing gives, best first
	eff      []int32  // P × r: the owners in force (base with moves applied)
	partLoad []float64
	shared   []bool // per partition: too hot for one home, its primaries spread over its owners
	served   map[string]*servedLoad
	hot      []hotKey
	loads    []float64 // per member: the model load of the last round
	moves    []Move    // the most recent, oldest first, at most maxRecentMoves
	total    struct{ moves, rounds uint64 }
	first    time.Time // the first round
	last     time.Time // the last round
	lastMove time.Time // the last round that moved something
}

// maxRecentMoves bounds the moves a Snapshot lists.
const maxRecentMoves = 32

// state is what the request path reads: immutable once published.
type state struct {
	owners [][]string             // per partition, the owners in force
	shared []bool                 // per partition: no home (see Owners.Shared)
	served map[string]*servedLoad // per replica name
	hot    []hotRoute
}

// hotRoute is a hot key's wider set of replicas.
type hotRoute struct {
	hash     uint64
	key      string
	replicas []string
}

// servedLoad counts the reads a replica served.
type servedLoad struct {
	n    atomic.Int64 // since the last round
	load float64      // decayed, guarded by Table.mu
}

// Owners is where a key's reads go.
type Owners struct {
	// Partition is the key's partition, in [0, P).
	Partition int
	// Replicas are the partition's owners (R of them, fewer if there are
	// fewer replicas), its home first, or a hot key's K replicas, owners
	// first. The slice is shared: do not modify it.
	Replicas []string
	// Hot is true when the key is hot and Replicas is its wider set, over
	// which its reads spread. Shared is true when the key's partition is
	// too hot for any one replica (its reads alone, hot keys apart, above
	// LoadBound × the mean per replica) and its reads spread over its
	// owners. Otherwise Replicas[0] is the key's home: its primaries go
	// there while it admits them; the other owners take its hedges, and
	// its primaries only when the home admits none.
	Hot    bool
	Shared bool
	// Cold is true when the key has a home and no read of it came through
	// this Table for 15 to 30 s: its home's cache is not likely to hold it
	// either, so sending its primary to another owner while the home is
	// busy costs no hit (replica.Set.RouteCold; SpilledAt then says where
	// it went). Spilled, for a key that is not cold, is the index in
	// Replicas of the owner a recent read of it spilled to (0: none): that
	// owner's cache holds the key now, so its reads go there first while
	// it stays warm, rather than missing at home.
	Cold    bool
	Spilled int
}

// New returns a Table over the named replicas (stable names: the gateway
// uses backend URLs), with PartitionsPerReplica × len(replicas) partitions.
// It fails with an error wrapping ErrInvalid for an invalid cfg or an
// empty, repeated or over-long list of names.
func New(replicas []string, cfg Config) (*Table, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkNames(replicas); err != nil {
		return nil, err
	}
	p := cfg.PartitionsPerReplica * len(replicas)
	if p > MaxPartitions {
		return nil, errf("%d partitions (PartitionsPerReplica %d × %d replicas) above the limit %d",
			p, cfg.PartitionsPerReplica, len(replicas), MaxPartitions)
	}
	t := &Table{
		cfg:      cfg,
		parts:    p,
		counts:   make([]atomic.Int64, p),
		recent:   newRecent(),
		partLoad: make([]float64, p),
		shared:   make([]bool, p),
		served:   map[string]*servedLoad{},
	}
	if cfg.HotKeys > 0 {
		t.sketch = newSketch(cfg.SketchSize, float64(cfg.Window))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setMembers(replicas)
	t.publish()
	return t, nil
}

// Partitions returns P, the number of partitions.
func (t *Table) Partitions() int { return t.parts }

// Partition returns key's partition: a fixed hash of the key, the same in
// every process, reduced to [0, P).
func (t *Table) Partition(key string) int { return partitionOf(hashString(key), t.parts) }

// OwnersAt returns where key's reads go at now: its partition's owners, or
// the wider set of a hot key. A hot key's set lapses one Window after the
// last round that confirmed it, so that replication stops if rounds stop.
// OwnersAt notes the read for Owners.Cold. It reads an immutable snapshot
// without a lock and does not allocate.
func (t *Table) OwnersAt(key string, now time.Time) Owners {
	h := hashString(key)
	p := partitionOf(h, t.parts)
	st := t.cur.Load()
	if len(st.hot) > 0 && now.UnixNano() < t.hotUntil.Load() {
		for i := range st.hot {
			if r := &st.hot[i]; r.hash == h && r.key == key {
				return Owners{Partition: p, Replicas: r.replicas, Hot: true}
			}
		}
	}
	o := Owners{Partition: p, Replicas: st.owners[p], Shared: st.shared[p]}
	if !o.Shared {
		o.Cold, o.Spilled = t.recent.read(h, now)
		if o.Spilled >= len(o.Replicas) {
			o.Spilled = 0 // the partition has fewer owners since
		}
	}
	return o
}

// SpilledAt notes that a read of key, cold when it arrived (Owners.Cold),
// went at now to Replicas[k] of its Owners rather than to its home, so
// that its next reads follow it there (Owners.Spilled).
func (t *Table) SpilledAt(key string, k int, now time.Time) {
	t.recent.spill(hashString(key), k, now)
}

// RecordAt counts one read of key served by replica at now. It feeds the
// key's partition's load, the replica's served load and the hot-key
// sketch, for the next round to read. A replica name the Table does not
// know still counts for the partition and the sketch. RecordAt does not
// allocate; it takes only a lock of the sketch shard that holds key.
func (t *Table) RecordAt(key, replica string, now time.Time) {
	h := hashString(key)
	t.counts[partitionOf(h, t.parts)].Add(1)
	if s := t.cur.Load().served[replica]; s != nil {
		s.n.Add(1)
	}
	if t.sketch != nil {
		t.sketch.record(h, key, now.UnixNano())
	}
}

// SetReplicas changes the membership to names. The partition count stays
// P; rendezvous hashing moves to a new replica about R/(N+1) of the owner
// slots' partitions (and about 1/(N+1) of the primaries), and a removed
// replica's slots go to the replica next in each partition's order.
// Moves made by rebalancing survive unless they name a removed replica or
// hashing now puts the partition elsewhere. Hot keys keep their state;
// their replica sets are recomputed. It fails, changing nothing, with an
// error wrapping ErrInvalid for an empty, repeated or over-long list.
func (t *Table) SetReplicas(names []string) error {
	if err := checkNames(names); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setMembers(names)
	t.hot = t.routeHot(t.hot)
	t.publish()
	return nil
}

// setMembers installs names as the members, recomputes the hashed owners
// and carries over the moves still valid. Called with mu held.
func (t *Table) setMembers(names []string) {
	oldNames, oldBase, oldEff, oldR := t.members, t.base, t.eff, t.r
	t.members = slices.Clone(names)
	t.hashes = make([]uint64, len(names))
	index := make(map[string]int32, len(names))
	for i, n := range names {
		t.hashes[i] = hashString(n)
		index[n] = int32(i)
	}
	t.r = min(t.cfg.Owners, len(names))
	t.base = make([]int32, t.parts*t.r)
	for p := 0; p < t.parts; p++ {
		rankTop(t.base[p*t.r:(p+1)*t.r], t.hashes, partitionSeed(p), nil)
	}
	t.eff = slices.Clone(t.base)
	if oldR == t.r {
	next:
		for p := 0; p < t.parts; p++ {
			ob, oe := oldBase[p*oldR:(p+1)*oldR], oldEff[p*oldR:(p+1)*oldR]
			if slices.Equal(ob, oe) {
				continue // not moved
			}
			nb := t.base[p*t.r : (p+1)*t.r]
			moved := make([]int32, t.r)
			for k := range ob {
				nbk, ok := index[oldNames[ob[k]]]
				if !ok || nbk != nb[k] {
					continue next // hashing now puts p elsewhere
				}
				if moved[k], ok = index[oldNames[oe[k]]]; !ok {
					continue next // the move names a removed replica
				}
			}
			copy(t.eff[p*t.r:], moved)
		}
	}
	served := make(map[string]*servedLoad, len(names))
	for _, n := range names {
		s := t.served[n]
		if s == nil {
			s = &servedLoad{}
		}
		served[n] = s
	}
	t.served = served
	t.loads = make([]float64, len(names))
}

// owners returns partition p's owners in force, as member indices.
// Called with mu held.
func (t *Table) owners(p int) []int32 { return t.eff[p*t.r : (p+1)*t.r] }

// publish makes the request path see the current assignment, served
// counters and hot routes. Called with mu held.
func (t *Table) publish() {
	st := &state{owners: make([][]string, t.parts), shared: slices.Clone(t.shared), served: t.served}
	names := make([]string, len(t.eff))
	for i, m := range t.eff {
		names[i] = t.members[m]
	}
	for p := range st.owners {
		st.owners[p] = names[p*t.r : (p+1)*t.r : (p+1)*t.r]
	}
	for _, h := range t.hot {
		rs := make([]string, len(h.replicas))
		for i, m := range h.replicas {
			rs[i] = t.members[m]
		}
		st.hot = append(st.hot, hotRoute{hash: h.hash, key: h.key, replicas: rs})
	}
	t.cur.Store(st)
}
