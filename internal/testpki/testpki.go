// Package testpki makes certificates for tests: a certificate authority
// and leaf certificates signed by it, with the names, validity and key
// usage a test chooses, as tls.Certificate values and as PEM files. Keys
// are ECDSA P-256, quick to make, so every test can have its own PKI and
// nothing is checked in that could expire.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // the certificate, PEM-encoded
}

// NewCA makes a self-signed CA named name, valid from an hour ago for a
// day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool returns a pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf describes a leaf certificate.
type Leaf struct {
	// CommonName is the subject's name; default the first DNS name, or
	// "leaf".
	CommonName string
	// DNSNames and IPs are the names it is valid for. Zero of both means
	// 127.0.0.1 and localhost.
	DNSNames []string
	IPs      []net.IP
	// NotBefore and NotAfter bound its validity; zero means an hour ago
	// and an hour from now.
	NotBefore, NotAfter time.Time
	// Client makes a client certificate (extended key usage client
	// authentication) instead of a server certificate.
	Client bool
}

// Pair is a leaf certificate with its key.
type Pair struct {
	TLS     tls.Certificate // ready for a tls.Config, Leaf parsed
	CertPEM []byte
	KeyPEM  []byte
}

// Issue makes a leaf certificate signed by ca.
func (ca *CA) Issue(t testing.TB, l Leaf) *Pair {
	t.Helper()
	if len(l.DNSNames) == 0 && len(l.IPs) == 0 {
		l.DNSNames, l.IPs = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	if l.CommonName == "" {
		l.CommonName = "leaf"
		if len(l.DNSNames) > 0 {
			l.CommonName = l.DNSNames[0]
		}
	}
	now := time.Now()
	if l.NotBefore.IsZero() {
		l.NotBefore = now.Add(-time.Hour)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = now.Add(time.Hour)
	}
	usage := x509.ExtKeyUsageServerAuth
	if l.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: l.CommonName},
		DNSNames:     l.DNSNames,
		IPAddresses:  l.IPs,
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := &Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	if p.TLS, err = tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
		t.Fatal(err)
	}
	return p
}

// WriteFiles writes the pair as name.crt and name.key in dir and returns
// their paths. Writing over existing files changes their modification
// time, as a rotation does.
func (p *Pair) WriteFiles(t testing.TB, dir, name string) (cert, key string) {
	t.Helper()
	cert, key = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	WriteFile(t, cert, p.CertPEM)
	WriteFile(t, key, p.KeyPEM)
	return cert, key
}

// WriteFile writes data to path (mode 0600), failing t on error. It
// writes another file and renames it over path, as careful rotations do
// (a Kubernetes secret volume swaps a symbolic link), so that a reader
// never sees the file half written.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
