package gateway

import (
	"context"
	"log/slog"
	"net"

	"github.com/tailgate-dev/tailgate/internal/h1server"
)

// ClientServer is what serves a gateway to clients, as tailgate serve
// runs it: net/http's *http.Server (Server) or internal/h1server's
// (PlainServer).
type ClientServer interface {
	Serve(net.Listener) error
	// Shutdown stops accepting, closes idle connections and waits for
	// requests in flight, or for ctx to end.
	Shutdown(context.Context) error
	Close() error
	// SetKeepAlivesEnabled(false) closes each connection after its
	// current request (a drain).
	SetKeepAlivesEnabled(bool)
}

// The servers of plain-HTTP/1.1 clients (ServerConfig.Plain).
const (
	PlainH1      = "h1"       // internal/h1server: the handler in the connection's goroutine (docs/performance.md)
	PlainNetHTTP = "net/http" // net/http's server, as Server returns it
)

// PlainServer returns the server of g's plain-HTTP/1.1 clients that
// c.Plain names, with the settings Server lists: the same time limits,
// header limit, OPTIONS * to the gateway, errors to Config.Logger at
// warn level. Clients over TLS, or HTTP/2, need Server: with c.H2C, it
// returns Server's.
func (g *Gateway) PlainServer(c ServerConfig) ClientServer {
	if c.Plain == PlainNetHTTP || c.H2C {
		return g.Server(c)
	}
	c = g.serverSettings(c)
	// h1server has no OPTIONS * handler of its own: it goes to g.
	return &h1server.Server{
		Handler:           g,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      g.writeTimeout(),
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ConnState:         c.ConnState,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
}
