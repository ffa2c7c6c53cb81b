package h1server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/tailgate-dev/tailgate/internal/opctx"
)

// conn is one client connection: its buffers, its ResponseWriter and
// the watch on its client, all reused from request to request.
type conn struct {
	s      *Server
	nc     net.Conn
	remote string
	base   context.Context // the requests' parent: LocalAddrContextKey
	cr     connReader
	br     *bufio.Reader
	bw     *bufio.Writer
	w      response

	mu     sync.Mutex
	cond   sync.Cond
	idle   bool      // waiting for a request's first byte; guarded by mu
	fresh  bool      // no request yet; guarded by mu
	opened time.Time // when accepted

	writeMoved bool // a handler set the write deadline (WriteTimeout zero: it stays until cleared)
	// unvetted: the current request is HTTP/1.0 and its header block
	// could not be looked at for a Transfer-Encoding (see preScan): its
	// connection closes after the answer.
	unvetted bool

	// The watch on the client while a handler runs (see watch.go).
	watch    *time.Timer
	reqCtx   *opctx.Ctx // the current (or last) request's, cancelled by the watch and Close; guarded by mu
	bg       bgState    // guarded by mu
	stopping bool       // the request ended: a read error is ours; guarded by mu
}

// connReader is what the bufio.Reader reads: the connection, bounded
// while a header block is read, with the byte a background read took.
type connReader struct {
	nc      net.Conn
	remain  int64 // bytes left before the header limit; < 0: no limit
	hit     bool  // the limit was reached
	one     [1]byte
	hasByte bool
	// held: answers to pipelined requests, to send before a read from
	// the network that may wait (the next request is not all here); set
	// while a header block is read.
	held *bufio.Writer
}

func (r *connReader) Read(p []byte) (int, error) {
	if r.remain == 0 {
		r.hit = true
		return 0, io.EOF
	}
	if r.remain > 0 && int64(len(p)) > r.remain {
		p = p[:r.remain]
	}
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if r.hasByte {
		p[0], r.hasByte, n = r.one[0], false, 1
	} else {
		if r.held != nil {
			r.held.Flush() // an error sticks: the next answer's write fails
			r.held = nil
		}
		n, err = r.nc.Read(p)
	}
	if r.remain > 0 {
		r.remain -= int64(n)
	}
	return n, err
}

var bufPool = sync.Pool{New: func() any {
	return &buffers{br: bufio.NewReaderSize(nil, 4<<10), bw: bufio.NewWriterSize(nil, 4<<10)}
}}

type buffers struct {
	br *bufio.Reader
	bw *bufio.Writer
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, fresh: true, opened: time.Now()}
	c.cond.L = &c.mu
	c.cr.nc, c.cr.remain = nc, -1
	if ra := nc.RemoteAddr(); ra != nil {
		c.remote = ra.String()
	}
	c.base = context.WithValue(context.Background(), http.LocalAddrContextKey, nc.LocalAddr())
	c.w.c = c
	c.w.header = http.Header{}
	return c
}

// serve reads and answers requests until the connection ends.
func (c *conn) serve() {
	b := bufPool.Get().(*buffers)
	b.br.Reset(&c.cr)
	b.bw.Reset(c.nc)
	c.br, c.bw = b.br, b.bw
	c.watch = time.AfterFunc(time.Hour, c.backgroundRead)
	c.watch.Stop()
	defer func() {
		c.watch.Stop()
		c.bw.Flush() // answers to pipelined requests still held, as net/http's final flush
		c.nc.Close()
		c.s.setState(c.nc, http.StateClosed)
		b.br.Reset(nil)
		b.bw.Reset(nil)
		c.br, c.bw = nil, nil
		bufPool.Put(b)
		c.s.untrack(c)
	}()
	first := true
	for {
		ok, waited := c.waitForRequest(first)
		if !ok {
			return
		}
		if first || waited {
			c.s.setState(c.nc, http.StateActive)
		}
		t0 := time.Now()
		req, err := c.readRequest(first, t0)
		first = false
		if err != nil {
			c.answerError(err)
			return
		}
		if c.s.isClosing() {
			return // as net/http: a request read after Shutdown began is dropped
		}
		if !c.serveRequest(req, t0) {
			return
		}
		if !c.s.keepAlives() {
			return
		}
	}
}

