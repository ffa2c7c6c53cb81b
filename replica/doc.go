// Package replica manages a set of equivalent read replicas for hedged
// requests: which replica gets a request's first attempt, which gets a hedge
// (always a different one where one exists), a circuit breaker per replica
// that a late hedge loser cannot move, and, when enabled, probation for a
// replica whose latency stays well above its peers', measured meanwhile by
// shadow requests. A Snapshot of every replica serves an admin endpoint.
//
// The contract:
//   - Every pick hands out a Ticket, and every Ticket must go back through
//     Done exactly once with the attempt's Outcome: Success (a usable
//     answer, status below 500), Failure (a transport error or a 5xx) or
//     Canceled (an attempt abandoned: neutral for the breaker, a lower
//     bound for latency).
//   - PickPrimary chooses among replicas whose breaker admits a request, by
//     power of two choices over peak-EWMA latency × (attempts in flight +
//     1); PickAlternate and PickRetry take the cheapest replica the request
//     has not used yet. Their ...Among forms choose within a subset (a
//     key's owners) and never fall back to a replica on probation: the
//     caller falls back to the whole set.
//   - Route steers one request's attempts through those picks: plain, a
//     key's owners first (Set.Route with among), or a key's owners with a
//     home (Set.RouteHome: the primary goes to the first owner whenever it
//     admits one, so that the key is warm in one cache; see route.go).
//   - A breaker opens after FailureThreshold consecutive failures, rejects
//     for a cooldown (doubling up to MaxCooldown while probes fail), then
//     admits exactly one probe. Every change of state starts a generation,
//     and only a ticket of the current generation moves the breaker.
//   - A replica on probation gets no primaries and no hedges unless no
//     other replica admits a request; a Shadow pick hands out its shadow
//     tickets. At most Probation.MaxOnProbation(n) of n replicas are on
//     probation at once, never all.
//   - Membership changes one way: Next makes a Set's next generation, in
//     which the replicas kept are the same (breaker, latency, probation
//     carried over) and new ones start cold. A caller holds one generation
//     for a whole request and gives its tickets back to it; a replica left
//     out drains as the attempts that hold its tickets end.
//   - No method reads the clock: each takes now, so that breaker, EWMA and
//     probation logic is tested with synthetic times. Nor does the package
//     log: Config.OnChange is told of each move of a breaker or of
//     probation (an Event), outside the Set's locks, for the caller to log.
//   - All methods are safe for concurrent use. Picks take no lock; picks
//     and Done never allocate (Snapshot does).
//
// The reasons for peak-EWMA, power of two choices and generations are in
// docs/library.md; the probation rules in docs/gateway.md; the costs in
// docs/performance.md.
package replica
