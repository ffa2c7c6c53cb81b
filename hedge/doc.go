// Package hedge sends hedged requests: when an attempt has not answered
// acceptably within a delay, a duplicate goes to another replica and the
// first acceptable answer wins. It cuts the tail latency that a few slow
// replicas cause, while bounding the duplicate work so that it can never
// become a hedge storm.
//
// A Hedger holds a Policy and the state its operations share: the delay
// (fixed, or adaptive from recent latencies), the attempt limit (2 by
// default, never more than 5), the Budget (over any interval, hedges <=
// burst + fraction × operations) and the Gate (hedges for late answers
// pause on evidence of overload; hedges on failure are bounded by the
// budget alone). Do runs any call under a Hedger; Transport is an
// http.RoundTripper that hedges GET and HEAD over a list of replica base
// URLs; NewClient returns a ready http.Client.
//
// The contract:
//   - Every hedge goes to a target the operation has not used yet, where
//     one is left, and is marked (HedgeHeader, IsHedge).
//   - The winner is the first acceptable result; an error or a refused
//     result is never a winner. Over HTTP a response is acceptable when its
//     body was read in full within the size limit and its status is below
//     500, unless TransportConfig.Accept says otherwise.
//   - No hedge is sent when the context's remaining time is below an
//     attempt's median latency, when the budget has no credit, or past the
//     attempt limit; each suppressed hedge is counted in the Receipt by
//     reason.
//   - Losers are cancelled as soon as a winner is chosen. Every operation
//     produces a Receipt (JSON, version 1) in which cancellationsRequested =
//     cancellationsObserved + lateCompletions + unobserved.
//   - Hedger.Update and Budget.SetRates change a policy while operations
//     run: each operation keeps the policy it began with.
//   - Hedgers, Budgets and Transports are safe for concurrent use. No
//     goroutine of this package outlives an operation's observation window
//     (a Transport's shadow request, its own 1s); an attempt that ignores
//     cancellation keeps its own goroutine until it returns.
//
// Semantics, defaults and the reasons behind them: docs/library.md.
// Measurements: docs/performance.md.
package hedge
