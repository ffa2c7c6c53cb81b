// Package tied implements tied requests (Dean & Barroso, "The Tail at
// Scale"): a client sends a request to two servers, each copy tagged with
// the identity of the other; when a server starts executing its copy, it
// tells the other server to drop its copy if that is still queued. The
// client gets the latency of the shorter queue while the work, most of the
// time, runs once. If both copies start before either cancel arrives (the
// race window), both run; that is counted.
//
// # Server
//
// Server is middleware (Server.Handler) that puts every request in a
// bounded queue served by a bounded pool of workers. Requests marked with
// hedge.HedgeHeader wait behind unmarked ones (ServerConfig.NoHedgePriority
// turns that off). A full queue answers 503 with Retry-After: 1.
//
// A tied copy carries two headers:
//
//	Tailgate-Tie: <id>                  TieHeader: 1-64 of A-Z a-z 0-9 - . _ ~
//	Tailgate-Tie-Peer: <base URL>       PeerHeader: the twin's server
//
// When a worker takes a tied copy, the Server sends, from a goroutine of
// its own, a cancel message to the peer:
//
//	POST <peer>/.well-known/tailgate/tie-cancel?tie=<id>   (CancelPath)
//
// bounded by CancelTimeout (250ms) and MaxCancelsInFlight (128); a peer
// that is slow or unreachable costs the running copy nothing, and the
// failure is counted. The peer's cancel endpoint answers 204 with
// CancelOutcomeHeader saying what it did:
//
//   - dropped: the copy was queued there; it leaves the queue unrun and its
//     client gets 503 with "Tailgate-Tie-Dropped: queued" (DroppedHeader).
//   - started: the copy had already started (or finished): both executed.
//   - remembered: no copy of the tie there yet (the cancel overtook it):
//     the tie is remembered for RememberFor (10s, at most RememberTies),
//     and a copy arriving meanwhile gets 503 with
//     "Tailgate-Tie-Dropped: arrival".
//
// A dropped copy's answer is not a result: the copy that caused the drop is
// running and answers. Dropped tells such answers apart.
//
// # Trust
//
// The peer a copy names comes from a client, so a Server sends cancels only
// to the peers in its allow-list (ServerConfig.Peers, base URLs in
// canonical form); a copy naming any other address is served untied and
// counted, so a client cannot make a server send requests where it likes.
// Cancel messages come from servers and are not authenticated unless the
// peers share a CancelToken (sent in TokenHeader): without one, the cancel
// endpoint must be reachable only from the internal network, since whoever
// reaches it and knows a tie can drop that tie's queued copy. Tie
// identities are validated (length, characters) before use, and everything
// a Server remembers is bounded.
//
// # Client
//
// Transport is an http.RoundTripper that sends tied requests to pairs of
// targets taken in turn from a list: the first copy at once, the second
// after Delay (1ms, about twice a network delay in a data centre) unless the
// first has answered by then. The first acceptable answer wins (a status
// below 500 that was not dropped), the other copy is cancelled and its body
// closed. It runs on the hedge engine, so it gives receipts, bounds bodies
// and sends only GET, HEAD and declared-safe methods twice.
//
// # Costs
//
// Every tied copy that starts sends one cancel message; a pair whose
// second copy was never sent (the first answered within Delay) still costs
// that message and a remembered tie at the peer. Executed duplicate work is
// limited to the race window and shows in Stats.BothExecuted.
//
// # Concurrency
//
// Servers and Transports are safe for concurrent use. A Server's only
// goroutines are its cancel messages, each bounded by CancelTimeout; Close
// or Shutdown ends them.
package tied
