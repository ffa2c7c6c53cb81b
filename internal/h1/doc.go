// Package h1 is an HTTP/1.1 client for plain-HTTP backends, built for a
// proxy's hot path: each request is written, and its response read, in
// the caller's goroutine, on a pooled connection with buffers of its own.
// No goroutine runs per connection (net/http's Transport runs two, and
// hands each request between them through channels).
//
// Contract (Transport):
//   - It sends http:// requests to an ASCII host without a body, upgrade
//     or CONNECT itself; every other request goes to Config.Fallback as
//     it is.
//   - Requests are written as net/http's Transport writes them (request
//     target, Host, default User-Agent, headers sorted, control bytes
//     refused before anything is sent), with no compression negotiated.
//   - Responses are read with net/http's ReadResponse: its framing
//     (Content-Length, chunked, to close), its errors (the common kind,
//     a GET's answer with a Content-Length whose header block came whole,
//     by readFast, which reads it as ReadResponse does). 1xx answers before
//     the final one are skipped; a 101 is returned with the rest of the
//     stream as its body, and its connection is never reused. Header
//     blocks, 1xx included, are bounded by MaxResponseHeaderBytes.
//   - Cancelling a request's context closes its connection at once, which
//     ends a dial, a write, a header read or a body read in progress; the
//     error wraps the context's. A connection closed by a cancellation
//     (not a deadline) is replaced by a dial in the background (one at a time per address, up to
//     MaxIdlePerHost idle), so that a hedge's cancelled loser does not
//     make the next attempt to that backend wait on a dial.
//   - A connection goes back to the pool only when its response body was
//     read to its end and closed, the response allowed keep-alive, and
//     nothing more was received; a body closed early closes it.
//   - A pooled connection carries a new request only if nothing arrived
//     on it since its last answer was framed (see stray.go): bytes
//     buffered past an answer close it as it is released, and one read
//     that does not wait (a recv with MSG_PEEK|MSG_DONTWAIT on the
//     socket) looks again as it is taken; a 204 that announces a body is
//     not reused, a 1xx that announces one fails the request. Each
//     connection closed for bytes nobody asked for is told to
//     Config.OnUnsolicited; none of those bytes is ever returned. A
//     backend seen to send them after an answer gets a new connection
//     per request for a minute. A new connection waits up to 50 ms for
//     bytes before its first request when it is the first to its address
//     or its backend has sent bytes as a connection opened (within a
//     minute): any closes it and fails the request with ErrUnsolicited.
//   - A pooled connection the server has closed (seen as it is taken) is
//     dropped for the next. An idempotent request that fails on one taken
//     from the pool (a reused one, or a replacement that waited there)
//     before any byte of an answer (the server closed it just then) is
//     sent again, once, on a new connection.
//   - Idle connections are kept LIFO, at most MaxIdlePerHost per address,
//     closed after IdleTimeout or by CloseIdleConnections.
//
// Why it exists, and what it saves, measured: docs/performance.md.
package h1
