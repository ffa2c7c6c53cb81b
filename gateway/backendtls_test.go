package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/testpki"
)

// tlsBackend is a loopback replica over TLS, offering HTTP/2 and
// HTTP/1.1 by ALPN, that counts the TCP connections it accepts.
type tlsBackend struct {
	*backend
	conns atomic.Int32
}

// newTLSBackend starts a TLS replica with cert; tune, if not nil, changes
// its tls.Config (to ask for client certificates, say).
func newTLSBackend(t *testing.T, name string, cert tls.Certificate, tune func(*tls.Config), handle func(b *backend, w http.ResponseWriter, r *http.Request)) *tlsBackend {
	t.Helper()
	tb := &tlsBackend{backend: &backend{name: name, handle: handle, cancelled: make(chan string, 100)}}
	srv := httptest.NewUnstartedServer(tb.backend)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	if tune != nil {
		tune(srv.TLS)
	}
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests are about
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			tb.conns.Add(1)
		}
	}
	srv.StartTLS()
	tb.URL = srv.URL
	t.Cleanup(srv.Close)
	return tb
}

// answerNameProto writes the backend's name, with what the request came over.
func answerNameProto(b *backend, w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, b.name+" "+r.Proto)
}

// oneAttempt is a policy without hedges: each read is one attempt, so a
// refused replica is counted once.
func oneAttempt() hedge.Policy { return hedge.Policy{MaxAttempts: 1} }

// A backend whose certificate the configured CA signed answers, over
// HTTP/2 negotiated by ALPN, and sees TLS; a client certificate is sent
// when configured; the server name override is sent as SNI and verified.
func TestLoopbackTLSBackendAnswers(t *testing.T) {
	ca := testpki.NewCA(t, "replicas")
	client := ca.Issue(t, testpki.Leaf{CommonName: "gateway", Client: true})
	for _, c := range []struct {
		name    string
		leaf    testpki.Leaf
		tune    func(*tls.Config)
		backend *tls.Config
		sni     string
		proto   string
	}{
		{name: "ca", backend: &tls.Config{RootCAs: ca.Pool()}},
		// h2c is about plaintext backends: https:// ones still negotiate.
		{name: "h2c", backend: &tls.Config{RootCAs: ca.Pool()}, proto: ProtocolH2C},
		{name: "mtls", tune: func(c *tls.Config) { c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, ca.Pool() },
			backend: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLS}}},
		{name: "servername", leaf: testpki.Leaf{DNSNames: []string{"replica.internal"}},
			backend: &tls.Config{RootCAs: ca.Pool(), ServerName: "replica.internal"}, sni: "replica.internal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newTLSBackend(t, "r", ca.Issue(t, c.leaf).TLS, c.tune, answerNameProto)
			g, front := newGateway(t, Config{Policy: oneAttempt(), BackendTLS: c.backend, BackendProtocol: c.proto}, b.backend)
			resp, body := get(t, front.URL+"/x")
			if resp.StatusCode != 200 || body != "r HTTP/2.0" {
				t.Fatalf("%d %q, want 200 from r over HTTP/2", resp.StatusCode, body)
			}
			r := b.last()
			if r.TLS == nil || r.TLS.ServerName != c.sni {
				t.Errorf("backend saw TLS %v, want SNI %q", r.TLS, c.sni)
			}
			if c.name == "mtls" && (len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "gateway") {
				t.Errorf("backend saw client certificates %v, want the gateway's", r.TLS.PeerCertificates)
			}
			if n := counterValue(t, g, "tailgate_attempt_failures_total", "reason", "tls"); n != 0 {
				t.Errorf("tls failures %v", n)
			}
		})
	}
}

