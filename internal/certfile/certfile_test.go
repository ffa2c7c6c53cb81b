package certfile

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/internal/testpki"
	"go.uber.org/goleak"
)

// A pair that does not load is an error at start that names the files.
func TestLoadRefuses(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	dir := t.TempDir()
	cert, _ := ca.Issue(t, testpki.Leaf{}).WriteFiles(t, dir, "one")
	_, otherKey := ca.Issue(t, testpki.Leaf{}).WriteFiles(t, dir, "two")
	for _, c := range []struct{ cert, key, want string }{
		{cert, otherKey, "private key does not match public key"},
		{cert, filepath.Join(dir, "missing.key"), "no such file"},
		{filepath.Join(dir, "missing.crt"), otherKey, "no such file"},
		{otherKey, otherKey, "PEM inputs may have been switched"},
	} {
		if _, err := Load(c.cert, c.key, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.cert, c.key, err, c.want)
		}
	}
	if _, err := Load(cert, otherKey, nil); !strings.Contains(err.Error(), cert) || !strings.Contains(err.Error(), otherKey) {
		t.Errorf("%v does not name the files", err)
	}
}

// Reload puts a new pair in force, and keeps the one in force when the
// files are unchanged or do not load, logging a refusal once.
func TestCertFilesReload(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	dir := t.TempDir()
	one, two := ca.Issue(t, testpki.Leaf{CommonName: "one"}), ca.Issue(t, testpki.Leaf{CommonName: "two"})
	cert, key := one.WriteFiles(t, dir, "tls")
	logs := &syncBuffer{}
	c, err := Load(cert, key, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	inForce := func() string { got, _ := c.GetCertificate(nil); return got.Leaf.Subject.CommonName }
	if inForce() != "one" || logs.count(`msg="TLS certificate loaded"`) != 1 || logs.count(`subject="CN=one" names=localhost ips=127.0.0.1 notAfter=`) != 1 {
		t.Fatalf("in force %q; log:\n%s", inForce(), logs.b.String())
	}
	if changed, err := c.Reload(); changed || err != nil {
		t.Errorf("unchanged files: %v %v", changed, err)
	}
	testpki.WriteFile(t, cert, two.CertPEM) // the key is still one's
	for range 2 {
		if changed, err := c.Reload(); changed || err == nil {
			t.Errorf("mismatched pair: %v %v", changed, err)
		}
	}
	if inForce() != "one" || logs.count("TLS certificate not reloaded; the one in force is kept") != 1 {
		t.Errorf("in force %q; log:\n%s", inForce(), logs.b.String())
	}
	testpki.WriteFile(t, key, two.KeyPEM)
	if changed, err := c.Reload(); !changed || err != nil || inForce() != "two" {
		t.Errorf("new pair: %v %v, in force %q", changed, err, inForce())
	}
	if logs.count(`msg="TLS certificate reloaded: new connections get it"`) != 1 {
		t.Errorf("log:\n%s", logs.b.String())
	}
}

// Watch notices new files by itself, and returns when its context ends.
func TestCertFilesWatch(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	dir := t.TempDir()
	cert, key := ca.Issue(t, testpki.Leaf{CommonName: "one"}).WriteFiles(t, dir, "tls")
	c, err := Load(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Watch(ctx, time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	ca.Issue(t, testpki.Leaf{CommonName: "two"}).WriteFiles(t, dir, "tls")
	for deadline := time.Now().Add(5 * time.Second); c.Certificate().Leaf.Subject.CommonName != "two"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the new certificate never came into force")
		}
	}
}

func TestCertFilesPollLogsLastingRefusals(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	dir := t.TempDir()
	cert, _ := ca.Issue(t, testpki.Leaf{}).WriteFiles(t, dir, "tls")
	logs := &syncBuffer{}
	c, err := Load(cert, filepath.Join(dir, "tls.key"), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	next := ca.Issue(t, testpki.Leaf{})
	testpki.WriteFile(t, cert, next.CertPEM)
	const refusal = "TLS certificate not reloaded"
	for i, want := range []int{0, 1, 1} {
		if _, err := c.load(loadPoll); err == nil {
			t.Fatalf("poll %d: a mismatched pair loaded", i)
		}
		if n := logs.count(refusal); n != want {
			t.Errorf("after poll %d: %d refusals logged, want %d", i, n, want)
		}
	}
	testpki.WriteFile(t, filepath.Join(dir, "tls.key"), next.KeyPEM)
	if changed, err := c.load(loadPoll); !changed || err != nil {
		t.Errorf("the whole new pair: %v %v", changed, err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}
