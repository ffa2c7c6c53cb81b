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
//     for it, unless the rebalancer moved it. SetReplicas changes the
//     membership: a new replica takes about 1/(N+1) of the owner slots
//     (and of the primaries), each from a different partition, and no
//     partition moves between the replicas that stay.
//   - RebalanceAt is one round: loads are decayed read counts (time
//     constant Window); a replica above LoadBound × the mean model load
//     sheds its partitions, at most MovesPerRound per round, rounds that
//     move at least Cooldown apart, and none in the first Window. Every
//     move is returned and listed in the Snapshot with its reason.
//   - A key whose estimated rate, less the sketch's possible overestimate,
//     exceeds HotShare × the mean rate per replica is hot; at most HotKeys
//     are; a hot key cools when its rate falls below half the threshold. A
//     hot key's reads go to K replicas, its partition's owners first.
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