// A backend whose certificate cannot be trusted (another CA, expired, for
// another name) is refused: 502 saying why, one attempt failure of reason
// "tls" (not "transport"), and a warning naming the replica.
func TestLoopbackTLSBackendRefused(t *testing.T) {
	ca, other := testpki.NewCA(t, "replicas"), testpki.NewCA(t, "elsewhere")
	past := time.Now().Add(-time.Hour)
	for _, c := range []struct {
		name string
		cert tls.Certificate
		want string
	}{
		{"wrong CA", other.Issue(t, testpki.Leaf{}).TLS, "certificate signed by unknown authority"},
		{"expired", ca.Issue(t, testpki.Leaf{NotBefore: past.Add(-time.Hour), NotAfter: past}).TLS, "certificate has expired"},
		{"other name", ca.Issue(t, testpki.Leaf{DNSNames: []string{"replica.internal"}}).TLS, "doesn't contain any IP SANs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newTLSBackend(t, "r", c.cert, nil, answerNameProto)
			logs := &syncBuffer{}
			g, front := newGateway(t, Config{Policy: oneAttempt(), BackendTLS: &tls.Config{RootCAs: ca.Pool()},
				Logger: slog.New(slog.NewTextHandler(logs, nil))}, b.backend)
			resp, body := get(t, front.URL+"/x")
			// Why is the log's to say: the client learns only that TLS
			// failed, nothing of the backend's names or certificates.
			if resp.StatusCode != http.StatusBadGateway || body != `{"error":"all attempts failed: TLS with the backend failed (the gateway's log says why)"}`+"\n" {
				t.Errorf("%d %q, want 502 saying TLS failed, and no more", resp.StatusCode, body)
			}
			if b.hits.Load() != 0 {
				t.Error("the request reached the backend")
			}
			if n := counterValue(t, g, "tailgate_attempt_failures_total", "reason", "tls"); n != 1 {
				t.Errorf("tls failures %v, want 1", n)
			}
			if n := counterValue(t, g, "tailgate_attempt_failures_total", "reason", "transport"); n != 0 {
				t.Errorf("transport failures %v, want 0", n)
			}
			if logs.count(`msg="backend TLS failed" replica=`+b.URL) != 1 || logs.count(c.want) < 1 {
				t.Errorf("log:\n%s", logs.b.String())
			}
		})
	}
}

// A backend that requires a client certificate refuses a gateway without
// one: 502, and the request never reaches it. With TLS 1.3 the backend
// refuses after the client's side of the handshake is done, with an alert
// that may arrive before the first request is sent; then net/http reports
// only that the connection died (broken pipe, "http2: client conn could
// not be established"). The gateway saw the backend ask for a certificate
// it had none of: the failure is counted as "tls" every time, whatever
// net/http reports, over HTTP/2 and HTTP/1.1, TLS 1.3 and 1.2, and the log
// says to give one with -backend-cert. A backend that only requests a
// certificate, and answers without, is served, and its failures are not
// taken for refusals.
func TestLoopbackTLSBackendClientCertRequired(t *testing.T) {
	ca := testpki.NewCA(t, "replicas")
	for _, c := range []struct {
		name   string
		protos []string
		max    uint16
	}{{"h2 TLS 1.3", nil, 0}, {"http1 TLS 1.3", []string{"http/1.1"}, 0}, {"h2 TLS 1.2", nil, tls.VersionTLS12}} {
		t.Run(c.name, func(t *testing.T) {
			b := newTLSBackend(t, "r", ca.Issue(t, testpki.Leaf{}).TLS, func(tc *tls.Config) {
				tc.ClientAuth, tc.ClientCAs, tc.MaxVersion = tls.RequireAndVerifyClientCert, ca.Pool(), c.max
				if c.protos != nil {
					tc.NextProtos = c.protos
				}
			}, answerNameProto)
			logs := &syncBuffer{}
			g, front := newGateway(t, Config{Policy: oneAttempt(), BackendTLS: &tls.Config{RootCAs: ca.Pool()},
				Logger: slog.New(slog.NewTextHandler(logs, nil))}, b.backend)
			// Several reads, several connections: each is a refusal, and
			// each is told so.
			for range 5 {
				resp, body := get(t, front.URL+"/x")
				if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "certificate") {
					t.Fatalf("%d %q, want 502 without the backend's TLS details", resp.StatusCode, body)
				}
			}
			if b.hits.Load() != 0 {
				t.Errorf("%d requests reached the backend", b.hits.Load())
			}
			if n := counterValue(t, g, "tailgate_attempt_failures_total", "reason", "tls"); n != 5 {
				t.Errorf("tls failures %v, want 5 (transport: %v)", n, counterValue(t, g, "tailgate_attempt_failures_total", "reason", "transport"))
			}
			// At least the first: the warning is held to one a second, and
			// five reads may span more on a busy machine.
			if logs.count(`msg="backend TLS failed" replica=`+b.URL+` err="the backend at `+strings.TrimPrefix(b.URL, "https://")+
				` asked for a client certificate and none is configured (tailgate serve -backend-cert and -backend-key`) < 1 {
				t.Errorf("log:\n%s", logs.b.String())
			}
		})
	}
	t.Run("requested, not required", func(t *testing.T) {
		b := newTLSBackend(t, "r", ca.Issue(t, testpki.Leaf{}).TLS,
			func(tc *tls.Config) { tc.ClientAuth, tc.ClientCAs = tls.VerifyClientCertIfGiven, ca.Pool() }, answerNameProto)
		g, front := newGateway(t, Config{Policy: oneAttempt(), BackendTLS: &tls.Config{RootCAs: ca.Pool()}}, b.backend)
		if resp, body := get(t, front.URL+"/x"); resp.StatusCode != 200 {
			t.Fatalf("%d %q, want 200", resp.StatusCode, body)
		}
		if err := g.tls.classify(strings.TrimPrefix(b.URL, "https://"), errors.New("connection reset"), false); tlsFailure(err) {
			t.Errorf("a failure of a backend that answered without a certificate: %v, taken for a refusal", err)
		}
	})
}

