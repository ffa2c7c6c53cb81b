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
// keep a late loser's outcome from moving it.
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
// Admin returns the admin handler for a separate listener: /healthz,
// /readyz, /metrics (Prometheus) and /debug/replicas.
package gateway
