// Package gateway is a reverse proxy for reads across equivalent replicas,
// built on the hedging engine: each GET or HEAD goes to a primary chosen by
// latency, and when its answer is late a hedge goes to a different replica;
// the first acceptable answer (status below 500, body complete and within
// the size limit) is returned and the loser is cancelled.
//
// Duplicate work cannot run away: the hedge budget, the overload gate, a
// non-blocking limit on requests in flight (beyond it: 503 with
// Retry-After) and on backend attempts in flight (a hedge without a free
// slot is not sent), and a circuit breaker per replica whose generations
// keep a late loser's outcome from moving it. The gateway tells the gate
// what the engine cannot see (hedge.Gate.Load): how full its limits are
// and how many replicas refuse attempts; it logs the gate's changes once
// each and shows its evidence in /debug/replicas and the metrics.
//
// The proxy refuses what it must not forward: methods other than GET and
// HEAD (405 with Allow), requests with a body, absolute-form targets (400).
// Paths and queries are forwarded byte for byte; hop-by-hop headers,
// including those named in Connection, are stripped both ways; the
// X-Forwarded-For, -Host and -Proto headers are set. The backend is chosen
// only from configuration.
//
// Deadlines propagate as remaining time (package deadline): a request
// carrying a Tailgate-Timeout header is served within the shorter of that
// (counted from its arrival) and the gateway's Timeout; one whose time is
// already up, or cannot cover the replicas' median latency once that is
// known (unless the Policy sets IgnoreDeadline), is refused at once with
// 504, one whose header is malformed with 400. Every attempt sent to a
// replica carries at most the time left as it is sent (the primary's value
// is written up to a millisecond short), so replicas can stop work nobody
// will read, and the engine sends no hedge that the time left could not
// cover.
//
// A replica whose median latency stays several times its peers' for
// seconds goes on probation (package replica decides; on by default, see
// Config.DisableProbation): it gets no primaries and no hedges, and only
// after a client has its answer does the gateway send, when one is due
// (about once a second), a shadow: a copy of the read just answered,
// marked with ShadowHeader, to the replica on probation, in the
// background, bounded in number (MaxInFlightShadows) and time
// (ShadowTimeout), its answer read and discarded and its latency given to
// the replica set, which brings the replica back once it has recovered.
// An attempt after a failure may still go to a replica on probation when
// no other is left. Close cancels the shadows in flight and waits for them.
//
// With Config.Tied, every read is a tied request instead (package tied;
// The Tail at Scale): the first copy to the primary, the second TiedDelay
// later (1ms by default; both at once if negative), unless the first has
// answered acceptably, to the replica a hedge would get; both carry one
// tie identity (Tailgate-Tie) and the base URL of the other copy's backend
// (Tailgate-Tie-Peer), and the second is marked as a hedge. The backends
// are expected to run tied.Server middleware with each other in its
// Peers: the one that starts a copy first has the other dropped from its
// queue, so the work runs about once, and duplicates wait behind first
// copies. The first acceptable answer wins and the other copy is
// cancelled; an answer dropped for its twin (503 with
// Tailgate-Tie-Dropped) never wins, and is neutral for the breaker and
// for latency (peak-EWMA and probation), as a cancelled attempt that took
// no time: it says how soon the twin started elsewhere, not how its own
// replica is. Tied copies run on the hedging path, so replica choice,
// breakers, probation, receipts and metrics are the same: a second copy
// counts as a hedge attempt (tailgate_attempts_total{role="hedge"},
// tailgate_hedge_wins_total), and a copy that fails or is dropped once
// both are out counts as a hedge suppressed for maxAttempts (nothing is
// left to send). The duplicate work stays bounded: the budget (by default
// one credit per read, so every read may be tied, never more than two
// copies), the attempt limit (a second copy needs a free slot; the default
// limit doubles), and deadlines (no second copy that the time left cannot
// cover) apply to second copies; the overload gate does not, since every
// read wants its second copy. A read that cannot have a second copy (no
// other replica available, no budget credit, too little time) goes alone
// and untied, and one whose first copy fails before the second is due gets
// the second at once, untied. Client requests never carry their own tie
// headers through the gateway. tailgate_tied_copies_total,
// tailgate_tied_dropped_total and tailgate_tied_requests_total count tied
// mode, and /debug/replicas shows it.
//
// Admin returns the admin handler for a separate listener: /healthz,
// /readyz, /metrics (Prometheus) and /debug/replicas.
package gateway
