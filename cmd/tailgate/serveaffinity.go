package main

import (
	"flag"
	"fmt"
	"math"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/partition"
)

// This file: serve's affinity mode (-affinity-key and the partition
// knobs). The key may change on a reload (SIGHUP); turning the mode on or
// off, and the partition knobs, need a restart, since the partition table
// is built once, its partition count fixed, when the gateway starts.

// affinityFlags are serve's affinity-mode flags.
type affinityFlags struct {
	affinityKey   string
	partitionsPer int
	owners        int
	loadBound     float64
	movesPerRound int
	hotKeys       int
	hotReplicas   int
}

// affinityKnobs are the flags that apply only with -affinity-key.
var affinityKnobs = []string{"partitions-per-replica", "partition-owners", "load-bound", "partition-moves", "hot-keys", "hot-replicas"}

func (f *affinityFlags) registerAffinity(fs *flag.FlagSet) {
	fs.StringVar(&f.affinityKey, "affinity-key", "", `affinity mode: where a read's key is, "path", "query:NAME" or "header:NAME"; each key maps to one of -partitions-per-replica × backends partitions, owned by -partition-owners replicas: its primaries go to the first, its home, whenever it admits one, its hedges to another (elsewhere only when none admits one), homes move off overloaded replicas, hot keys are read from -hot-replicas replicas; reads without the key are routed as without affinity; "" (the default) turns it off. The key may change on reload; turning the mode on or off needs a restart`)
	fs.IntVar(&f.partitionsPer, "partitions-per-replica", partition.DefaultPartitionsPerReplica, "affinity: partitions per backend given at start (the count is then fixed: a backend added later takes about 1/N of them); at least 1")
	fs.IntVar(&f.owners, "partition-owners", partition.DefaultOwners, fmt.Sprintf("affinity: replicas that own each partition: the first, its home, takes its keys' primaries, the others their hedges; within [1, %d]", partition.MaxOwners))
	fs.Float64Var(&f.loadBound, "load-bound", partition.DefaultLoadBound, "affinity: a replica whose read rate exceeds this many times the mean hands the homes of its partitions to the least loaded (the bound HAProxy's hash-balance-factor 125 keeps, judged over seconds rather than per read); above 1")
	fs.IntVar(&f.movesPerRound, "partition-moves", partition.DefaultMovesPerRound, "affinity: most partitions moved per rebalancing round (rounds every second, moves at least 5s apart); 0 turns rebalancing off")
	fs.IntVar(&f.hotKeys, "hot-keys", partition.DefaultHotKeys, fmt.Sprintf("affinity: most keys read from -hot-replicas replicas at once, because each alone exceeds a quarter of a replica's mean read rate; 0 turns hot-key replication off; at most %d", partition.MaxHotKeys))
	fs.IntVar(&f.hotReplicas, "hot-replicas", partition.DefaultHotReplicas, fmt.Sprintf("affinity: replicas a hot key's reads spread over, its partition's owners first; within [1, %d]", partition.MaxHotReplicas))
}

// affinity returns the gateway's affinity configuration, nil when
// -affinity-key is not given; given reports the flags set.
func (f *affinityFlags) affinity(given map[string]bool) (*gateway.Affinity, error) {
	if f.affinityKey == "" {
		for _, k := range affinityKnobs {
			if given[k] {
				return nil, fmt.Errorf("-%s applies only with -affinity-key", k)
			}
		}
		return nil, nil
	}
	switch {
	case f.partitionsPer < 1 || f.partitionsPer > partition.MaxPartitions:
		return nil, fmt.Errorf("-partitions-per-replica %d must be within [1, %d] (and times the backends, at most %[2]d)", f.partitionsPer, partition.MaxPartitions)
	case f.owners < 1 || f.owners > partition.MaxOwners:
		return nil, fmt.Errorf("-partition-owners %d must be within [1, %d]", f.owners, partition.MaxOwners)
	case !(f.loadBound > 1) || math.IsInf(f.loadBound, 0):
		return nil, fmt.Errorf("-load-bound %v must be a number above 1", f.loadBound)
	case f.movesPerRound < 0:
		return nil, fmt.Errorf("-partition-moves %d must not be negative (0 turns rebalancing off)", f.movesPerRound)
	case f.hotKeys < 0 || f.hotKeys > partition.MaxHotKeys:
		return nil, fmt.Errorf("-hot-keys %d must be within [0, %d] (0 turns hot-key replication off)", f.hotKeys, partition.MaxHotKeys)
	case f.hotReplicas < 1 || f.hotReplicas > partition.MaxHotReplicas:
		return nil, fmt.Errorf("-hot-replicas %d must be within [1, %d]", f.hotReplicas, partition.MaxHotReplicas)
	}
	p := partition.Config{
		PartitionsPerReplica: f.partitionsPer,
		Owners:               f.owners,
		LoadBound:            f.loadBound,
		MovesPerRound:        f.movesPerRound,
		HotKeys:              f.hotKeys,
		HotReplicas:          f.hotReplicas,
	}
	if f.movesPerRound == 0 {
		p.MovesPerRound = -1 // off (zero would mean the default)
	}
	if f.hotKeys == 0 {
		p.HotKeys = -1
	}
	if f.hotKeys > partition.DefaultSketchSize {
		p.SketchSize = f.hotKeys // the sketch holds at least the hot keys
	}
	if err := gateway.CheckAffinityKey(f.affinityKey); err != nil {
		return nil, fmt.Errorf("-affinity-key %q: want path, query:NAME or header:NAME (NAME a query parameter or a header name)", f.affinityKey)
	}
	return &gateway.Affinity{Key: f.affinityKey, Partitions: p}, nil
}
