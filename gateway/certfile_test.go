package gateway

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/internal/testpki"
)

// A pair that does not load is an error at start that names the files.
func TestLoadCertFilesRefuses(t *testing.T) {
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
		if _, err := LoadCertFiles(c.cert, c.key, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.cert, c.key, err, c.want)
		}
	}
	if _, err := LoadCertFiles(cert, otherKey, nil); !strings.Contains(err.Error(), cert) || !strings.Contains(err.Error(), otherKey) {
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
	c, err := LoadCertFiles(cert, key, slog.New(slog.NewTextHandler(logs, nil)))
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
	c, err := LoadCertFiles(cert, key, nil)
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

// Gateway.Server over TLS serves clients HTTP/2 by ALPN (and HTTP/1.1 to
// those that ask for it), with its settings in force on HTTP/2 too (the
// header limit), and the replicas hear that the client came over https.
func TestLoopbackServerOverTLS(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	dir := t.TempDir()
	cert, key := ca.Issue(t, testpki.Leaf{}).WriteFiles(t, dir, "tls")
	certs, err := LoadCertFiles(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, "r", func(b *backend, w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Forwarded-Proto"))
	})
	g, err := New(Config{Backends: []string{b.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := g.Server(ServerConfig{MaxHeaderBytes: 4 << 10})
	srv.TLSConfig = &tls.Config{GetCertificate: certs.GetCertificate}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	defer func() {
		// Shutdown, not Close: it waits for the connection that the 431
		// closes, which net/http lingers on for half a second.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}()
	for _, major := range []int{2, 1} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, Protocols: new(http.Protocols)}
		tr.Protocols.SetHTTP1(major == 1)
		tr.Protocols.SetHTTP2(major == 2)
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		resp, err := client.Get("https://" + ln.Addr().String() + "/x")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != major || string(body) != "https" {
			t.Errorf("%d %s %q, want 200 over HTTP/%d with X-Forwarded-Proto https", resp.StatusCode, resp.Proto, body, major)
		}
		req, _ := http.NewRequest(http.MethodGet, "https://"+ln.Addr().String()+"/x", nil)
		req.Header.Set("X-Big", strings.Repeat("a", 16<<10))
		resp, err = client.Do(req)
		if major == 2 {
			// The server advertises its limit (SETTINGS_MAX_HEADER_LIST_SIZE),
			// and net/http's client keeps to it.
			if err == nil || !strings.Contains(err.Error(), "larger than peer's advertised limit") {
				t.Errorf("HTTP/2: a header block over the limit: %v, want refused for the server's advertised limit", err)
			}
			if err == nil {
				resp.Body.Close()
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("HTTP/1.1: a header block over the limit: %d, want 431", resp.StatusCode)
		}
	}
	if err := os.Remove(filepath.Join(dir, "tls.key")); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.Reload(); err == nil {
		t.Error("reload without a key file succeeded")
	}
}

// A poll that finds a pair that does not load logs it only when the next
// poll finds the same: a rotation half written (the certificate, not yet
// the key) is no error.
func TestCertFilesPollLogsLastingRefusals(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	dir := t.TempDir()
	cert, _ := ca.Issue(t, testpki.Leaf{}).WriteFiles(t, dir, "tls")
	logs := &syncBuffer{}
	c, err := LoadCertFiles(cert, filepath.Join(dir, "tls.key"), slog.New(slog.NewTextHandler(logs, nil)))
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
