package h1

import (
	"bufio"
	"io"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/tailgate-dev/tailgate/internal/h1head"
)

// readFast reads the response at the start of br's buffer when it is of
// the common kind, and returns it as http.ReadResponse would, but for
// its Body: an HTTP/1.1 answer to a GET ("" included), its status 200 or more but 204
// and 304, its header block whole in the buffer and read by h1head, one
// Content-Length, no Transfer-Encoding, no Pragma (which ReadResponse
// rewrites). Its Body is http.NoBody for a length of 0, else nil: the
// caller reads ContentLength bytes from br (see body). Nil leaves br as
// it was, for ReadResponse: its answer and its errors stand for
// everything else (FuzzFastResponse checks both ways on arbitrary
// bytes).
func readFast(br *bufio.Reader, req *http.Request) *http.Response {
	if req.Method != http.MethodGet && req.Method != "" {
		return nil // HEAD's answer has no body whatever its length says
	}
	line, fields, n := h1head.Peek(br)
	if n == 0 {
		return nil
	}
	status, ok := strings.CutPrefix(line, "HTTP/1.1 ")
	if !ok || len(status) < 3 || len(status) > 3 && status[3] != ' ' || !httpguts.ValidHeaderFieldValue(status) {
		return nil // (a reason is held to a field value's bytes)
	}
	code, ok := decimal(status[:3])
	if !ok || code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil
	}
	h, ok := h1head.Fields(fields, responseLeft)
	if !ok {
		return nil
	}
	cl := h["Content-Length"]
	if len(cl) != 1 {
		return nil
	}
	length, ok := decimal(cl[0])
	if !ok {
		return nil
	}
	closes := httpguts.HeaderValuesContainsToken(h["Connection"], "close")
	if closes {
		delete(h, "Connection") // as ReadResponse
	}
	br.Discard(n)
	resp := &http.Response{
		Status:        status,
		StatusCode:    int(code),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: length,
		Close:         closes,
		Request:       req,
	}
	if length == 0 {
		resp.Body = http.NoBody
	}
	return resp
}

// responseLeft: the fields whose answers readFast leaves to
// ReadResponse: chunked framing, and Pragma, which ReadResponse rewrites.
var responseLeft = []string{"Transfer-Encoding", "Pragma"}

// decimal parses s, 1 to 18 ASCII digits (ParseUint's range for a
// Content-Length, and more than any body).
func decimal(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// readLength reads from br at most *remain bytes of a body of known
// length, as net/http's body does: io.EOF with its last bytes, and
// io.ErrUnexpectedEOF when the stream ends before them (and at every
// read after: net/http's then says io.EOF, which body would take for a
// body read whole).
func readLength(br *bufio.Reader, remain *int64, p []byte) (int, error) {
	if *remain == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > *remain {
		p = p[:*remain]
	}
	n, err := br.Read(p)
	*remain -= int64(n)
	switch {
	case *remain == 0 && n > 0:
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}
