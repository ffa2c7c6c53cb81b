// Package partition routes keys to the few replicas that hold them warm
// while keeping load even under skew: keys hash to a fixed number of
// micro-partitions (about 20 per replica), each partition is owned by R
// replicas chosen by rendezvous hashing, a rebalancer moves single
// partitions off overloaded replicas, and keys hot enough to overload
// their owners alone are served by K replicas (selective replication).
//
// The contract:
//   - Partition(key) is a fixed hash of the key reduced to [0, P); P is
//     PartitionsPerReplica × the replicas New was given, for the Table's
//     life. The hashes are the same in every process, so gateways in front
//     of the same replicas agree on the hashed assignment.
//   - A partition's owners are the R replicas of highest rendezvous weight
//     for it, best first, unless the rebalancer moved it. The first is its
//     home: its keys' primaries go there, so that each key is warm in one
//     cache, and the others take its hedges and its reads when the home
//     admits none. A partition whose own reads (hot keys apart) exceed
//     LoadBound × the mean per replica has no home within the bound
//     anywhere: it is shared, its reads spread over its owners, until they
//     fall below the mean. SetReplicas changes the
//     membership: a new replica takes about 1/(N+1) of the owner slots
//     (and of the primaries), each from a different partition, and no
//     partition moves between the replicas that stay.
//   - RebalanceAt is one round: loads are decayed read counts (time
//     constant Window), a partition's on its home; a replica above
//     LoadBound × the mean model load hands the homes of its partitions to
//     others, down to halfway between the mean and the bound where it can
//     (hysteresis), at most MovesPerRound per round, rounds that move at least
//     Cooldown apart, and none in the first Window. Every move is returned
//     and listed in the Snapshot with its reason. The load bound is judged
//     here, on where homes are, and not per read: a read that overflowed
//     its home whenever the home looked busy would warm a second cache
//     with the key, which is the hit ratio the home exists to keep.
//   - A key whose estimated rate, less the sketch's possible overestimate,
//     exceeds HotShare × the mean rate per replica is hot; at most HotKeys
//     are; a hot key cools when its rate falls below half the threshold. A
//     hot key's reads go to K replicas, its partition's owners first, and
//     have no home: they spread over all K.
//   - Gateways in front of the same replicas agree on the homes without
//     talking: the hashed assignment is a function of the names, and the
//     moves and hot keys each derives from the reads it sees, which are
//     shares of one stream (docs/gateway.md, Affinity mode, measures 1
//     gateway against 3).
//   - OwnersAt and RecordAt are for the request path: no allocation, no
//     Table-wide lock (OwnersAt reads an immutable snapshot that rounds and
//     SetReplicas replace; RecordAt adds to atomic counters and to one of
//     the sketch's shards under that shard's mutex).
//   - No method reads the clock; each takes now. All are safe for
//     concurrent use.
//
// Why rendezvous hashing, the rebalancer's rule and the sketch are in
// docs/library.md (Partitions); what they cost in docs/performance.md.
package partition
