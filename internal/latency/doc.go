// Package latency provides streaming latency histograms with a lock-free
// record path, for hedging decisions on the request hot path (for example
// "hedge after the recent p95") and for lab reports (quantiles and CDF
// plots).
//
// A Histogram counts durations in fixed log-linear buckets (every power of
// two split into 32 sub-buckets). Reading goes through a Snapshot, a plain
// copy that answers Count, Sum, Min, Max, Mean and Quantile and merges with
// other snapshots. A Window is a ring of histograms that answers "what has
// latency been recently"; its Cumulative view keeps everything.
//
// The contract:
//   - Record and RecordAt never allocate and take no lock.
//   - Min, Max, Count, Sum and Mean are exact. Quantile is nearest-rank and
//     reports the midpoint of the bucket holding the ranked sample: within
//     RelativeError (1/64) of the exact answer for samples up to MaxBounded
//     (about 18 minutes), exact below 64ns. Longer durations share one
//     overflow bucket; Max stays exact.
//   - A Window snapshot covers between span-span/slots and span of the
//     recent past. Times from time.Now are placed by their monotonic
//     reading, so stepping the wall clock does not disturb a window; the
//     ...At variants take the time explicitly, for synthetic clocks.
//   - All Histogram and Window methods are safe for concurrent use.
//     Snapshots taken while others record are not a single instant: each
//     counter is read atomically, but the copy as a whole may be slightly
//     torn (a sample in Sum but not yet in Count). Reset concurrent with
//     Record may keep part of a sample.
//
// Why the histograms are sharded, and what they cost: docs/library.md and
// docs/performance.md.
package latency
