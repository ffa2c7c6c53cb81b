// Package replica manages a set of equivalent read replicas for hedged
// requests: which replica gets a request's first attempt, which gets a hedge
// (always a different one where one exists), a circuit breaker per replica
// that a late hedge loser cannot move, and, when enabled, probation for a
// replica whose latency stays well above its peers', measured meanwhile by
// shadow requests. A Snapshot of every replica serves an admin endpoint.
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
// PickAlternate, for hedges, and PickRetry, for attempts after a failure,
// take the cheapest available replica that the request has not used yet: a
// hedge is sent because something is slow, and the replica expected to be
// fastest is the best bet.
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
// # Probation
//
// Peak-EWMA steers primaries away from a replica from its first slow
// answer, but not for good: its price decays, it is tried again, and every
// such try costs a client a slow answer or a hedge; under load, when the
// in-flight counts of its peers price them up, it takes its share. With
// Config.Probation enabled, a replica whose latency stays well above its
// peers' is taken out of the rotation instead, as Envoy's outlier detection
// ejects a host (Envoy judges failures only; this judges latency).
//
// Each replica keeps its last MaxProbationSamples latency samples: the
// answers of Success attempts, and the lower bounds of Canceled ones that
// also fed its EWMA (an attempt cut short after 80ms took at least 80ms;
// one cut short sooner than the estimate says nothing). Failures are left
// to the breaker: a fast 500 must not make a replica look fast. At most
// every Window/10, Done judges the set. A replica's statistic is its median
// over the last Window, counted once it rests on MinSamples samples: one
// slow answer in a window, or a tenth of them, does not move a median. Its
// peers' is the median of the other serving replicas' medians. A replica
// whose median exceeds Factor (default 3) × its peers' is diverging; once
// that has held for Window (default 5s) it goes on probation. It then gets
// no primaries and no hedges (a hedge is a bet on a fast replica), unless
// no other replica admits a request at all: PickPrimary and PickRetry fall
// back to it, as a slow answer beats none. Instead PickShadow hands out, at
// most ShadowRate (default 1) a second, a shadow ticket: the caller sends a
// duplicate of a request already answered, discards the answer and gives
// the ticket back with Done. From the shadows taken since it went on
// probation it is judged again, and once its median has stayed below
// ExitFactor (default 2) × its peers' for Window, it serves again. The gap
// between the two factors keeps a replica near the line from flapping.
//
// At most Probation.MaxOnProbation(n) of n replicas are on probation at
// once: floor(MaxShare × n) with MaxShare 10% by default, as Envoy's
// max_ejection_percent, but at least 1, as Envoy ejects one host whatever
// the percentage (with 2 to 19 replicas 10% floors to 0, and a slow replica
// of 3 is exactly what users expect to see taken out), and at most n - 1,
// so one replica always serves. Replicas that diverged past Window beyond
// the cap wait, worst ratio first, and their state says so.
//
// Probation is latency only and composes with the breaker: a replica may
// be on probation and open at once; a shadow's failure counts against its
// breaker, and once the cooldown is over the next shadow is its probe
// (primaries leave the probe of a replica on probation alone). Snapshot
// reports each replica's status (serving, diverging, probation,
// recovering), since when, and the reason in words with the figures it was
// judged on. Under light load peak-EWMA alone starves a slow replica of
// attempts, so it may never gather MinSamples in a window: probation then
// does not trigger, and has nothing to add.
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
// breaker words every pick reads stay in every core's cache. Picks read one
// more shared word, the number of replicas on probation, and while it is
// zero nothing else of probation. The probation judge has a mutex of its
// own, taken with TryLock from Done: a Done that finds a judgement running
// leaves it be. Without a Seed the randomness comes from the runtime's
// per-thread generator; a seeded Set shares one atomic counter
// (splitmix64), reproducible in tests.
//
// Picks, PickShadow and Done never allocate (Snapshot does). Measured on a
// shared two-core virtual machine (Go 1.26, medians of 8 runs), time per
// request:
//
//	PickPrimary + Done, 3 replicas              127ns
//	PickPrimary + Done, 10 replicas             134ns
//	PickPrimary + Done, 3 replicas, two cores   110-220ns
//	PickPrimary + PickAlternate + 2 × Done      171ns
//	PickPrimary + Done + PickShadow, probation
//	  on, no replica on probation               140ns
//	  on, one replica of 3 on probation         157ns
//
// With probation on, Done also judges every Window/10 (500ms by default):
// a judgement over full sample rings takes about 1µs for 3 replicas, 3µs
// for 10 and 31µs for 100, paid by the one Done that runs it.
//
// On two cores every request writes lines the other core reads next (the
// in-flight count the next pick prices), so that figure measures coherence
// traffic, and it doubled between runs as other work shared the machine;
// against requests that take milliseconds it is negligible. A seeded Set
// adds about 10% there, for its shared generator.
package replica
