package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CertFiles is a certificate and its private key, read from PEM files and
// read again when they change, for a TLS listener (Gateway.Server's) whose
// certificate rotates: set GetCertificate as the tls.Config's, and each
// new connection gets the certificate in force as it arrives, while
// connections open keep the one they were made with. No restart, and no
// connection dropped. Safe for concurrent use.
//
// A pair that does not load (a file missing, a certificate and a key
// that do not match, as while a rotation has written one file and not yet
// the other) is an error from LoadCertFiles; later, Reload and Watch log
// it and keep the certificate in force.
type CertFiles struct {
	certFile, keyFile string
	log               *slog.Logger

	cur atomic.Pointer[tls.Certificate]

	mu      sync.Mutex // serialises reads of the files
	sum     [32]byte   // of the files' contents in force
	refusal string     // the last refusal logged, so that a refusal is logged once
	pending string     // the last refusal a poll found, logged if the next finds it too
}

// LoadCertFiles reads the certificate (a PEM chain, leaf first) and key
// files. Its log gets a line for each certificate put in force, and for
// each refused; nil discards them.
func LoadCertFiles(certFile, keyFile string, log *slog.Logger) (*CertFiles, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &CertFiles{certFile: certFile, keyFile: keyFile, log: log}
	if _, err := c.load(loadStart); err != nil {
		return nil, err
	}
	return c, nil
}

// GetCertificate returns the certificate in force: a tls.Config's
// GetCertificate.
func (c *CertFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cur.Load(), nil
}

// Certificate returns the certificate in force, its Leaf parsed.
func (c *CertFiles) Certificate() *tls.Certificate { return c.cur.Load() }

// Reload reads the files again and puts their certificate in force if it
// differs from the one in force. It reports whether it did; a pair that
// does not load is logged (once for the same files' contents) and
// returned, and the certificate in force kept.
func (c *CertFiles) Reload() (changed bool, err error) { return c.load(loadReload) }

// Watch reads the files every interval until ctx is done, as Reload does:
// certificate managers (cert-manager, a Kubernetes secret volume, certbot)
// write new files and signal no one. Reading two small files a few times
// a minute costs nothing that matters; comparing their contents, rather
// than their modification times, also catches a copy that kept the old
// times. A pair that does not load is logged when the next poll finds the
// same: a rotation that has written the certificate and not yet the key
// is not an error.
func (c *CertFiles) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.load(loadPoll) // logs what it did
		}
	}
}

// Why the files are read: by LoadCertFiles, Reload or Watch.
type loadMode int

const (
	loadStart loadMode = iota
	loadReload
	loadPoll
)

// load reads the files and puts their pair in force if it is new (at
// start, whatever it is).
func (c *CertFiles) load(mode loadMode) (bool, error) {
	running := mode != loadStart
	c.mu.Lock()
	defer c.mu.Unlock()
	certPEM, err := os.ReadFile(c.certFile)
	if err != nil {
		return false, c.refused(mode, "", fmt.Errorf("gateway: TLS certificate: %w", err))
	}
	keyPEM, err := os.ReadFile(c.keyFile)
	if err != nil {
		return false, c.refused(mode, "", fmt.Errorf("gateway: TLS key: %w", err))
	}
	sum := sha256.Sum256(append(append(bytes.Clone(certPEM), 0), keyPEM...))
	if running && sum == c.sum {
		return false, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, c.refused(mode, string(sum[:]), fmt.Errorf("gateway: TLS certificate %s and key %s: %w", c.certFile, c.keyFile, err))
	}
	leaf := pair.Leaf
	now := time.Now()
	c.cur.Store(&pair)
	c.sum, c.refusal, c.pending = sum, "", ""
	msg := "TLS certificate loaded"
	if running {
		msg = "TLS certificate reloaded: new connections get it"
	}
	// Both kinds of name a client may verify the certificate for: a
	// gateway reached by address needs an IP SAN, and the log says whether
	// it has one.
	ips := make([]string, len(leaf.IPAddresses))
	for i, ip := range leaf.IPAddresses {
		ips[i] = ip.String()
	}
	attrs := []any{"file", c.certFile, "subject", leaf.Subject.String(), "names", strings.Join(leaf.DNSNames, ","),
		"ips", strings.Join(ips, ","), "notAfter", leaf.NotAfter.UTC().Format(time.RFC3339)}
	if now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		// Served all the same: what to serve is the operator's choice,
		// and clients will say what they think of it.
		c.log.Warn(msg+", outside its validity", attrs...)
	} else {
		c.log.Info(msg, attrs...)
	}
	return true, nil
}

// refused handles a pair that did not load: at start it is the caller's
// error; later it is logged and the certificate in force kept. A refusal
// is logged once: for the same contents (sum), or the same error when a
// file could not be read, until a pair loads; found by a poll, once the
// next poll finds it too.
func (c *CertFiles) refused(mode loadMode, sum string, err error) error {
	key := sum + "\x00" + err.Error()
	switch {
	case mode == loadStart, key == c.refusal:
	case mode == loadPoll && key != c.pending:
		c.pending = key
	default:
		c.refusal = key
		c.log.Error("TLS certificate not reloaded; the one in force is kept", "err", err)
	}
	return err
}