// waitForRequest waits for the next request's first byte: bounded by
// the header timeout on a new connection, by the idle timeout between
// requests. Answers written so far leave first, in one write for all the
// requests pipelined before it. Not ok: the connection is to close.
// Waited: it was reported idle, once those answers had left (a ConnState
// hook may close an idle connection: internal/connlimit does); a
// pipelined request already here is not waited for.
func (c *conn) waitForRequest(first bool) (ok, waited bool) {
	// The header limit counts from here: what is read to wait goes into
	// the header block.
	c.cr.remain, c.cr.hit = c.s.maxHeaderBytes(), false
	if c.br.Buffered() > 0 {
		return true, false
	}
	if c.bw.Buffered() > 0 && c.bw.Flush() != nil {
		return false, false
	}
	if !first {
		c.s.setState(c.nc, http.StateIdle)
	}
	d := c.s.idleTimeout()
	if first {
		d = c.s.readHeaderTimeout()
	}
	if d > 0 {
		c.nc.SetReadDeadline(time.Now().Add(d))
	} else if !first {
		c.nc.SetReadDeadline(time.Time{})
	}
	c.mu.Lock()
	c.idle = true
	// Keep-alives turned off (or Shutdown begun) after the serve loop
	// looked, but before this connection counted as idle: closeIdle
	// missed it, so it closes itself rather than wait out the idle limit.
	stop := !first && !c.s.keepAlives()
	c.mu.Unlock()
	if stop {
		return false, true
	}
	_, err := c.br.Peek(1)
	c.mu.Lock()
	c.idle, c.fresh = false, false
	c.mu.Unlock()
	return err == nil, true
}

// closeIfIdle closes c if it waits for a request: between two, or for its
// first once it has had freshGrace to send it (as net/http, which leaves a
// new connection that long: its request may be on the way).
func (c *conn) closeIfIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle && (!c.fresh || time.Since(c.opened) > freshGrace) {
		c.nc.Close()
	}
}

// freshGrace is how long a new connection may wait for its first request
// before Shutdown counts it idle.
const freshGrace = 5 * time.Second

// errTooLarge: the header block went over the limit.
var errTooLarge = errors.New("h1server: request header too large")

// statusError is a request refused before its handler, with its status.
type statusError struct {
	code int
	text string
}

func (e statusError) Error() string { return http.StatusText(e.code) + ": " + e.text }

// readRequest reads a request's header block and checks it as net/http's
// server does after http.ReadRequest, and more strictly where RFC 9112
// asks: an HTTP/1.0 request with a Transfer-Encoding is refused.
//
// first says it is the connection's first (its header's deadline was set
// as it was waited for, and stands); the request arrived at t0. For a
// later one the deadline is set (even without a limit: the last request's
// handler, or the end of its watch, may have left one) only when its
// header block is not whole in the buffer already: else reading it reads
// nothing from the connection, and nearly every block comes in one piece
// (moving a deadline costs a timer's change, each request).
func (c *conn) readRequest(first bool, t0 time.Time) (*http.Request, error) {
	if req := readFast(c.br); req != nil {
		// Nothing read from the connection, and nothing more to check
		// but its Host (its fields were checked as they were read).
		c.cr.remain = -1
		c.unvetted = false
		if req.Host == "" {
			return nil, statusError{http.StatusBadRequest, "missing required Host header"}
		}
		if !httpguts.ValidHostHeader(req.Host) {
			return nil, statusError{http.StatusBadRequest, "malformed Host header"}
		}
		req.RemoteAddr = c.remote
		return req, nil
	}
	if !first && !c.headerBuffered() {
		var end time.Time
		if d := c.s.readHeaderTimeout(); d > 0 {
			end = t0.Add(d)
		}
		c.nc.SetReadDeadline(end)
	}
	return c.readRequestStd()
}

