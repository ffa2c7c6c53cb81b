package h1server

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Past its header, a request is bounded by ReadTimeout alone, as net/http
// bounds it: with none, by nothing. The header's deadline must not cut a
// slow body short, nor end the background read of a long request (which
// would cancel its context as if the client had left).
func TestHeaderDeadlineEndsWithTheHeader(t *testing.T) {
	const d = 50 * time.Millisecond
	addr := serve(t, &Server{ReadHeaderTimeout: d, WatchAfter: time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			io.WriteString(w, strconv.Itoa(len(b)))
			return
		}
		time.Sleep(3 * d) // the watch reads past the header's deadline
		if err := r.Context().Err(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "still here")
	}))
	c, br := dial(t, addr)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\n")
	time.Sleep(3 * d)
	io.WriteString(c, "body")
	if resp, body := readResponse(t, br, "POST"); resp.StatusCode != 200 || body != "4" {
		t.Errorf("a body sent after the header's deadline: %d %q, want 200 \"4\"", resp.StatusCode, body)
	}
	c, br = dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != "still here" {
		t.Errorf("a request running past the header's deadline: %d %q, want its context alive", resp.StatusCode, body)
	}
}

// A deadline a handler moves (http.ResponseController) is its request's:
// the next request on the connection starts without it, as net/http's
// does, on a server with no time limits of its own.
func TestMovedDeadlinesEndWithTheRequest(t *testing.T) {
	addr := serve(t, &Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		switch r.URL.Path {
		case "/read":
			rc.SetReadDeadline(time.Now())
		case "/write":
			rc.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		}
		io.WriteString(w, r.URL.Path)
	}))
	for _, path := range []string{"/read", "/write"} {
		c, br := dial(t, addr)
		// The next request's start arrives with this one (pipelined), its
		// end later: it is read, and answered, past the moved deadlines.
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: h\r\n\r\nGET /next HTTP/1.1\r\n")
		if _, body := readResponse(t, br, "GET"); body != path {
			t.Fatalf("%q, want %q", body, path)
		}
		time.Sleep(50 * time.Millisecond)
		io.WriteString(c, "Host: h\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Errorf("after a handler moved its %s deadline, the next request: %v", path[1:], err)
			continue
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "/next" {
			t.Errorf("%q, want /next", b)
		}
	}
}
