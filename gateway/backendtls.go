package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"
)

// This file: TLS to https:// backends (Config.BackendTLS).
//
// The backend transport dials TLS itself (http.Transport.DialTLSContext)
// rather than through the transport's TLSClientConfig, which must not
// change once the transport is in use: Reload swaps the tls.Config in
// force, and the connections dialled from then on use the new one (a
// rotated client certificate, a new CA), while those open keep theirs,
// as Envoy does on a secret update. No connection is dropped for it.
//
// HTTP/2 is negotiated by ALPN, offered before HTTP/1.1, whatever
// BackendProtocol (which is about plaintext backends): over HTTP/2,
// cancelling a losing attempt resets its stream, and the connection goes
// on serving; over HTTP/1.1 it closes the connection, and the next attempt
// to that replica pays for a TCP and a TLS handshake.

// backendHandshakeTimeout bounds a TLS handshake with a backend, as
// net/http's default transport bounds its own (TLSHandshakeTimeout).
const backendHandshakeTimeout = 10 * time.Second

// backendTLS dials TLS connections to backends with the configuration in
// force.
type backendTLS struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	cfg  atomic.Pointer[tls.Config] // in force; never changed once stored
	src  *tls.Config                // the Config.BackendTLS cfg was made from (under the gateway's reloadMu)
}

func newBackendTLS(dial func(ctx context.Context, network, addr string) (net.Conn, error), c *tls.Config) *backendTLS {
	b := &backendTLS{dial: dial}
	b.set(c)
	return b
}

// set puts c (a Config.BackendTLS) in force for the connections dialled
// from now on. The same c as before changes nothing, so that a reload
// that leaves it keeps its session cache. Not for concurrent use (New,
// then Reload under its lock).
func (b *backendTLS) set(c *tls.Config) {
	if b.cfg.Load() != nil && c == b.src {
		return
	}
	b.src = c
	b.cfg.Store(clientTLS(c))
}

// clientTLS returns the configuration dialled with for c: a copy (the
// caller may go on using c), with the protocols offered by ALPN unless c
// names them, and a session cache of its own unless c has one. Each
// configuration gets a new cache: crypto/tls resumes a session checking
// only the expiry and the name of the certificate it was made with, not
// its chain against the roots in force, so a session from before a
// change of CA must not carry over.
func clientTLS(c *tls.Config) *tls.Config {
	if c == nil {
		c = &tls.Config{}
	} else {
		c = c.Clone()
	}
	if c.NextProtos == nil {
		c.NextProtos = []string{"h2", "http/1.1"}
	}
	if c.ClientSessionCache == nil {
		c.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	return c
}

// dialTLS is the backend transport's DialTLSContext: a TCP connection to
// addr and a TLS handshake over it, verifying the backend's certificate
// for the configuration's ServerName, or else addr's host (an IP address
// is verified against the certificate's IP addresses, and sent no SNI).
func (b *backendTLS) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	cfg := b.cfg.Load()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		cfg = cfg.Clone() // as net/http does per connection; the session cache is shared
		cfg.ServerName = host
	}
	conn, err := b.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, backendHandshakeTimeout)
	defer cancel()
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(hctx); err != nil {
		conn.Close()
		return nil, &handshakeError{addr: addr, err: err}
	}
	return tc, nil
}

// handshakeError is a failed TLS handshake with a backend.
type handshakeError struct {
	addr string
	err  error
}

func (e *handshakeError) Error() string { return "TLS handshake with " + e.addr + ": " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// tlsFailure reports whether err is a failure of TLS with a backend: a
// handshake that failed (a certificate refused: unknown authority,
// expired, another name; no protocol in common; a backend that does not
// speak TLS), or an alert the backend sent (with TLS 1.3 a backend refuses
// a client certificate, or the lack of one, after the client has finished
// its handshake, so the alert comes with the response). Also recognised
// from a Base of the caller's, by crypto/tls's and crypto/x509's error
// types.
func tlsFailure(err error) bool {
	var (
		hs     *handshakeError
		verify *tls.CertificateVerificationError
		record tls.RecordHeaderError
		alert  tls.AlertError
		op     *net.OpError
		ua     x509.UnknownAuthorityError
		inv    x509.CertificateInvalidError
		host   x509.HostnameError
	)
	switch {
	case errors.As(err, &hs), errors.As(err, &verify), errors.As(err, &record), errors.As(err, &alert),
		errors.As(err, &ua), errors.As(err, &inv), errors.As(err, &host):
		return true
	case errors.As(err, &op):
		// crypto/tls reports an alert received as an OpError of this Op
		// (its alert type is not exported).
		return op.Op == "remote error"
	}
	return false
}

// schemes reports whether backends has http:// and https:// ones.
func schemes(backends []string) (plain, secure bool) {
	for _, b := range backends {
		if len(b) >= 8 && strings.EqualFold(b[:8], "https://") {
			secure = true
		} else {
			plain = true
		}
	}
	return plain, secure
}

// warnMixed logs, when backends mix http:// and https:// and old (the
// backends before a reload; nil at start) did not, that some reads go in
// clear. Mixing is allowed: replicas move to TLS one at a time, and a
// gateway must keep serving through the move; but a hedge may then carry
// a read that came over TLS to a replica in clear, which an operator
// should know.
func warnMixed(log *slog.Logger, backends, old []string) {
	if p, s := schemes(backends); !p || !s {
		return
	}
	if p, s := schemes(old); p && s {
		return // said already
	}
	log.Warn("backends mix http:// and https://: attempts to the http:// ones travel in clear", "backends", strings.Join(backends, ","))
}

// logTLS logs a TLS failure with backend at warn level, at most one line a
// second as other failures: a read that another replica answers fails no
// client, and the metrics alone would not say which replica's certificate
// is refused, or why.
func (g *Gateway) logTLS(backend string, err error) {
	if ok, n := g.allowLog(logTLS); ok {
		g.log.Warn("backend TLS failed", "replica", backend, "err", err, "suppressed", n)
	}
}
