package h1server

import (
	"bufio"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/tailgate-dev/tailgate/internal/h1head"
)

// readFast reads the request at the start of br's buffer when it is of
// the common kind, and returns it as http.ReadRequest would: an HTTP/1.1
// GET or HEAD for a path, its header block whole in the buffer and read by
// h1head, one Host field, no body announced (no Content-Length or
// Transfer-Encoding), no Pragma (which ReadRequest rewrites). Nil leaves
// br as it was, for ReadRequest: its answer and its errors stand for
// everything else (FuzzFastRequest checks both ways on arbitrary
// bytes). Its header's fields are valid names and values, checked as it
// was read.
func readFast(br *bufio.Reader) *http.Request {
	line, fields, n := h1head.Peek(br)
	if n == 0 {
		return nil
	}
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	// GET and HEAD: the others nearly always carry a body (a search's
	// POST), which ReadRequest would read again.
	if !ok1 || !ok2 || proto != "HTTP/1.1" || method != http.MethodGet && method != http.MethodHead ||
		target == "" || target[0] != '/' {
		return nil
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil
	}
	h, ok := h1head.Fields(fields, requestLeft)
	if !ok {
		return nil
	}
	host := h["Host"]
	if len(host) != 1 {
		return nil
	}
	delete(h, "Host")
	br.Discard(n)
	return &http.Request{
		Method:     method,
		URL:        u,
		Proto:      proto,
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Body:       http.NoBody,
		Host:       host[0],
		RequestURI: target,
		Close:      httpguts.HeaderValuesContainsToken(h["Connection"], "close"),
	}
}

// requestLeft: the fields whose requests readFast leaves to ReadRequest:
// a body's framing, and Pragma, which ReadRequest rewrites.
var requestLeft = []string{"Content-Length", "Transfer-Encoding", "Pragma"}
