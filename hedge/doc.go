// Package hedge sends hedged requests: when an attempt has not answered
// acceptably within a delay, a duplicate goes to another replica and the
// first acceptable answer wins. It cuts the tail latency that a few slow
// replicas cause, while bounding the duplicate work so that it can never
// become a hedge storm.
//
// # The engine
//
// A Hedger holds a Policy and the state its operations share:
//
//   - Delay: fixed, or adaptive (the default): a quantile (p95) of the
//     recent latency of accepted attempts, within a floor and a ceiling,
//     with a fixed warm-up delay until enough latencies are known.
//     Cancelled losers count at their elapsed time, so the hedges that win
//     do not hide the tail they cut.
//   - Attempts: at most 2 per operation by default, never more than 5.
//   - Budget: each operation earns a fraction (0.1) of a credit, credits
//     cap at a burst (10), and each hedge spends one; over any interval
//     hedges <= burst + fraction × operations. A Budget can be shared.
//   - Gate: pauses hedges sent because an answer was late while there is
//     evidence of overload rather than variance: hedges that do not win
//     (the alternate is as slow), a median latency risen against its own
//     baseline while hedges are not won at the old speed, or the caller's
//     own evidence (a concurrency limit nearly full, most targets
//     unavailable). How many answers come late is not evidence: the budget
//     prices that. Until hedges have shown they help, they go one
//     operation at a time. A shut gate probes now and then and reopens by
//     itself. Hedges sent at once on a failure are failover: the budget
//     alone bounds them.
//   - Deadline: no hedge is sent with less time left on the context than
//     the median latency of an attempt.
//
// Do runs any call under a Hedger. Each attempt learns its index, its
// target and whether it is a hedge (also from its context: IsHedge); an
// acceptance check decides winners, so a fast error or a refused result
// launches the next attempt at once instead of winning; Release frees what
// losers return. Losers are cancelled as soon as a winner is chosen.
//
// # Receipts
//
// Every operation produces a Receipt: who won and how fast, every attempt
// with its trigger and fate, the hedges not sent and why, and what became of
// the losers after the winner: cancellations requested and observed, work
// that completed anyway (late completions) and attempts still running when
// the observation window (100ms) closed. Receipts are JSON with stable
// camelCase fields (version 1). An Observer sees the same events as they
// happen, for metrics.
//
// # HTTP
//
// Transport is an http.RoundTripper that hedges GET and HEAD (and methods
// the caller declares safe, replaying bodies only through GetBody) over a
// list of replica base URLs, or over one URL behind a load balancer. Hedges
// carry the Tailgate-Hedge header. Bodies are read in full, bounded, inside
// the attempt, so an answer cut short cannot win; by default a status below
// 500 wins. NewClient returns a ready http.Client with the lab's defaults.
//
// # Concurrency
//
// Hedgers, Budgets and Transports are safe for concurrent use. No goroutine
// of this package outlives an operation's observation window; an attempt
// that ignores cancellation keeps its own goroutine until it returns.
package hedge