// readRequestStd is readRequest for what readFast leaves: any request,
// parsed by http.ReadRequest.
func (c *conn) readRequestStd() (*http.Request, error) {
	if c.bw.Buffered() > 0 {
		c.cr.held = c.bw
	}
	pre := c.preScan()
	req, err := http.ReadRequest(c.br)
	hit := c.cr.hit
	c.cr.remain, c.cr.held = -1, nil
	if err != nil {
		if hit {
			return nil, errTooLarge
		}
		return nil, err
	}
	if req.ProtoMajor != 1 && !(req.ProtoMajor == 2 && req.ProtoMinor == 0 && req.Method == "PRI" && req.RequestURI == "*") {
		return nil, statusError{http.StatusHTTPVersionNotSupported, "unsupported protocol version"}
	}
	c.unvetted = false
	if req.ProtoMajor == 1 && req.ProtoMinor == 0 {
		// http.ReadRequest drops an HTTP/1.0 request's Transfer-Encoding
		// and reads no body: a chunked one would be parsed as the next
		// request. RFC 9112 §6.1: its framing is faulty, and the
		// connection must close after it.
		switch {
		case pre.te:
			return nil, statusError{http.StatusBadRequest, "Transfer-Encoding in an HTTP/1.0 request"}
		case !pre.whole:
			c.unvetted = true
		}
	}
	// http.ReadRequest refuses two Host headers, and moves the one to
	// req.Host unless the target is in absolute form (whose host wins).
	if req.URL.Host != "" {
		// As net/http's server, which sees the field before ReadRequest
		// drops it: a Host field is required all the same (but with
		// CONNECT), and checked.
		switch {
		case req.ProtoAtLeast(1, 1) && req.Method != "CONNECT" && !(pre.whole && pre.host):
			return nil, statusError{http.StatusBadRequest, "missing required Host header"}
		case !pre.whole || pre.badHost:
			return nil, statusError{http.StatusBadRequest, "malformed Host header"}
		}
	}
	if req.URL.Host == "" {
		if req.Host == "" && req.ProtoAtLeast(1, 1) && req.Method != "PRI" && req.Method != "CONNECT" {
			// Absent, or empty (which net/http lets through).
			return nil, statusError{http.StatusBadRequest, "missing required Host header"}
		}
		if !httpguts.ValidHostHeader(req.Host) {
			return nil, statusError{http.StatusBadRequest, "malformed Host header"}
		}
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, statusError{http.StatusBadRequest, "invalid header name"}
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, statusError{http.StatusBadRequest, "invalid header value"}
			}
		}
	}
	req.RemoteAddr = c.remote
	return req, nil
}

// preScanned is what preScan found.
type preScanned struct {
	whole   bool // the header block was looked at, whole
	te      bool // it has a Transfer-Encoding field
	host    bool // it has a Host field
	badHost bool // one whose value a host and port cannot be
}

// headerBuffered reports whether the buffer holds a whole header block
// (up to its empty line: a line end, then an empty line, its "\r"
// optional as http.ReadRequest takes it).
func (c *conn) headerBuffered() bool {
	b, _ := c.br.Peek(c.br.Buffered())
	return bytes.Contains(b, blockEnd) || bytes.Contains(b, blockEndLF)
}

var (
	blockEnd   = []byte("\n\r\n")
	blockEndLF = []byte("\n\n")
)

