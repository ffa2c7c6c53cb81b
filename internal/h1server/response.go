package h1server

import (
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// bufferBeforeChunking is how much of a body without a declared length
// is held to announce its length when the handler ends, rather than
// chunk it (net/http holds 2 KiB).
const bufferBeforeChunking = 4 << 10

// maxPostHandlerReadBytes is how much of a request body the handler left
// unread is read and dropped to keep the connection (net/http's).
const maxPostHandlerReadBytes = 256 << 10

// response is a connection's http.ResponseWriter, reset per request.
type response struct {
	c      *conn
	req    *http.Request
	header http.Header
	body   requestBody

	status      int   // 0 until WriteHeader
	committed   bool  // the header block is in the connection's buffer
	chunked     bool  // the body goes in chunks
	toClose     bool  // the body is delimited by the connection's close (HTTP/1.0)
	closeAfter  bool  // close the connection after this answer
	clen        int64 // declared Content-Length, -1 if none
	written     int64 // body bytes the handler wrote
	err         error // a write to the connection failed
	handlerDone bool

	isHEAD, http11, wantsClose, wants10KeepAlive bool

	pending []byte // body held before the header is committed (bufferBeforeChunking)
	scratch []byte // the header block under construction
	dateSec int64
	date    []byte
}

func (w *response) reset(req *http.Request) {
	clear(w.header)
	w.req, w.body = req, requestBody{w: w}
	w.status, w.committed, w.chunked, w.toClose, w.closeAfter = 0, false, false, false, false
	w.clen, w.written, w.err, w.handlerDone = -1, 0, nil, false
	w.isHEAD, w.http11 = req.Method == http.MethodHead, req.ProtoAtLeast(1, 1)
	// The request's tokens as net/http's server reads them, which it does
	// two ways: close in any Connection line's list (req.Close), or as a
	// word of the first; keep-alive as a word of the first only. A wider
	// reading could keep a connection that net/http would close, and
	// serve what follows as a request.
	conn := req.Header.Get("Connection")
	w.wantsClose = req.Close || hasToken(conn, "close")
	w.wants10KeepAlive = req.ProtoMajor == 1 && req.ProtoMinor == 0 && hasToken(conn, "keep-alive")
	if w.pending == nil {
		w.pending = make([]byte, 0, bufferBeforeChunking)
	}
	w.pending = w.pending[:0]
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic("h1server: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if w.status != 0 {
		w.c.s.logf("h1server: superfluous response.WriteHeader call (%d after %d)", code, w.status)
		return
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.writeInformational(code)
		return
	}
	w.status = code
	if cl := w.header.Get("Content-Length"); cl != "" {
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil && v >= 0 {
			w.clen = v
		} else {
			w.c.s.logf("h1server: invalid Content-Length of %q", cl)
			delete(w.header, "Content-Length")
		}
	}
}

// writeInformational sends a 1xx answer at once, as net/http does.
func (w *response) writeInformational(code int) {
	b := appendStatusLine(w.scratch[:0], w.http11, code)
	b = appendHeader(b, w.header, nil)
	b = append(b, "\r\n"...)
	w.scratch = b
	w.c.bw.Write(b)
	if err := w.c.bw.Flush(); err != nil {
		w.err = err
	}
}

func (w *response) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.clen != -1 && w.written+int64(len(p)) > w.clen {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if w.err != nil {
		return 0, w.err
	}
	if !w.committed {
		if len(w.pending)+len(p) <= cap(w.pending) {
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		w.commit(p)
	}
	if w.isHEAD {
		return len(p), nil
	}
	if err := w.writeBody(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *response) WriteString(s string) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	// Without Write's conversion to []byte where it fits the pending buffer.
	if !w.committed && len(w.pending)+len(s) <= cap(w.pending) && w.status != 0 && bodyAllowed(w.status) &&
		(w.clen == -1 || w.written+int64(len(s)) <= w.clen) && w.err == nil {
		w.pending = append(w.pending, s...)
		w.written += int64(len(s))
		return len(s), nil
	}
	return w.Write([]byte(s))
}

// writeBody writes p to the connection, framed.
func (w *response) writeBody(p []byte) error {
	bw := w.c.bw
	if w.chunked {
		bw.WriteString(strconv.FormatInt(int64(len(p)), 16))
		bw.WriteString("\r\n")
	}
	bw.Write(p)
	if w.chunked {
		bw.WriteString("\r\n")
	}
	if bw.Buffered() == 0 || bw.Available() > 0 {
		return nil
	}
	return w.fail(bw.Flush())
}

func (w *response) fail(err error) error {
	if err != nil && w.err == nil {
		w.err = err
		w.closeAfter = true
	}
	return err
}

// commit writes the header block to the connection's buffer, then what
// the handler wrote before it; next, if not nil, is the write that
// overflowed the pending buffer (for sniffing; the caller writes it).
func (w *response) commit(next []byte) {
	w.committed = true
	h := w.header
	code := w.status
	te := h.Get("Transfer-Encoding")
	hasTE := te != ""
	var setCL, setType, setConn string
	if w.handlerDone && !hasTE && bodyAllowed(code) && w.clen == -1 && (!w.isHEAD || len(w.pending) > 0) {
		w.clen = int64(len(w.pending))
		setCL = strconv.Itoa(len(w.pending))
	}
	keepAlives := w.c.s.keepAlives()
	if w.wants10KeepAlive && keepAlives && h.Get("Content-Length") != "" && strings.EqualFold(h.Get("Connection"), "keep-alive") {
		w.closeAfter = false
	}
	hasCL := w.clen != -1
	if w.wants10KeepAlive && (w.isHEAD || hasCL || !bodyAllowed(code)) {
		if _, ok := h["Connection"]; !ok {
			setConn = "keep-alive"
		}
	} else if !w.http11 || w.wantsClose {
		w.closeAfter = true
	}
	if hasToken(h.Get("Connection"), "close") || !keepAlives {
		w.closeAfter = true
	}
	if w.body.rc != http.NoBody && !w.closeAfter {
		w.discardBody()
	}
	var skipBuf [4]string
	skip := skipBuf[:0]
	if bodyAllowed(code) {
		_, haveType := h["Content-Type"]
		if !haveType && !hasTE && h.Get("Content-Encoding") == "" {
			if sniff := w.sniffable(next); len(sniff) > 0 {
				setType = http.DetectContentType(sniff)
			}
		}
	} else {
		skip = append(skip, "Content-Length", "Transfer-Encoding")
		if code == http.StatusNotModified {
			skip = append(skip, "Content-Type")
		}
	}
	if hasCL && hasTE && te != "identity" {
		w.c.s.logf("h1server: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", te, w.clen)
		skip = append(skip, "Content-Length")
		hasCL = false
		w.clen = -1
	}
	switch {
	case w.isHEAD || !bodyAllowed(code):
		skip = append(skip, "Transfer-Encoding")
	case hasCL:
		skip = append(skip, "Transfer-Encoding")
	case w.http11 && hasTE && te == "identity":
		w.toClose, w.closeAfter = true, true
		skip = append(skip, "Transfer-Encoding")
	case w.http11:
		w.chunked = true
		skip = append(skip, "Transfer-Encoding", "Content-Length")
	default:
		w.toClose, w.closeAfter = true, true
		skip = append(skip, "Transfer-Encoding")
	}
	if w.closeAfter && (!keepAlives || !hasToken(h.Get("Connection"), "close")) {
		skip = append(skip, "Connection")
		setConn = ""
		if w.http11 {
			setConn = "close"
		}
	}

	b := appendStatusLine(w.scratch[:0], w.http11, code)
	b = appendHeader(b, h, skip)
	if setType != "" {
		b = append(append(append(b, "Content-Type: "...), setType...), "\r\n"...)
	}
	if _, ok := h["Date"]; !ok {
		b = append(append(append(b, "Date: "...), w.httpDate()...), "\r\n"...)
	}
	if setCL != "" {
		b = append(append(append(b, "Content-Length: "...), setCL...), "\r\n"...)
	}
	if w.chunked {
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	if setConn != "" {
		b = append(append(append(b, "Connection: "...), setConn...), "\r\n"...)
	}
	b = append(b, "\r\n"...)
	w.scratch = b
	w.c.bw.Write(b)
	if len(w.pending) > 0 && !w.isHEAD && bodyAllowed(code) {
		w.writeBody(w.pending)
	}
	w.pending = w.pending[:0]
}

// sniffable returns up to 512 bytes of the body's start, for
// http.DetectContentType.
func (w *response) sniffable(next []byte) []byte {
	if len(next) == 0 || len(w.pending) >= 512 {
		return w.pending
	}
	n := min(512-len(w.pending), len(next))
	return append(w.pending[:len(w.pending):len(w.pending)], next[:n]...)
}

// httpDate is the Date header's value, formatted once a second.
func (w *response) httpDate() []byte {
	now := time.Now()
	if s := now.Unix(); s != w.dateSec || w.date == nil {
		w.dateSec = s
		w.date = now.UTC().AppendFormat(w.date[:0], http.TimeFormat)
	}
	return w.date
}

// Flush sends what was written so far (http.Flusher).
func (w *response) Flush() { w.FlushError() }

// FlushError is Flush with its error, which http.ResponseController uses.
func (w *response) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(nil)
	}
	if w.err != nil {
		return w.err
	}
	return w.fail(w.c.bw.Flush())
}

// SetWriteDeadline moves the write deadline of the connection, for
// http.ResponseController.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.c.writeMoved = true
	return w.c.nc.SetWriteDeadline(t)
}

