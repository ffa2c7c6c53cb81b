package h1server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve serves h with s's settings on a loopback listener until the test
// ends, and returns its address.
func serve(t *testing.T, s *Server, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Handler = h
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return ln.Addr().String()
}

// dial opens a connection to addr, with a deadline of 5s.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c, bufio.NewReader(c)
}

// readResponse reads one answer to a request of method, and its body.
func readResponse(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) })

func TestHeaderLimit(t *testing.T) {
	addr := serve(t, &Server{MaxHeaderBytes: 1 << 10}, hello)
	c, br := dial(t, addr)
	io.WriteString(c, "GET /"+strings.Repeat("a", 6<<10)+" HTTP/1.1\r\nHost: h\r\n\r\n")
	resp, body := readResponse(t, br, "GET")
	if resp.StatusCode != 431 {
		t.Fatalf("%d %q, want 431", resp.StatusCode, body)
	}
}
