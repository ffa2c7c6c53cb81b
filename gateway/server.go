package gateway

import (
	"log/slog"
	"net"
	"net/http"
	"time"
)

// DefaultMaxHeaderBytes is the default bound of a client's request line
// and header block (ServerConfig.MaxHeaderBytes).
const DefaultMaxHeaderBytes = 64 << 10

// ServerConfig configures the http.Server that Gateway.Server returns.
type ServerConfig struct {
	// MaxHeaderBytes bounds a request's line and header block, the
	// target included; net/http allows 4 KiB over it, answers a larger
	// one 431 and closes the connection. Default DefaultMaxHeaderBytes
	// (64 KiB).
	MaxHeaderBytes int
	// ConnState, if set, is told each client connection's state changes,
	// as http.Server.ConnState is (connlimit.Listener.ConnState).
	ConnState func(net.Conn, http.ConnState)
	// H2C serves clients that speak HTTP/2 without TLS (h2c with prior
	// knowledge, as gRPC clients do on an insecure channel) beside
	// HTTP/1.1 ones, on one listener, told apart by the HTTP/2 preface. Set it when a route is a gRPC route. Default false.
	H2C bool
}

// Server returns an http.Server that serves g to clients: the one home of
// the settings a gateway facing the internet needs from net/http, which
// the handler cannot set. Set its Addr, or call its Serve with a
// listener; Shutdown it before Close-ing g.
//
//   - Time limits on each phase of a connection, so that a slow or idle
//     client cannot hold one for long: 5s for the request header, 10s
//     for the whole request (a read carries no body), Config.Timeout and
//     5s more to write the answer, 60s idle between requests. A Reload
//     that raises the timeout extends the write limit of each request
//     from then on.
//   - MaxHeaderBytes (see ServerConfig).
//   - OPTIONS * goes to the gateway, which refuses it 405 as it does any
//     method but GET and HEAD, rather than to net/http's built-in handler,
//     which answers 200 with an empty Allow on the gateway's behalf.
//   - net/http's own errors go to Config.Logger at warn level.
//
// For clients over TLS, set its TLSConfig (a GetCertificate that reads
// files again lets the certificate rotate without a restart) and call ServeTLS with
// empty file names: clients get HTTP/2 by ALPN, or HTTP/1.1. The settings
// above hold over HTTP/2 too: the time limits per stream (the TLS
// handshake within the shortest of them), the idle limit per connection,
// MaxHeaderBytes as the header list size advertised and enforced; the
// replicas get X-Forwarded-Proto https.
func (g *Gateway) Server(c ServerConfig) *http.Server {
	c = g.serverSettings(c)
	var protocols *http.Protocols
	if c.H2C {
		// HTTP/1.1, HTTP/2 over TLS by ALPN (as the default does) and h2c
		// by prior knowledge. (An HTTP/1.1 Upgrade to h2c is not taken:
		// gRPC clients never ask for one.)
		protocols = new(http.Protocols)
		protocols.SetHTTP1(true)
		protocols.SetHTTP2(true)
		protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Server{
		Protocols:                    protocols,
		Handler:                      closeHTTP10{g},
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            readHeaderTimeout,
		ReadTimeout:                  readTimeout,
		WriteTimeout:                 g.writeTimeout(),
		IdleTimeout:                  idleTimeout,
		MaxHeaderBytes:               c.MaxHeaderBytes,
		ConnState:                    c.ConnState,
		ErrorLog:                     slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
}

// closeHTTP10 is g as net/http's server serves it: every answer to an
// HTTP/1.0 request closes its connection. net/http's server drops an
// HTTP/1.0 request's Transfer-Encoding before any handler sees it, and
// reads no body, so a chunked body would be served as the next request
// (RFC 9112 §6.1: such a message's framing is faulty, and the connection
// must close after it). No handler can tell which requests had one, so
// none keeps its connection. (internal/h1server refuses those requests
// itself, 400, and keeps HTTP/1.0 keep-alive for the others.)
type closeHTTP10 struct{ *Gateway }

func (h closeHTTP10) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 && r.ProtoMinor == 0 {
		w.Header().Set("Connection", "close")
	}
	h.Gateway.ServeHTTP(w, r)
}

// The time limits on a client connection's phases (see Server).
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	idleTimeout       = 60 * time.Second
)

// serverSettings returns c with its defaults filled in.
func (g *Gateway) serverSettings(c ServerConfig) ServerConfig {
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return c
}

// writeTimeout returns the write limit of a server built now, and
// records it for extendWrite.
func (g *Gateway) writeTimeout() time.Duration {
	write := g.view.Load().def.timeout + serverSlack
	for {
		// The smallest of the servers': each request that may take longer
		// extends its own (see extendWrite).
		cur := g.serverWrite.Load()
		if cur > 0 && cur <= int64(write) || g.serverWrite.CompareAndSwap(cur, int64(write)) {
			return write
		}
	}
}

// serverSlack is how much longer than a request's timeout its answer may
// take to write.
var serverSlack = 5 * time.Second // a variable for tests only

// extendWrite moves the write deadline of w's connection to at: for a
// request whose timeout a Reload has raised above what the Server's
// WriteTimeout, set as it was built, allows. Only such requests pay for
// it; net/http sets the deadline of every request itself.
func extendWrite(w http.ResponseWriter, at time.Time) {
	http.NewResponseController(w).SetWriteDeadline(at) // an error: w cannot (a test's recorder); nothing to extend
}
