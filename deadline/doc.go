// Package deadline propagates deadlines across HTTP hops, as "The Tail at
// Scale" asks: a server that knows its caller has given up can stop, and one
// that knows the caller cannot wait long enough need not start.
//
// A request carries its remaining time, never a wall-clock instant, in the
// Tailgate-Timeout header (Header), in the format of gRPC's grpc-timeout: 1
// to 8 ASCII digits and a unit, H M S m u n ("250m" is 250 ms). Transport,
// a client http.RoundTripper, writes it from the request context's
// deadline; Handler, server middleware, turns it back into a context
// deadline and refuses work that cannot finish in time. Format and Parse
// are the codec; FromHeader reads the header; Remaining reads a context.
//
// The contract:
//   - Format truncates and never rounds up, so a receiver never gets more
//     time than the sender had. Parse accepts the whole grammar and nothing
//     else: every other value is an error wrapping ErrMalformed.
//   - Handler answers 400 when the header is malformed, empty or repeated,
//     and 504 when the time left, capped at Options.Max, is <= 0 or below
//     Options.MinRemaining; both with a JSON body, and next never sees the
//     request. A request without the header passes through untouched.
//   - Transport does not send a request whose deadline has passed, and
//     removes the header from a request without a deadline, so a value
//     copied from an incoming request is never forwarded as if still true.
//   - Transit time is not counted: the receiver's deadline is later than the
//     sender's by the time on the wire. Options.MinRemaining absorbs it.
//   - Transport and the handler Handler returns are safe for concurrent use
//     and start no goroutines.
//
// Why remaining time, the wire format in full and the statuses:
// docs/library.md.
package deadline
