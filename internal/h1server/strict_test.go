package h1server

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// unsupportedTE tells http.ReadRequest's refusal of a transfer coding by
// the error's type, learned from ReadRequest: the refusals of two codings
// have it, and no other malformed request's error does. If a Go release
// gives its errors one type, or changes this one's, this fails.
func TestUnsupportedTEErrorType(t *testing.T) {
	read := func(headers string) error {
		_, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: h\r\n" + headers + "\r\n")))
		if err == nil {
			t.Fatalf("%q read without an error", headers)
		}
		return err
	}
	for _, h := range []string{"Transfer-Encoding: gzip\r\n", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "Transfer-Encoding: gzip, chunked\r\n"} {
		if err := read(h); !unsupportedTE(err) {
			t.Errorf("%q: %v (%T) not told as an unsupported transfer coding", h, err, err)
		}
	}
	for _, h := range []string{"Content-Length: x\r\n", "Content-Length: 1\r\nContent-Length: 2\r\n", "Bad Line\r\n", "Host: i\r\n"} {
		if err := read(h); unsupportedTE(err) {
			t.Errorf("%q: %v (%T) taken for an unsupported transfer coding", h, err, err)
		}
	}
}

// recorder is a handler that records the paths it serves.
type recorder struct {
	mu    sync.Mutex
	paths []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.Path)
	r.mu.Unlock()
	io.WriteString(w, "ok")
}

func (r *recorder) served() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

// servedOf writes req on a new connection to a server of a recorder, and
// checks the first answer's status and the paths served until the close.
func servedOf(t *testing.T, req string, code int, served []string) {
	t.Helper()
	rec := &recorder{}
	addr := serve(t, &Server{}, rec)
	conn, br := dial(t, addr)
	io.WriteString(conn, req)
	resp, body := readResponse(t, br, "GET")
	if resp.StatusCode != code {
		t.Errorf("%d %q; want %d", resp.StatusCode, body, code)
	}
	for { // what else is answered, until the close
		if _, err := http.ReadResponse(br, nil); err != nil {
			break
		}
	}
	if got := rec.served(); strings.Join(got, " ") != strings.Join(served, " ") {
		t.Errorf("served %q; want %q", got, served)
	}
}

// An HTTP/1.0 request with a Transfer-Encoding is refused, 400 and the
// connection closed, before its handler: http.ReadRequest drops the field
// and reads no body, so its chunked body would be served as the next
// request (RFC 9112 §6.1). One whose header block could not be looked at
// whole (larger than the buffer) is answered and its connection closed,
// keep-alive or not; HTTP/1.0 keep-alive goes on otherwise.
func TestHTTP10TransferEncoding(t *testing.T) {
	big := "X-Big: " + strings.Repeat("a", 5<<10) + "\r\n"
	for _, c := range []struct {
		name, req string
		code      int
		served    []string
	}{
		{"chunked", "GET /a HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\nGET /SMUG HTTP/1.0\r\n\r\n", 400, nil},
		{"any case", "GET /a HTTP/1.0\r\nconnection: keep-alive\r\ntransfer-encoding: gzip\r\nContent-Length: 0\r\n\r\nGET /SMUG HTTP/1.0\r\n\r\n", 400, nil},
		{"header block beyond the buffer", "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n" + big + "Transfer-Encoding: chunked\r\n\r\nGET /SMUG HTTP/1.0\r\n\r\n", 200, []string{"/a"}},
		{"keep-alive", "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n", 200, []string{"/a", "/b"}},
		{"HTTP/1.1 keeps its chunked body", "GET /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 200, []string{"/a", "/b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			servedOf(t, c.req, c.code, c.served)
		})
	}
}

// Expect: one 100-continue is honoured (a request without a body gets no
// 100); any other value, empty or with other tokens, is refused 417, where
// net/http finds the token anywhere and ignores an empty one. Connection
// tokens are read as net/http reads them: a non-ASCII look-alike of
// keep-alive keeps nothing.
func TestExpectAndConnectionTokens(t *testing.T) {
	for _, c := range []struct {
		name, req string
		code      int
		served    []string
	}{
		{"100-continue", "GET /a HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue \r\nConnection: close\r\n\r\n", 200, []string{"/a"}},
		{"among others", "GET /a HTTP/1.1\r\nHost: h\r\nExpect: foo 100-continue\r\n\r\n", 417, nil},
		{"two lines", "GET /a HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nExpect: 100-continue\r\n\r\n", 417, nil},
		{"empty", "GET /a HTTP/1.1\r\nHost: h\r\nExpect: \r\n\r\n", 417, nil},
		{"Kelvin sign", "GET /a HTTP/1.0\r\nConnection: \u212Aeep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n", 200, []string{"/a"}},
		{"no-break space", "GET /a HTTP/1.0\r\nConnection: \u00a0keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n", 200, []string{"/a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			servedOf(t, c.req, c.code, c.served)
		})
	}
}
