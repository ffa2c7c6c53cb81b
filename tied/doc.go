// Package tied implements tied requests (Dean & Barroso, "The Tail at
// Scale"): a client sends a request to two servers, each copy tagged with
// the identity of the other; when a server starts executing its copy, it
// tells the other server to drop its copy if that is still queued. The
// client gets the latency of the shorter queue while the work, most of the
// time, runs once. If both copies start before either cancel arrives (the
// race window), both run; that is counted.
//
// Server is middleware (Server.Handler) that puts every request in a
// bounded queue served by a bounded pool of workers; Transport is an
// http.RoundTripper that sends the two copies to pairs of targets, on the
// hedge engine.
//
// The contract:
//   - A tied copy carries Tailgate-Tie (1-64 of A-Z a-z 0-9 - . _ ~) and
//     Tailgate-Tie-Peer (its twin's server). Cancels are POST <peer>CancelPath,
//     answered 204 with Tailgate-Tie-Cancel: dropped, started or remembered.
//   - A dropped copy is answered 503 with Tailgate-Tie-Dropped (queued or
//     arrival); it is not a result, and Dropped tells such answers apart.
//     The Transport never takes one as a winner.
//   - A Server sends cancels only to the peers in ServerConfig.Peers; a copy
//     naming any other peer is served untied and counted. The cancel
//     endpoint is authenticated only when peers share a CancelToken;
//     without one it must be reachable only from the internal network.
//   - Requests marked with hedge.HedgeHeader wait behind unmarked ones
//     (unless ServerConfig.NoHedgePriority). A full queue answers 503 with
//     Retry-After: 1.
//   - Everything a Server remembers is bounded. Servers and Transports are
//     safe for concurrent use; a Server's only goroutines are its cancel
//     messages, each bounded by CancelTimeout, ended by Close or Shutdown.
//
// The protocol in detail: docs/library.md; the gateway's tied mode:
// docs/gateway.md; measurements: docs/performance.md.
package tied
