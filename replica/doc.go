// Package replica manages a set of equivalent read replicas for hedged
// requests: which replica gets a request's first attempt, which gets a hedge
// (always a different one where one exists), and a circuit breaker per
// replica that a late hedge loser cannot move. A Snapshot of every replica
// serves an admin endpoint.
//
// # Tickets
//
// Every pick hands out a Ticket and every Ticket goes back through Done with
// the attempt's Outcome, in the manner of the Done callback of a grpc-go
// balancer Picker. The ticket carries what the pick knew: the replica, the
// breaker's generation, whether it is the breaker's probe, and the start
// time, so Done can measure the attempt and judge whether its outcome still
// speaks for the breaker's current state. Success is a usable answer (status
// below 500), Failure a transport error or a 5xx, Canceled an attempt we
// abandoned (it lost a hedge race, or the client left): Canceled is neutral
// for the breaker, and for latency it counts only as a lower bound (the
// attempt took at least that long), so a replica whose attempts hang until a
// hedge wins does not keep looking fast.
//
// # Picking
//
// Replicas are priced by peak-EWMA latency, as Finagle's and Linkerd's
// balancers do: a latency above the average replaces it at once, so a
// replica that turns slow is avoided from its first slow answer, while lower
// latencies pull the average down with weight 1-exp(-Δt/DecayTime). The
// average also decays toward zero while no answer comes (the decay is
// applied when it is read), so a replica priced out by one spike is tried
// again after a while instead of never. The cost of a replica is that
// latency × (attempts in flight there + 1); one with no sample yet costs 0
// and is tried.
//
// PickPrimary chooses by power of two choices: two distinct replicas at
// random among those whose breaker admits a request, the cheaper wins. The
// randomness keeps picks made on stale costs from herding onto one replica;
// comparing two avoids the bad ones. A replica whose breaker waits for a
// probe is taken first, so a recovering replica is probed at once.
// PickAlternate, for hedges and retries, takes the cheapest available
// replica that the request has not used yet: a hedge is sent because
// something is slow, and the replica expected to be fastest is the best bet.
//
// # Breakers and generations
//
// Each replica has a circuit breaker. Closed, it counts consecutive
// failures (a success resets the count) and opens at FailureThreshold. Open,
// it rejects requests for a cooldown; then the first pick that finds the
// cooldown over moves it to half-open and takes its single probe, and other
// picks skip the replica while the probe is out. The probe's success closes
// the breaker and resets the cooldown; its failure reopens it with the
// cooldown doubled, up to MaxCooldown; a cancelled probe frees the slot for
// the next pick.
//
// Every change of state starts a new generation, and a ticket records the
// generation it was taken in, as sony/gobreaker does. Done moves the breaker
// only for a ticket of the current generation. A hedged proxy makes this
// matter: the loser of a race may finish long after its replica's breaker
// opened, or after a probe closed it again, and its outcome describes a
// state that is gone. A stale outcome is still counted, and its latency
// still feeds the EWMA (it is real), but it cannot close an open breaker or
// reopen a closed one.
//
// # Time
//
// No method reads the clock: each takes now, in the manner of the
// ...At(now) methods of golang.org/x/time/rate, so that breaker and EWMA
// logic is tested with synthetic times. Times are measured against the
// first time a Set is given, with time.Time.Sub, so readings of time.Now
// keep their monotonic clock and a step of the wall clock cannot stretch a
// cooldown.
//
// # Concurrency and costs
//
// All methods are safe for concurrent use. Picks take no lock: the
// breaker's generation, probe slot and state share one atomic word, claimed
// with a compare-and-swap, so two picks cannot both take a probe. Done takes
// a mutex per replica to move the EWMA and the breaker together. Each
// replica's fields sit on three cache lines by who writes them, so that the
// breaker words every pick reads stay in every core's cache. Without a Seed
// the randomness comes from the runtime's per-thread generator; a seeded Set
// shares one atomic counter (splitmix64), reproducible in tests.
//
// Picks and Done never allocate (Snapshot does). Measured on a shared
// two-core virtual machine (Go 1.26, medians of 8 runs), time per request:
//
//	PickPrimary + Done, 3 replicas              127ns
//	PickPrimary + Done, 10 replicas             134ns
//	PickPrimary + Done, 3 replicas, two cores   110-220ns
//	PickPrimary + PickAlternate + 2 × Done      171ns
//
// On two cores every request writes lines the other core reads next (the
// in-flight count the next pick prices), so that figure measures coherence
// traffic, and it doubled between runs as other work shared the machine;
// against requests that take milliseconds it is negligible. A seeded Set
// adds about 10% there, for its shared generator.
package replica
