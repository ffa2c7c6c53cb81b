package gateway

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// headersTooLarge tells net/http's refusal of a response header block
// over the limit by its messages, having no sentinel to test: over
// HTTP/1.1 (https:// backends) and HTTP/2 (h2c, and https:// by ALPN).
// This pins them: when a Go release changes either, it fails, and
// headersTooLarge must follow. (internal/h1's, for http:// backends, is
// told by h1.ErrHeaderLimit.)
func TestNetHTTPHeaderLimitMessages(t *testing.T) {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 35 {
			w.Header().Set("X-Big-"+strconv.Itoa(i), strings.Repeat("a", 2<<10))
		}
		io.WriteString(w, "ok")
	}))
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.Start()
	defer s.Close()
	for _, c := range []struct {
		name  string
		proto string
	}{{"HTTP/1.1", ProtocolHTTP1}, {"h2c", ProtocolH2C}} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Config{Backends: []string{s.URL}, BackendProtocol: c.proto}.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			tr := newStdBase(cfg, newBackendTLS(dialBackend, nil))
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("70 KiB of headers over %s: %s; want net/http to refuse them", c.name, resp.Status)
			}
			if !headersTooLarge(err) {
				t.Errorf("net/http's refusal %q is not told as headers too large: has Go changed its message?", err)
			}
		})
	}
}