// SetReadDeadline moves the read deadline of the connection, for
// http.ResponseController (the request body's reads).
func (w *response) SetReadDeadline(t time.Time) error { return w.c.nc.SetReadDeadline(t) }

// finish completes the answer once the handler has returned: the header
// if not yet sent, the held body, the chunked end. Whether the
// connection may be kept is then in closeAfter and err.
func (w *response) finish() {
	w.handlerDone = true
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(nil)
	}
	if w.chunked && !w.isHEAD && w.err == nil {
		w.c.bw.WriteString("0\r\n\r\n")
	}
	if w.clen != -1 && bodyAllowed(w.status) && !w.isHEAD && w.written != w.clen {
		w.closeAfter = true // the client waits for bytes that will not come
	}
	if w.toClose {
		w.closeAfter = true
	}
	if w.body.rc != http.NoBody && !w.body.eof {
		w.closeAfter = true // unread, and not discarded: its end is unknown
	}
	if w.closeAfter || w.err != nil {
		w.fail(w.c.bw.Flush())
		if w.body.rc != http.NoBody && !w.body.eof {
			w.c.closeWriteAndWait()
		}
	}
}

// discardBody reads and drops a request body the handler left, up to
// maxPostHandlerReadBytes, to keep the connection; beyond, or on an
// error, the connection closes.
func (w *response) discardBody() {
	if w.body.eof {
		return
	}
	if w.body.expect && !w.body.sentContinue {
		w.closeAfter = true // the client waits for our word to send it: it never will
		return
	}
	_, err := io.CopyN(io.Discard, &w.body, maxPostHandlerReadBytes+1)
	if err != io.EOF {
		w.closeAfter = true
	}
}

