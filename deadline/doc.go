// Package deadline propagates deadlines across HTTP hops, as "The Tail at
// Scale" asks: a server that knows its caller has given up can stop, and one
// that knows the caller cannot wait long enough need not start.
//
// A request carries its remaining time in the Tailgate-Timeout header
// (Header), modelled on gRPC's grpc-timeout. Transport, a client
// http.RoundTripper, writes it from the request context's deadline; Handler,
// server middleware, turns it back into a context deadline and refuses work
// that cannot finish in time. Format and Parse are the codec; FromHeader
// reads the header; Remaining reads a context.
//
// # Why remaining time, not a timestamp
//
// The header says how long is left ("250m"), never when the deadline falls.
// An absolute time would be read against the receiver's clock, and clocks
// on different machines disagree by milliseconds to seconds: a receiver
// whose clock runs ahead would see every deadline already passed, one that
// runs behind would work for callers long gone. A duration is measured on
// the sender's clock when the request is sent and re-anchored on the
// receiver's clock when it arrives, so only the two clocks' rates matter.
// The price is that transit time is not counted: the receiver's deadline is
// later than the sender's by the time the request spent on the wire (and
// in queues before the handler ran). Options.MinRemaining absorbs that,
// along with the time an answer needs to travel back.
//
// # Wire format
//
// A value is 1 to 8 ASCII digits followed by one unit letter (the letters
// are case-sensitive), with no sign, spaces or other characters; leading
// zeros are allowed:
//
//	unit  meaning       8 digits reach
//	H     hours         99999999 h (longer than time.Duration: read as its maximum, ~292 years)
//	M     minutes       ~190 years
//	S     seconds       ~3.2 years
//	m     milliseconds  ~27.8 hours
//	u     microseconds  ~100 seconds
//	n     nanoseconds   ~100 milliseconds
//
// Examples: "250m" is 250 ms, "2S" is 2 s, "1500000u" is 1.5 s as Format
// writes it, "0n" is no time at all. Because a value has at most 8 digits,
// "99999999n" (just under 100 ms) is the longest value in nanoseconds, and
// longer durations move to coarser units. Format uses the finest unit whose
// value fits in 8 digits, so what it drops is less than one unit of the
// encoding it picks: nothing below 100 ms, under 1 µs below 100 s, under
// 1 ms below ~27.8 h.
//
// Format truncates and never rounds up, so a receiver never gets more time
// than the sender had. A duration of zero or less is written "0n" (a
// Transport does not send such a request at all). Parse accepts the whole
// grammar, not only the spellings Format picks ("0002S" and "90S" are
// fine), and nothing outside it: every other value is an error wrapping
// ErrMalformed that quotes it.
//
// # Statuses
//
// Handler answers these itself; next never sees the request:
//
//	400 Bad Request      the header is malformed, empty, or present more than once
//	504 Gateway Timeout  the time left, capped at Options.Max, is <= 0 or below Options.MinRemaining
//
// Both come with a JSON body {"error": "..."}: for a 504 it says how much
// time was left and how much is needed, for example
// {"error":"deadline: 3ms left, need at least 5ms"}. A 504 and not a 503,
// because the caller's deadline, not this server's capacity, is what ran
// out: retrying elsewhere with the same deadline cannot help.
//
// A request without the header passes through untouched, without a
// deadline from this package.
//
// # Across hops
//
// A service that both serves and calls others wraps its handler in Handler
// and its client in Transport, and makes its outgoing requests with the
// incoming request's context; the deadline then flows from hop to hop,
// shrinking by each hop's own time. A
// request without a deadline has any Tailgate-Timeout header it carries
// removed by Transport, so that a value copied from an incoming request by
// a proxy is never forwarded as if it were still true.
//
// # Concurrency
//
// Transport and the handler Handler returns are safe for concurrent use
// and start no goroutines.
package deadline
