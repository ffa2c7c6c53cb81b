package main

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/internal/testpki"
)

// TLS flags that go in pairs are refused alone, and files that do not load
// are refused at start with a message naming the flag: exit 2.
func TestServeTLSFlagsRefused(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	dir := t.TempDir()
	cert, key := ca.Issue(t, testpki.Leaf{}).WriteFiles(t, dir, "one")
	_, otherKey := ca.Issue(t, testpki.Leaf{}).WriteFiles(t, dir, "two")
	notPEM := filepath.Join(dir, "not.pem")
	testpki.WriteFile(t, notPEM, []byte("not a certificate\n"))
	base := []string{"serve", "-backends", "https://127.0.0.1:1", "-listen", "127.0.0.1:0", "-admin", ""}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-tls-cert", cert}, "-tls-cert and -tls-key go together"},
		{[]string{"-tls-key", key}, "-tls-cert and -tls-key go together"},
		{[]string{"-backend-cert", cert}, "-backend-cert and -backend-key go together"},
		{[]string{"-tls-cert", cert, "-tls-key", otherKey}, "-tls-cert/-tls-key: gateway: TLS certificate " + cert + " and key " + otherKey + ": tls: private key does not match public key"},
		{[]string{"-tls-cert", cert, "-tls-key", filepath.Join(dir, "none.key")}, "no such file"},
		{[]string{"-backend-cert", cert, "-backend-key", otherKey}, "-backend-cert " + cert + " and -backend-key " + otherKey + ": tls: private key does not match public key"},
		{[]string{"-backend-ca", notPEM}, "-backend-ca " + notPEM + ": no PEM certificate in it"},
		{[]string{"-backend-ca", filepath.Join(dir, "none.pem")}, "-backend-ca: open"},
	} {
		code, _, stderr := runCmd(append(base, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 saying %q", c.args, code, stderr, c.want)
		}
	}
}

// tlsClient is a client that trusts ca and speaks HTTP/2 if the server
// does.
func tlsClient(t *testing.T, ca *testpki.CA) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// getTLS sends a GET with c and returns the answer's body, the name of the
// certificate the server showed, and whether the connection was reused.
func getTLS(t *testing.T, c *http.Client, url string) (body, cn string, reused bool, resp *http.Response) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}))
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
	return string(b), resp.TLS.PeerCertificates[0].Subject.CommonName, reused, resp
}