// preScan looks in the bytes buffered at the request about to be read
// for what http.ReadRequest hides, when it matters: an HTTP/1.0
// request's Transfer-Encoding (ReadRequest drops the field, and reads no
// body), and the Host field of a request whose target is not a path or
// "*" (ReadRequest takes the target's host and drops the field, which
// net/http's server requires all the same). Any other request costs a
// search for its request line's end.
func (c *conn) preScan() (p preScanned) {
	b, _ := c.br.Peek(c.br.Buffered())
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return p // the request line is not all here
	}
	line := bytes.TrimSuffix(b[:i], cr)
	_, target, _ := bytes.Cut(line, space)
	if !bytes.HasSuffix(line, http10) && (len(target) == 0 || target[0] == '/' || target[0] == '*') {
		return p // neither matters
	}
	for rest := b[i+1:]; ; {
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			return preScanned{} // a header block larger than the buffer, or on its way
		}
		field := bytes.TrimSuffix(rest[:j], cr)
		rest = rest[j+1:]
		switch {
		case len(field) == 0:
			p.whole = true // the block's end
			return p
		case hasName(field, teField):
			p.te = true
		case hasName(field, hostField):
			p.host = true
			v := strings.Trim(string(field[len(hostField):]), " \t")
			p.badHost = p.badHost || !httpguts.ValidHostHeader(v)
		}
	}
}

// hasName reports whether field starts with name (and its colon), in
// any case.
func hasName(field, name []byte) bool {
	return len(field) >= len(name) && bytes.EqualFold(field[:len(name)], name)
}

var (
	cr     = []byte("\r")
	space  = []byte(" ")
	http10 = []byte(" HTTP/1.0")
	// http.ReadRequest refuses a space before the colon.
	teField   = []byte("Transfer-Encoding:")
	hostField = []byte("Host:")
)

// answerError answers a request that could not be read, as net/http
// does, before the connection closes.
func (c *conn) answerError(err error) {
	const headers = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	// After the answers to the requests pipelined before this one, still
	// in the buffer.
	var ne net.Error
	switch {
	case err == errTooLarge:
		const public = "431 Request Header Fields Too Large"
		c.bw.WriteString("HTTP/1.1 " + public + headers + public)
		c.bw.Flush()
		c.closeWriteAndWait()
	case unsupportedTE(err):
		// Its value is not echoed back: no reflected content.
		c.bw.WriteString("HTTP/1.1 501 Not Implemented" + headers + "Unsupported transfer encoding")
		c.bw.Flush()
	case err == io.EOF || errors.As(err, &ne) && ne.Timeout() || isReadError(err):
		// The client left or stalled: no answer.
	default:
		var se statusError
		if errors.As(err, &se) {
			fmt.Fprintf(c.bw, "HTTP/1.1 %d %s: %s%s%d %s: %s", se.code, http.StatusText(se.code), se.text, headers, se.code, http.StatusText(se.code), se.text)
		} else {
			c.bw.WriteString("HTTP/1.1 400 Bad Request" + headers + "400 Bad Request")
		}
		c.bw.Flush()
	}
}

// unsupportedTE reports whether err is http.ReadRequest's refusal of a
// transfer coding other than chunked, or of more than one
// Transfer-Encoding line, which net/http's server answers 501. Its type
// is unexported: it is learned from ReadRequest itself, and
// TestUnsupportedTEErrorType fails if a Go release gives other errors
// the same type.
func unsupportedTE(err error) bool {
	return reflect.TypeOf(err) == teErrorType()
}

var teErrorType = sync.OnceValue(func() reflect.Type {
	_, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: x\r\n\r\n")))
	return reflect.TypeOf(err)
})

func isReadError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "read"
}

// closeWriteAndWait sends a FIN after the answer and lingers, as
// net/http does, so that the client reads the answer before any reset
// its unread request bytes would cause.
func (c *conn) closeWriteAndWait() {
	c.bw.Flush()
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	// Read and drop what comes until the client closes, at most
	// rstAvoidanceDelay: ends early once the client has its answer.
	c.nc.SetReadDeadline(time.Now().Add(rstAvoidanceDelay))
	io.Copy(io.Discard, c.nc)
}