// requestBody is a request's body as the handler reads it: it sends 100
// Continue before the first read when the client expects it, and notes
// its end.
type requestBody struct {
	w                    *response
	rc                   io.ReadCloser
	expect, sentContinue bool
	eof                  bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	if b.expect && !b.sentContinue && !b.w.committed {
		b.sentContinue = true
		bw := b.w.c.bw
		if b.w.http11 {
			bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			b.w.fail(bw.Flush())
		}
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	} else if err != nil {
		b.w.closeAfter = true
	}
	return n, err
}

func (b *requestBody) Close() error { return nil }

// handlerBody is the request body as the handler gets it, one per
// request: a read after the handler returned fails, as net/http's
// (a Transport may read a request's body from its own goroutine after
// RoundTrip returns), rather than take the connection's next bytes (the
// next request's) from a reader perhaps back in the pool.
type handlerBody struct {
	mu   sync.Mutex // held by a read: end waits for it
	b    *requestBody
	done bool
}

func (h *handlerBody) Read(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return 0, http.ErrBodyReadAfterClose
	}
	return h.b.Read(p)
}

func (h *handlerBody) Close() error { return nil }

// end marks the handler returned, once a read under way has.
func (h *handlerBody) end() {
	h.mu.Lock()
	h.done = true
	h.mu.Unlock()
}

var (
	_ http.Flusher    = (*response)(nil)
	_ io.StringWriter = (*response)(nil)
)

func bodyAllowed(code int) bool {
	return !(code >= 100 && code <= 199 || code == http.StatusNoContent || code == http.StatusNotModified)
}

func appendStatusLine(b []byte, http11 bool, code int) []byte {
	if http11 {
		b = append(b, "HTTP/1.1 "...)
	} else {
		b = append(b, "HTTP/1.0 "...)
	}
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(code)...)
	return append(b, "\r\n"...)
}

// appendHeader appends h's lines but those named in skip, as net/http
// writes them: invalid names left out, CR and LF in values turned to
// spaces, values trimmed.
func appendHeader(b []byte, h http.Header, skip []string) []byte {
	for k, vs := range h {
		if contains(skip, k) || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vs {
			v = textproto.TrimString(v)
			b = append(b, k...)
			b = append(b, ": "...)
			for i := 0; i < len(v); i++ {
				if c := v[i]; c == '\r' || c == '\n' {
					b = append(b, ' ')
				} else {
					b = append(b, c)
				}
			}
			b = append(b, "\r\n"...)
		}
	}
	return b
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hasToken reports whether token is a word of v: between its ends,
// spaces, tabs or commas, in any ASCII case (net/http's reading of a
// Connection value, which finds "close" in "foo close" too).
func hasToken(v, token string) bool {
	for i := 0; i+len(token) <= len(v); i++ {
		if (i == 0 || isTokenBoundary(v[i-1])) && (i+len(token) == len(v) || isTokenBoundary(v[i+len(token)])) &&
			asciiEqualFold(v[i:i+len(token)], token) {
			return true
		}
	}
	return false
}

func isTokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }

// asciiEqualFold is strings.EqualFold for ASCII letters only: "\u212A"
// (the Kelvin sign) is not "k" here, as it is not to net/http.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}
