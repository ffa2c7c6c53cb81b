package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A leaf verifies against its own CA for the names it was given, and not
// against another CA, for another name, or past its validity.
func TestIssueVerifies(t *testing.T) {
	ca, other := NewCA(t, "ca"), NewCA(t, "other")
	p := ca.Issue(t, Leaf{DNSNames: []string{"replica.test"}})
	leaf := p.TLS.Leaf
	opts := x509.VerifyOptions{Roots: ca.Pool(), DNSName: "replica.test"}
	if _, err := leaf.Verify(opts); err != nil {
		t.Fatalf("own CA: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: other.Pool(), DNSName: "replica.test"}); err == nil {
		t.Error("verified against another CA")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "elsewhere.test"}); err == nil {
		t.Error("verified for another name")
	}
	opts.CurrentTime = time.Now().Add(2 * time.Hour)
	if _, err := leaf.Verify(opts); err == nil {
		t.Error("verified past its NotAfter")
	}
	if def := ca.Issue(t, Leaf{}).TLS.Leaf; def.VerifyHostname("127.0.0.1") != nil || def.VerifyHostname("localhost") != nil {
		t.Errorf("default names %v %v, want 127.0.0.1 and localhost", def.IPAddresses, def.DNSNames)
	}
	client := ca.Issue(t, Leaf{Client: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if _, err := client.TLS.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
}

// The files written load back as the same pair.
func TestWriteFiles(t *testing.T) {
	p := NewCA(t, "ca").Issue(t, Leaf{})
	cert, key := p.WriteFiles(t, t.TempDir(), "leaf")
	got, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Leaf.Equal(p.TLS.Leaf) {
		t.Error("loaded another certificate")
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", fi.Mode(), err)
	}
}