// Over HTTP/2, cancelling a losing attempt resets its stream and no more:
// the connection it went over serves the next request to that replica.
// Over HTTP/1.1 (ALPN kept to it) the loser's connection is closed, and
// the next request needs another: the check tells the two apart. A reload
// to the loser's replica alone sends it the next request (a reload keeps
// the backend transport and its connections).
func TestLoopbackTLSBackendLoserResetsOneStream(t *testing.T) {
	ca := testpki.NewCA(t, "replicas")
	for _, c := range []struct {
		proto  string
		alpn   []string
		reused bool
	}{{"HTTP/2.0", nil, true}, {"HTTP/1.1", []string{"http/1.1"}, false}} {
		t.Run(c.proto, func(t *testing.T) {
			type seen struct {
				b             *backend
				remote, proto string
			}
			loser := make(chan seen, 2)
			handle := func(b *backend, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" && r.Header.Get(hedge.HedgeHeader) == "" {
					select {
					case <-r.Context().Done():
						loser <- seen{b, r.RemoteAddr, r.Proto}
						return
					case <-time.After(5 * time.Second):
					}
				}
				io.WriteString(w, r.RemoteAddr)
			}
			tbs := map[*backend]*tlsBackend{}
			for _, name := range []string{"a", "b"} {
				tb := newTLSBackend(t, name, ca.Issue(t, testpki.Leaf{}).TLS, nil, handle)
				tbs[tb.backend] = tb
			}
			var backends []string
			for b := range tbs {
				backends = append(backends, b.URL)
			}
			tlsCfg := &tls.Config{RootCAs: ca.Pool(), NextProtos: c.alpn}
			g, front := newGateway(t, Config{Backends: backends, Policy: fixedPolicy(10 * time.Millisecond), BackendTLS: tlsCfg})
			// A connection to each first, through the gateway's own
			// transport: else, on a loaded machine, the primary may still
			// be in its TLS handshake when the hedge wins, and be
			// cancelled before its backend sees it.
			for _, u := range backends {
				req, _ := http.NewRequest(http.MethodGet, u+"/warm", nil)
				resp, err := g.base.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if resp, body := get(t, front.URL+"/slow"); resp.StatusCode != 200 || body == "" {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
			var l seen
			select {
			case l = <-loser:
			case <-time.After(5 * time.Second):
				t.Fatal("the loser never saw its cancellation")
			}
			if l.proto != c.proto {
				t.Fatalf("the loser's request came over %s, want %s", l.proto, c.proto)
			}
			if _, err := g.Reload(Config{Backends: []string{l.b.URL}, Policy: fixedPolicy(time.Second), BackendTLS: tlsCfg}); err != nil {
				t.Fatal(err)
			}
			resp, remote := get(t, front.URL+"/fast")
			if resp.StatusCode != 200 || l.b.hits.Load() != 3 {
				t.Fatalf("%d %q; the loser had %d requests, want 3 (warm, slow, fast)", resp.StatusCode, remote, l.b.hits.Load())
			}
			if reused := remote == l.remote; reused != c.reused {
				t.Errorf("the loser's request came from %s, the next from %s: reused %v, want %v", l.remote, remote, reused, c.reused)
			}
			want := int32(1)
			if !c.reused {
				want = 2
			}
			if n := tbs[l.b].conns.Load(); n != want {
				t.Errorf("the loser accepted %d connections, want %d", n, want)
			}
		})
	}
}

// Reload puts a new BackendTLS in force for new connections: a gateway
// that trusted the wrong CA answers once it trusts the right one. The
// same tls.Config reloaded changes nothing.
func TestLoopbackBackendTLSReload(t *testing.T) {
	ca, other := testpki.NewCA(t, "replicas"), testpki.NewCA(t, "elsewhere")
	b := newTLSBackend(t, "r", ca.Issue(t, testpki.Leaf{}).TLS, nil, answerNameProto)
	wrong := &tls.Config{RootCAs: other.Pool()}
	g, front := newGateway(t, Config{Policy: oneAttempt(), BackendTLS: wrong}, b.backend)
	if resp, body := get(t, front.URL+"/x"); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("%d %q, want 502", resp.StatusCode, body)
	}
	inForce := g.tls.cfg.Load()
	if _, err := g.Reload(Config{Backends: []string{b.URL}, Policy: oneAttempt(), BackendTLS: wrong}); err != nil {
		t.Fatal(err)
	}
	if g.tls.cfg.Load() != inForce {
		t.Error("reloading the same tls.Config replaced the one in force (and its session cache)")
	}
	if _, err := g.Reload(Config{Backends: []string{b.URL}, Policy: oneAttempt(), BackendTLS: &tls.Config{RootCAs: ca.Pool()}}); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, front.URL+"/x"); resp.StatusCode != 200 || body != "r HTTP/2.0" {
		t.Fatalf("after reload: %d %q", resp.StatusCode, body)
	}
}

