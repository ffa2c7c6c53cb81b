package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// An HTTP/1.0 request with a Transfer-Encoding never has its would-be
// chunked body served as a request, on either server of plain-HTTP
// clients: net/http's drops the field, reads no body and would parse what
// follows as the next request (RFC 9112 §6.1 says the connection must
// close). internal/h1server refuses it, 400 and closed; on net/http's the
// gateway cannot see the field, and closes the connection after every
// HTTP/1.0 answer. HTTP/1.0 keep-alive is kept by h1server only.
func TestHTTP10TransferEncodingNeverSmuggled(t *testing.T) {
	for _, c := range []struct {
		plain     string
		status    int      // the first answer's
		kept      bool     // an HTTP/1.0 keep-alive connection serves a second request
		forwarded []string // paths the replica sees
	}{
		{plainH1, 400, true, nil},
		{plainNetHTTP, 200, false, []string{"/a"}},
	} {
		t.Run(c.plain, func(t *testing.T) {
			a := newBackend(t, "a", func(b *backend, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
			g, err := New(Config{Backends: []string{a.URL}, Timeout: clientTimeout, Policy: hedge.Policy{MaxAttempts: 1}, DisableProbation: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			addr := servePlain(t, g, c.plain)
			answers := func(raw string) []int {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(clientTimeout))
				io.WriteString(conn, raw)
				br := bufio.NewReader(conn)
				var codes []int
				for {
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						return codes // closed
					}
					io.Copy(io.Discard, resp.Body)
					codes = append(codes, resp.StatusCode)
				}
			}
			codes := answers("GET /a HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" +
				"GET /SMUG HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
			if len(codes) != 1 || codes[0] != c.status {
				t.Errorf("answers %v; want one, %d, and the connection closed", codes, c.status)
			}
			var seen []string
			for _, r := range a.requests() {
				seen = append(seen, r.URL.Path)
			}
			if len(seen) != len(c.forwarded) || len(seen) > 0 && seen[0] != c.forwarded[0] {
				t.Errorf("the replica saw %q; want %q", seen, c.forwarded)
			}
			// Without a Transfer-Encoding.
			codes = answers("GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /c HTTP/1.0\r\n\r\n")
			if kept := len(codes) == 2; kept != c.kept {
				t.Errorf("HTTP/1.0 keep-alive: answers %v; want it kept %v", codes, c.kept)
			}
			waitIdle(t, g)
		})
	}
}