// rstAvoidanceDelay is net/http's.
const rstAvoidanceDelay = 500 * time.Millisecond

// serveRequest runs the handler on req, which arrived at t0, and finishes
// its answer. False: the connection is to close.
func (c *conn) serveRequest(req *http.Request, t0 time.Time) (keep bool) {
	w := &c.w
	w.reset(req)
	w.body.rc = req.Body
	if d := c.s.WriteTimeout; d > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(d))
	} else if c.writeMoved {
		// The last handler's deadline was its own (net/http clears it
		// after each request).
		c.nc.SetWriteDeadline(time.Time{})
		c.writeMoved = false
	}
	if req.ProtoMajor == 2 {
		w.closeAfter = true // PRI * HTTP/2.0: h2c prior knowledge, not served here
	}
	if req.Body != http.NoBody && c.bw.Buffered() > 0 && !(req.ContentLength >= 0 && int64(c.br.Buffered()) >= req.ContentLength) {
		// The answers held leave before the handler may wait for a body
		// still on its way (not from connReader: the handler may read it
		// in another goroutine while it writes).
		c.bw.Flush()
	}
	if req.Body != http.NoBody {
		// As net/http: past the header, the whole request's deadline,
		// none without ReadTimeout (not the header's, still set).
		var end time.Time
		if d := c.s.ReadTimeout; d > 0 {
			end = t0.Add(d)
		}
		c.nc.SetReadDeadline(end)
	}
	if c.unvetted {
		w.wants10KeepAlive = false // its framing is in doubt
	}
	if expect := req.Header["Expect"]; len(expect) == 1 && strings.EqualFold(textproto.TrimString(expect[0]), "100-continue") {
		w.body.expect = req.Body != http.NoBody && req.ProtoAtLeast(1, 1)
	} else if len(expect) > 0 {
		// An expectation other than one 100-continue: 417. Stricter than
		// net/http, which finds the token anywhere in the value (between
		// spaces too) and ignores an empty one. (strings.EqualFold folds
		// no byte of "100-continue" to a non-ASCII one.)
		w.header.Set("Connection", "close")
		w.closeAfter = true
		w.WriteHeader(http.StatusExpectationFailed)
		w.finish()
		return false
	}
	var hb *handlerBody
	if req.Body != http.NoBody {
		hb = &handlerBody{b: &w.body}
		req.Body = hb
	}
	// One allocation, where the context package's WithCancel costs two,
	// and a Done channel and a map of children once the engine derives
	// its own context (see internal/opctx).
	ctx := opctx.New(c.base)
	// In place: req is this server's own, just read. (WithContext is
	// inlined, so the copy it makes stays on the stack.)
	*req = *req.WithContext(ctx)
	w.req = req
	watched := req.Body == http.NoBody
	if watched {
		c.startWatch(ctx, t0)
	} else {
		c.mu.Lock()
		c.reqCtx = ctx
		c.mu.Unlock()
	}
	if c.s.aborted.Load() {
		ctx.Cancel() // Close ran between its cancellations and this one's
	}
	panicked := c.runHandler(w, req)
	if hb != nil {
		hb.end()
	}
	if watched {
		c.stopWatch()
	}
	ctx.Cancel()
	if panicked {
		// What was committed leaves, as net/http flushes it: earlier
		// pipelined answers, or a part of this one.
		c.bw.Flush()
		return false
	}
	w.finish()
	return !w.closeAfter && w.err == nil
}

// runHandler runs the handler, and reports whether it panicked (logged
// unless http.ErrAbortHandler, as net/http does).
func (c *conn) runHandler(w *response, req *http.Request) (panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			panicked = true
			if p != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.logf("h1server: panic serving %v: %v\n%s", c.remote, p, buf)
			}
		}
	}()
	c.s.Handler.ServeHTTP(w, req)
	return false
}
