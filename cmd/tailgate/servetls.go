package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/internal/certfile"
)

// This file: TLS on serve's two sides. Clients over TLS (-tls-cert,
// -tls-key): the certificate is read again on SIGHUP (and POST /-/reload)
// and every tlsPoll, and new connections get it (internal/certfile);
// connections open keep theirs. Backends over https:// (-backend-ca,
// -backend-cert, -backend-key, -backend-server-name): the files are read
// as the rest of the configuration is, at start and on each reload, and
// the tls.Config they make is given to gateway.Reload, which dials new
// connections with it.

// tlsPoll is how often the client listener's certificate files are read
// for a change: certificate managers write new files and signal no one.
var tlsPoll = 5 * time.Second // a variable for tests only

// tlsFlags are serve's TLS flags.
type tlsFlags struct {
	cert, key               string
	backendCA               string
	backendCert, backendKey string
	backendServerName       string
}

func (f *tlsFlags) registerTLS(fs *flag.FlagSet) {
	fs.StringVar(&f.cert, "tls-cert", "", "serve clients over TLS (HTTP/2 or HTTP/1.1 by ALPN) with this PEM certificate chain, leaf first (with -tls-key); read again on SIGHUP and when it changes (checked every 5s): new connections get the new one, open ones keep theirs; a pair that does not load is logged and the running one kept")
	fs.StringVar(&f.key, "tls-key", "", "the PEM private key of -tls-cert")
	fs.StringVar(&f.backendCA, "backend-ca", "", "PEM file of the CA certificates that verify https:// backends, instead of the system's roots; read again on SIGHUP")
	fs.StringVar(&f.backendCert, "backend-cert", "", "PEM client certificate for https:// backends that ask for one (mutual TLS; with -backend-key); read again on SIGHUP")
	fs.StringVar(&f.backendKey, "backend-key", "", "the PEM private key of -backend-cert")
	fs.StringVar(&f.backendServerName, "backend-server-name", "", "the name https:// backends' certificates are verified for, and sent as SNI, instead of each backend's host (for backends addressed by IP)")
}

// checkTLS refuses flags that go in pairs given alone.
func (f *tlsFlags) checkTLS() error {
	if (f.cert == "") != (f.key == "") {
		return errors.New("-tls-cert and -tls-key go together")
	}
	if (f.backendCert == "") != (f.backendKey == "") {
		return errors.New("-backend-cert and -backend-key go together")
	}
	return nil
}

// backendTLSCache holds the last backend tls.Config made, by the files'
// contents and the flags: a reload that changes none of them gives the
// gateway the same Config, and the gateway keeps the one in force with
// its TLS sessions (see gateway.Config.BackendTLS).
var backendTLSCache struct {
	sync.Mutex
	sum [32]byte
	cfg *tls.Config
}

// backendTLS reads the backend TLS files and returns the configuration
// they make, or nil when no backend TLS flag is given (the gateway's
// default: the system's roots, no client certificate).
func (f *tlsFlags) backendTLS() (*tls.Config, error) {
	if f.backendCA == "" && f.backendCert == "" && f.backendServerName == "" {
		return nil, nil
	}
	var caPEM, certPEM, keyPEM []byte
	var err error
	if f.backendCA != "" {
		if caPEM, err = os.ReadFile(f.backendCA); err != nil {
			return nil, fmt.Errorf("-backend-ca: %w", err)
		}
	}
	if f.backendCert != "" {
		if certPEM, err = os.ReadFile(f.backendCert); err != nil {
			return nil, fmt.Errorf("-backend-cert: %w", err)
		}
		if keyPEM, err = os.ReadFile(f.backendKey); err != nil {
			return nil, fmt.Errorf("-backend-key: %w", err)
		}
	}
	sum := sha256.Sum256(bytes.Join([][]byte{caPEM, certPEM, keyPEM, []byte(f.backendServerName)}, []byte{0}))
	backendTLSCache.Lock()
	defer backendTLSCache.Unlock()
	if backendTLSCache.cfg != nil && sum == backendTLSCache.sum {
		return backendTLSCache.cfg, nil
	}
	cfg := &tls.Config{ServerName: f.backendServerName}
	if caPEM != nil {
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("-backend-ca %s: no PEM certificate in it", f.backendCA)
		}
	}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("-backend-cert %s and -backend-key %s: %w", f.backendCert, f.backendKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	backendTLSCache.sum, backendTLSCache.cfg = sum, cfg
	return cfg, nil
}

// warnBackendTLSUnused warns when backend TLS flags are given and no
// backend is https://: they then apply to none, and the reads go in clear,
// which is not what whoever gave them meant.
func (f *tlsFlags) warnBackendTLSUnused(log interface{ Warn(string, ...any) }, backends []string) {
	if f.backendCA == "" && f.backendCert == "" && f.backendServerName == "" {
		return
	}
	for _, b := range backends {
		if len(b) >= 8 && strings.EqualFold(b[:8], "https://") {
			return
		}
	}
	log.Warn("the backend TLS flags apply to https:// backends, and none is configured: reads go in clear")
}

// loadCerts reads the client listener's certificate, once, when -tls-cert
// is given: before the listener opens, and before anything else may call
// reload.
func (r *reloader) loadCerts(f *serveFlags) error {
	if f.cert == "" || r.certs != nil {
		return nil
	}
	certs, err := certfile.Load(f.cert, f.key, r.log)
	if err != nil {
		return fmt.Errorf("-tls-cert/-tls-key: %w", err)
	}
	r.certs = certs
	return nil
}

// serveClients serves srv on ln, over TLS when r has certificates, and
// sends Serve's error to errs. Over TLS it also watches the certificate
// files until ctx ends; the function it returns waits for that to stop.
func (r *reloader) serveClients(ctx context.Context, srv *http.Server, ln net.Listener, errs chan<- error) (wait func()) {
	if r.certs == nil {
		go func() { errs <- srv.Serve(ln) }()
		return func() {}
	}
	// ServeTLS adds HTTP/2 to the protocols offered by ALPN.
	srv.TLSConfig = &tls.Config{GetCertificate: r.certs.GetCertificate}
	go func() { errs <- srv.ServeTLS(ln, "", "") }()
	done, poll := make(chan struct{}), tlsPoll
	go func() { r.certs.Watch(ctx, poll); close(done) }()
	return func() { <-done }
}
