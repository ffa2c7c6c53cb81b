// Package hedgegrpc hedges gRPC unary calls on Tailgate's engine (package
// hedge), with its budget, overload gate, deadline awareness and receipts,
// and serves hedged and tied calls with hedge priority.
//
// Client.UnaryClientInterceptor hedges the calls of the methods a Config
// names through one ClientConn, whose balancer picks a server for each
// attempt; Replicas, a grpc.ClientConnInterface, hedges over an explicit
// list of replicas with package replica's picker, breakers and probation,
// and can send tied calls instead. Server.UnaryServerInterceptor queues
// calls so that hedges wait behind first copies, and cancels the queued
// twins of tied copies on other servers.
//
// The contract:
//   - Only the methods named (Config.Methods, Config.Hedgeable) are
//     hedged: idempotent reads. Streams, other methods, and calls whose
//     messages are not protobuf messages pass through unhedged.
//   - Every attempt decodes into a reply message of its own and gets its
//     own header, trailer and peer; only the winner's are copied into the
//     caller's (proto.Reset, proto.Merge), by the caller's goroutine, after
//     the engine has returned. Every hedge sends a copy of the request made
//     before it starts, so a loser still sending touches nothing the caller
//     owns. Losers are cancelled.
//   - A status in Config.NonFatalCodes (default Unavailable) sends the next
//     attempt at once, budget permitting; any other status ends the call
//     and is returned as it is. With no winner, the last attempt's status
//     is returned; when the caller's context ends, Canceled or
//     DeadlineExceeded.
//   - A hedge carries the metadata tailgate-hedge (its index) and
//     grpc-previous-rpc-attempts (the attempts before it), as gRPC's
//     hedging design (A6) says. Deadlines are
//     gRPC's own; no hedge is sent that the remaining time cannot cover.
//   - Each hedged call has a hedge.Receipt (Config.OnReceipt, OnReceipt).
//   - Clients, Replicas and Servers are safe for concurrent use; Replicas
//     and Server own goroutines (shadows, cancels) that Close ends.
//
// It is a module of its own, so that a user of package hedge alone never
// downloads gRPC. Design and measurements: docs/library.md.
package hedgegrpc
