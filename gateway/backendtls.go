package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
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

	// certless is what is known, by backend address, of backends that
	// asked for a client certificate when the configuration in force has
	// none to give (see classify).
	mu       sync.Mutex
	certless map[string]certless
}

// certless is a backend that asked for a client certificate and got
// none: served says it has answered all the same (it only requests
// one), so that its failures are not taken for a refusal.
type certless struct{ served bool }

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
	b.cfg.Store(b.clientTLS(c))
	b.mu.Lock()
	b.certless = nil // learnt afresh under the new configuration
	b.mu.Unlock()
}

// clientTLS returns the configuration dialled with for c: a copy (the
// caller may go on using c), with the protocols offered by ALPN unless c
// names them, and a session cache of its own unless c has one. Each
// configuration gets a new cache: crypto/tls resumes a session checking
// only the expiry and the name of the certificate it was made with, not
// its chain against the roots in force, so a session from before a
// change of CA must not carry over.
//
// Without a client certificate, it notes which backends ask for one
// (GetClientCertificate, which then sends none, as crypto/tls would): a
// backend that requires one refuses the connection after the client's
// side of a TLS 1.3 handshake is done, so that net/http may report only
// that the connection died ("broken pipe", "http2: client conn could not
// be established"), not why; classify says why.
func (b *backendTLS) clientTLS(c *tls.Config) *tls.Config {
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
	if len(c.Certificates) == 0 && c.GetClientCertificate == nil {
		c.GetClientCertificate = func(info *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if addr, ok := info.Context().Value(dialAddrKey{}).(string); ok {
				b.mu.Lock()
				if b.certless == nil {
					b.certless = map[string]certless{}
				}
				if _, ok := b.certless[addr]; !ok {
					b.certless[addr] = certless{}
				}
				b.mu.Unlock()
			}
			return &tls.Certificate{}, nil
		}
	}
	return c
}

// dialAddrKey carries the address dialled to GetClientCertificate, in the
// handshake's context.
type dialAddrKey struct{}

// classify returns err, the failure of a request to the backend at addr
// with no response, as a clientCertError when that backend asked for a
// client certificate the configuration has none of, and has never
// answered without one: the failure is then its refusal, whatever
// net/http says. Called with served true after an answer, to learn that a
// backend which asks for a certificate does without.
func (b *backendTLS) classify(addr string, err error, served bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, asked := b.certless[addr]
	switch {
	case !asked || c.served:
		return err
	case served:
		b.certless[addr] = certless{served: true}
		return err
	}
	return &clientCertError{addr: addr, err: err}
}

// clientCertError is a backend's refusal of a connection without a
// client certificate.
type clientCertError struct {
	addr string
	err  error
}

func (e *clientCertError) Error() string {
	return "the backend at " + e.addr + " asked for a client certificate and none is configured " +
		"(tailgate serve -backend-cert and -backend-key; Config.BackendTLS), and the connection failed: " + e.err.Error()
}

func (e *clientCertError) Unwrap() error { return e.err }

// classifying is the backend transport's outermost layer when the gateway
// dials TLS itself: its failures to reach https:// backends go through
// backendTLS.classify.
type classifying struct {
	http.RoundTripper
	tls *backendTLS
}

func (c *classifying) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.RoundTripper.RoundTrip(req)
	if req.URL.Scheme != "https" || (err != nil && req.Context().Err() != nil) {
		return resp, err // a request cut short is no backend's refusal
	}
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "443") // as net/http dials it
	}
	return resp, c.tls.classify(addr, err, err == nil)
}

// CloseIdleConnections closes the transport's idle connections.
func (c *classifying) CloseIdleConnections() {
	if ci, ok := c.RoundTripper.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
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
	hctx, cancel := context.WithTimeout(context.WithValue(ctx, dialAddrKey{}, addr), backendHandshakeTimeout)
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
		cc     *clientCertError
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
	case errors.As(err, &cc), errors.As(err, &hs), errors.As(err, &verify), errors.As(err, &record), errors.As(err, &alert),
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
