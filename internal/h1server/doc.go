// Package h1server serves HTTP/1.1 (and 1.0) connections to an
// http.Handler, for plain-HTTP listeners on a proxy's hot path: the
// handler runs in the connection's own goroutine, a response's header and
// a small body leave in one write, buffers and the ResponseWriter are
// reused from request to request, and no read is made in the background
// of a request that ends quickly. TLS and HTTP/2 are not its business
// (serve them with net/http).
//
// Contract (Server), as net/http's http.Server with the same settings:
//   - Requests are parsed by http.ReadRequest (the common kind, whole in
//     the buffer, by readFast, which reads it as ReadRequest does and
//     leaves ReadRequest the rest), with net/http's server's
//     own checks after it (header names and values valid, HTTP/1.x only,
//     one valid Host field on HTTP/1.1, not empty, and required with a
//     target in absolute form too, whose host wins; with CONNECT, valid
//     if present); what ReadRequest drops from a request (the Host field
//     of such a target, an HTTP/1.0 request's Transfer-Encoding) is
//     looked for in the bytes buffered before it parses them. A header block over MaxHeaderBytes
//     (plus 4 KiB, as net/http) is answered 431, a transfer coding other
//     than chunked, or two Transfer-Encoding lines, 501, any other
//     malformed request 400, each with the connection closed; an Expect
//     other than one 100-continue 417.
//   - Never laxer than net/http's server (FuzzServers says so), and
//     stricter where RFC 9112 asks: an empty Host is refused (net/http
//     serves it); an HTTP/1.0 request with a Transfer-Encoding is refused
//     400 and its connection closed (http.ReadRequest drops the field and
//     reads no body, so net/http serves its chunked body as the next
//     request), and one whose header block did not fit the 4 KiB buffer
//     to be looked at has its connection closed after the answer; an
//     Expect with other tokens, or empty, is 417 (net/http finds the
//     token anywhere, ignores an empty one); Connection tokens are read
//     as net/http reads them (ASCII case and space only). A stray CRLF
//     before a request is answered 400 at once, where net/http waits for
//     four bytes before it reads a request and then answers 400 too (but
//     after a POST, whose CRLF it skips).
//   - Time limits: ReadHeaderTimeout from a request's first byte to its
//     header's end, ReadTimeout to the end of its body, WriteTimeout for
//     its answer from its header's end (the handler may move it with
//     http.NewResponseController(w).SetWriteDeadline), IdleTimeout
//     between requests.
//   - Keep-alive as net/http keeps it (Connection: close either way,
//     HTTP/1.0 keep-alive, a body the handler left unread discarded up to
//     256 KiB, else the connection closed); pipelined requests are
//     answered in order.
//   - Responses: Content-Length of a body written whole and small
//     (bufferBeforeChunking), else chunked (HTTP/1.1) or to close;
//     Content-Type sniffed when absent, Date added; HEAD, 1xx, 204 and
//     304 carry no body. Flush (http.Flusher) sends what is written.
//     No Hijack, no trailers.
//   - r.Context() ends when ServeHTTP returns, or when the client is seen
//     to go away: a request without a body that is still running after
//     Server.WatchAfter gets a background read of its connection, whose
//     EOF or error cancels it. Requests with a body are not watched.
//   - A panic in the handler closes the connection after what was
//     committed of the answer; unless it is http.ErrAbortHandler, it is
//     logged to ErrorLog with its stack.
//   - ConnState reports new, active, idle and closed as net/http does;
//     Shutdown closes idle connections and waits for the others to finish
//     their request; Close closes them all and cancels their requests.
//
// Why, and what it saves, measured: docs/performance.md (data path).
package h1server
