package gateway

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/internal/certfile"
	"github.com/tailgate-dev/tailgate/internal/testpki"
)

// Gateway.Server over TLS serves clients HTTP/2 by ALPN (and HTTP/1.1 to
// those that ask for it), with its settings in force on HTTP/2 too (the
// header limit), and the replicas hear that the client came over https.
func TestLoopbackServerOverTLS(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	dir := t.TempDir()
	cert, key := ca.Issue(t, testpki.Leaf{}).WriteFiles(t, dir, "tls")
	certs, err := certfile.Load(cert, key, nil)
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
