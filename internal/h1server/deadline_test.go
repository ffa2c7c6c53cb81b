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
