// Package gateway is a reverse proxy for reads across equivalent replicas,
// built on the hedging engine: each GET or HEAD goes to a primary chosen by
// latency, and when its answer is late a hedge goes to a different replica;
// the first acceptable answer (status below 500, body complete and within
// the size limit) is returned and the loser is cancelled. It is what
// "tailgate serve" runs. With Config.Tied, every read is a tied request
// instead (package tied).
//
// The contract:
//   - It refuses what it must not forward: methods other than GET and HEAD
//     (405 with Allow) unless a Route declares them reads, GET and HEAD
//     with a body, targets not in origin form (400), and closes the
//     connection after such a refusal, since the request's framing is in
//     doubt. A declared read's body is read whole first, within
//     Config.MaxRequestBodyBytes, and sent again to each attempt; a gRPC
//     route (Route.GRPC) hedges the unary methods it lists, grpc-status
//     deciding the winner, and proxies its other calls once. Paths and queries are forwarded byte
//     for byte; hop-by-hop headers are stripped both ways; the backend is
//     chosen only from configuration. Unless Config.TrustedHop, a client's
//     Tailgate-* and client-address headers (X-Forwarded-*, Forwarded,
//     X-Real-Ip, True-Client-Ip) are removed, and X-Forwarded-For, -Host
//     and -Proto say what the gateway saw.
//   - Server returns the http.Server to serve it with: time limits per
//     connection phase, a header size limit, and OPTIONS * left to the
//     gateway (405). Over TLS it serves HTTP/2 too, with whatever
//     certificate its TLSConfig gives (serve's rotates without a restart).
//     tailgate serve serves plain-HTTP/1.1 clients with the same settings
//     on a faster server of its own (internal/h1server), by default.
//   - Backends may be https:// (Config.BackendTLS: roots, client
//     certificate, server name), over HTTP/2 when ALPN agrees, so that a
//     cancelled loser resets one stream and keeps its connection; Reload
//     swaps the TLS configuration for new connections.
//   - Duplicate work is bounded: the hedge budget, the overload gate, a
//     non-blocking limit on requests in flight (beyond it: 503 with
//     Retry-After) and on backend attempts in flight (a hedge without a
//     free slot is not sent), and a circuit breaker per replica that a late
//     loser's outcome cannot move.
//   - Deadlines propagate as remaining time (package deadline): a request
//     that cannot be served in the time it carries is refused at once with
//     504, and every attempt carries at most the time left as it is sent.
//   - A replica much slower than its peers goes on probation (package
//     replica; on by default) and is measured by shadow requests, marked
//     with ShadowHeader, sent only after a client has its answer.
//   - Reload replaces the configuration while requests are served: each
//     request ends under the configuration it began with; replicas kept
//     keep their state, new ones start cold, removed ones drain. What New
//     built for good (tied mode, the backend protocol and transport) is
//     refused. SetBackends is a Reload of the backends alone, for
//     discovery (tailgate serve resolves DNS names and calls it), which
//     reports each name's state through SetDiscovery.
//   - Admin returns the handler for a separate listener: /healthz, /readyz
//     (503 once StartDrain is called), /metrics (Prometheus) and
//     /debug/replicas. Registry is the metrics registry, the one way to
//     read its counts in-process.
//   - Close cancels the shadows in flight and waits for them.
//
// Flags, limits, the probation and tied-mode rules, and the metrics:
// docs/gateway.md.
package gateway