// http:// and https:// backends may be mixed, with a warning, once: at
// start, or when a reload mixes what was not.
func TestMixedSchemesWarned(t *testing.T) {
	logs := &syncBuffer{}
	cfg := Config{Backends: []string{"http://127.0.0.1:1", "https://127.0.0.1:2"}, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	const warning = "backends mix http:// and https://"
	if logs.count(warning) != 1 {
		t.Fatalf("log:\n%s", logs.b.String())
	}
	cfg.Backends = append(cfg.Backends, "https://127.0.0.1:3")
	if _, err := g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Backends = []string{"https://127.0.0.1:2"}
	if _, err := g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if logs.count(warning) != 1 {
		t.Fatalf("warned again while mixed, or when not: \n%s", logs.b.String())
	}
	cfg.Backends = []string{"HTTP://127.0.0.1:1", "https://127.0.0.1:2"}
	if _, err := g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if logs.count(warning) != 2 {
		t.Fatalf("not warned when mixed again:\n%s", logs.b.String())
	}
}

// Failures of TLS are told from other transport failures by crypto/tls's
// and crypto/x509's error types, through any wrapping; a cancellation
// stays uncounted even during a handshake.
func TestFailureReasonTLS(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("net/http: %w", err) }
	for _, c := range []struct {
		err  error
		want string
	}{
		{&handshakeError{"a:1", errors.New("tls: handshake failure")}, failTLS},
		{wrap(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), failTLS},
		{wrap(x509.CertificateInvalidError{Reason: x509.Expired}), failTLS},
		{wrap(x509.HostnameError{Host: "a"}), failTLS},
		{wrap(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), failTLS},
		{wrap(&net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}), failTLS},
		{wrap(&net.OpError{Op: "dial", Err: errors.New("connection refused")}), failTransport},
		{wrap(io.ErrUnexpectedEOF), failTransport},
		{&handshakeError{"a:1", context.Canceled}, ""},
		{&handshakeError{"a:1", context.DeadlineExceeded}, failTimeout},
	} {
		if got := failureReason(nil, c.err); got != c.want {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
}