// protoBackend answers with the X-Forwarded-Proto it was sent.
func protoBackend(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Forwarded-Proto"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Clients over TLS get HTTP/2, and the replicas hear https. A new
// certificate written over the files is put in force without a signal:
// new connections get it, while a connection open keeps serving with the
// old one. A pair that does not load is logged, once, and the running
// certificate kept.
func TestServeTLSRotatesOnChange(t *testing.T) {
	// Restored after serve has stopped (cleanups run last in, first out).
	prev := tlsPoll
	t.Cleanup(func() { tlsPoll = prev })
	tlsPoll = 10 * time.Millisecond
	ca := testpki.NewCA(t, "ca")
	dir := t.TempDir()
	cert, key := ca.Issue(t, testpki.Leaf{CommonName: "one"}).WriteFiles(t, dir, "tls")
	s := startServed(t, "", "-backends", protoBackend(t), "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-tls-cert", cert, "-tls-key", key)
	s.waitLog(t, `msg="gateway listening" addr=\S+ tls=true`)
	url := "https://" + s.addr + "/x"
	old := tlsClient(t, ca)
	body, cn, _, resp := getTLS(t, old, url)
	if body != "https" || cn != "one" || resp.ProtoMajor != 2 {
		t.Fatalf("%s %q from %q, want HTTP/2 with X-Forwarded-Proto https from one", resp.Proto, body, cn)
	}

	two := ca.Issue(t, testpki.Leaf{CommonName: "two"})
	two.WriteFiles(t, dir, "tls")
	s.waitLog(t, `msg="TLS certificate reloaded: new connections get it" file=\S+ subject="CN=two"`)
	if _, cn, reused, _ := getTLS(t, tlsClient(t, ca), url); cn != "two" || reused {
		t.Errorf("a new connection got %q (reused %v), want two", cn, reused)
	}
	if _, cn, reused, _ := getTLS(t, old, url); cn != "one" || !reused {
		t.Errorf("the open connection: %q, reused %v; want it kept, with one", cn, reused)
	}

	s.mark = len(s.logs.String())
	testpki.WriteFile(t, cert, ca.Issue(t, testpki.Leaf{CommonName: "three"}).CertPEM) // the key is still two's
	s.waitLog(t, `level=ERROR msg="TLS certificate not reloaded; the one in force is kept" err=".*private key does not match public key"`)
	time.Sleep(10 * tlsPoll) // more polls of the same files
	if n := strings.Count(s.logs.String()[s.mark:], "TLS certificate not reloaded"); n != 1 {
		t.Errorf("refusal logged %d times, want once", n)
	}
	if _, cn, _, _ := getTLS(t, tlsClient(t, ca), url); cn != "two" {
		t.Errorf("after a bad pair, a new connection got %q, want two", cn)
	}
}

// SIGHUP reads the certificate files again, with or without a change of
// the configuration, and without waiting for the poll.
func TestServeTLSRotatesOnSIGHUP(t *testing.T) {
	// Restored after serve has stopped (cleanups run last in, first out).
	prev := tlsPoll
	t.Cleanup(func() { tlsPoll = prev })
	tlsPoll = time.Hour
	ca := testpki.NewCA(t, "ca")
	dir := t.TempDir()
	cert, key := ca.Issue(t, testpki.Leaf{CommonName: "one"}).WriteFiles(t, dir, "tls")
	s := startServed(t, "", "-backends", protoBackend(t), "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-tls-cert", cert, "-tls-key", key)
	ca.Issue(t, testpki.Leaf{CommonName: "two"}).WriteFiles(t, dir, "tls")
	if _, cn, _, _ := getTLS(t, tlsClient(t, ca), "https://"+s.addr+"/x"); cn != "one" {
		t.Fatalf("before SIGHUP: %q, want one", cn)
	}
	s.hup <- syscall.SIGHUP
	s.waitLog(t, `msg="configuration reloaded: nothing changed" trigger=SIGHUP`)
	if _, cn, _, _ := getTLS(t, tlsClient(t, ca), "https://"+s.addr+"/x"); cn != "two" {
		t.Errorf("after SIGHUP: %q, want two", cn)
	}
}

// Backends over https:// with the flags: the CA file verifies them, the
// client certificate answers a backend that asks for one, and the server
// name is verified and sent as SNI. A reload reads the files again: a
// wrong CA, refused (502), is replaced by the right one; a CA file that
// does not load is refused with the reload, and the running one kept.
func TestServeBackendTLSFlags(t *testing.T) {
	ca, other := testpki.NewCA(t, "replicas"), testpki.NewCA(t, "elsewhere")
	dir := t.TempDir()
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto+" "+r.TLS.ServerName+" "+r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	backend.TLS = &tls.Config{
		Certificates: []tls.Certificate{ca.Issue(t, testpki.Leaf{DNSNames: []string{"replica.internal"}}).TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool(),
	}
	backend.EnableHTTP2 = true
	backend.Config.ErrorLog = log.New(io.Discard, "", 0)
	backend.StartTLS()
	defer backend.Close()
	caFile := filepath.Join(dir, "ca.pem")
	testpki.WriteFile(t, caFile, other.PEM)
	clientCert, clientKey := ca.Issue(t, testpki.Leaf{CommonName: "gateway", Client: true}).WriteFiles(t, dir, "client")
	s := startServed(t, "", "-backends", backend.URL, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-attempts-per-request", "1",
		"-backend-ca", caFile, "-backend-cert", clientCert, "-backend-key", clientKey, "-backend-server-name", "replica.internal")
	if code, body, _ := do(t, "GET", "http://"+s.addr+"/x"); code != http.StatusBadGateway || !strings.Contains(body, "TLS with the backend failed") || strings.Contains(body, "authority") {
		t.Fatalf("wrong CA: %d %q, want 502 saying TLS failed, the why kept for the log", code, body)
	}
	s.waitLog(t, `level=WARN msg="backend TLS failed" replica=`+backend.URL+` err=".*unknown authority`)

	testpki.WriteFile(t, caFile, ca.PEM)
	s.hup <- syscall.SIGHUP
	s.waitLog(t, `msg="configuration reloaded: nothing changed" trigger=SIGHUP`)
	if code, body, _ := do(t, "GET", "http://"+s.addr+"/x"); code != 200 || body != "HTTP/2.0 replica.internal gateway" {
		t.Fatalf("right CA: %d %q, want 200 over HTTP/2 with SNI replica.internal and the client certificate", code, body)
	}

	s.mark = len(s.logs.String())
	testpki.WriteFile(t, caFile, []byte("garbage\n"))
	s.hup <- syscall.SIGHUP
	s.waitLog(t, `msg="reload failed; the running configuration is kept" trigger=SIGHUP err=".*-backend-ca \S+ no PEM certificate in it"`)
	if code, body, _ := do(t, "GET", "http://"+s.addr+"/x"); code != 200 {
		t.Errorf("after a refused reload: %d %q", code, body)
	}
}

// Backend TLS flags without an https:// backend apply to none: serve
// says so at start.
func TestServeWarnsBackendTLSUnused(t *testing.T) {
	log, _ := runServeLogged(t, "-backends", "http://127.0.0.1:1", "-backend-server-name", "replica.internal")
	log.waitFor(t, `the backend TLS flags apply to https:// backends, and none is configured`)
}
