package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/tailgate-dev/tailgate/internal/opctx"
)

// conn is one connection to a backend with its buffers. It serves one
// request at a time, in the goroutine of the caller that holds it: from
// hostPool.get until its response body is closed (or read to its end and
// closed), then back to the pool or closed.
type conn struct {
	nc    net.Conn
	pool  *hostPool
	cr    connReader
	br    *bufio.Reader
	sw    sockWriter // what bw writes to
	bw    *bufio.Writer
	abort func()          // closes nc; made once, for the watch on ctx
	ctx   context.Context // the exchange's, for abort; nil while idle
	// The watch on ctx that runs abort: on its opctx.Ctx when it has one
	// (no allocation), else through context.AfterFunc.
	watch   opctx.Watch
	watchOn *opctx.Ctx
	stopFn  func() bool
	idleAt  time.Time // when it went idle (under pool.mu)
	pooled  bool      // waited idle in the pool before the current request: the server may have closed it meanwhile
	used    bool      // carried a request: bytes found while idle follow an answer

	// What look needs (see stray.go): nc's socket (nil: nc is none),
	// the function the poller runs on it, and what that found.
	raw     syscall.RawConn
	lookFn  func(fd uintptr) bool
	lookBuf [len("HTTP/1.1 408")]byte
	lookN   int
	lookErr error
}

// connReader is what the conn's bufio.Reader reads from: it bounds the
// bytes read for a response's header block (1xx answers before it
// included), as net/http's persistConn does, and counts the bytes of each
// response, so that a failure before its first byte can be told apart.
type connReader struct {
	nc    net.Conn
	limit int64 // bytes that may still be read; math.MaxInt64 for a body
	n     int64 // bytes read since the request was written
}

func (r *connReader) Read(p []byte) (int, error) {
	if r.limit <= 0 {
		return 0, errHeaderLimit
	}
	if int64(len(p)) > r.limit {
		p = p[:r.limit]
	}
	n, err := r.nc.Read(p)
	r.limit -= int64(n)
	r.n += int64(n)
	return n, err
}

// errHeaderLimit is what connReader returns once a header block has used
// up the limit; roundTrip reports a headerLimitError instead.
var errHeaderLimit = errors.New("h1: header read limit reached")

// ErrHeaderLimit is wrapped by the error of a request whose response's
// header block (any 1xx answers before it included) went over
// Config.MaxResponseHeaderBytes.
var ErrHeaderLimit = errors.New("h1: server response headers exceeded the limit")

// headerLimitError says a response's header block was over the limit.
// Its message says so as net/http's does; callers test ErrHeaderLimit.
type headerLimitError struct{ limit int64 }

func (e *headerLimitError) Error() string {
	return fmt.Sprintf("h1: server response headers exceeded %d bytes; aborted", e.limit)
}

// Is makes it ErrHeaderLimit for errors.Is, while its message, the most
// precise, stays the innermost one (callers that strip wrappers show it).
func (e *headerLimitError) Is(target error) bool { return target == ErrHeaderLimit }

// Buffers outlive their connections: a closed connection's go back here.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}
)

// bufSize is the size of each connection's read and write buffer, as
// net/http's.
const bufSize = 4 << 10

func newConn(nc net.Conn, p *hostPool) *conn {
	c := &conn{nc: nc, pool: p}
	c.sw.nc = nc
	c.initLook(nc)
	c.cr.nc = nc
	c.br = readers.Get().(*bufio.Reader)
	c.br.Reset(&c.cr)
	c.bw = writers.Get().(*bufio.Writer)
	c.bw.Reset(&c.sw)
	c.abort = func() {
		nc.Close()
		// A cancellation, a hedge's loser's most often, leaves the backend
		// well: replace the connection. A deadline may mean it hangs.
		if errors.Is(c.ctx.Err(), context.Canceled) {
			p.replace()
		}
	}
	c.watch = opctx.NewWatch(c.abort)
	return c
}

// watchCtx arranges for abort to run when ctx ends, until unwatch.
func (c *conn) watchCtx(ctx context.Context) {
	c.ctx = ctx // before the watch: abort reads it
	if oc := opctx.Of(ctx); oc != nil {
		c.watchOn = oc
		oc.Watch(&c.watch)
		return
	}
	c.stopFn = context.AfterFunc(ctx, c.abort)
}

// unwatch ends the watch on the exchange's context, and reports whether
// it did so before abort was started (false: the connection is being
// closed under the exchange). Called once per watchCtx.
func (c *conn) unwatch() bool {
	if oc := c.watchOn; oc != nil {
		c.watchOn = nil
		return oc.Unwatch(&c.watch)
	}
	stop := c.stopFn
	c.stopFn = nil
	return stop()
}

// close closes the connection and gives its buffers back. Only its
// holder calls it, once.
func (c *conn) close() {
	c.nc.Close()
	c.br.Reset(nil)
	readers.Put(c.br)
	c.bw.Reset(nil)
	writers.Put(c.bw)
	c.br, c.bw = nil, nil
}

// roundTrip sends req (checked, bodiless) on c and reads the response's
// header block, 1xx answers skipped; the body is read through the
// response. Until the body is done, cancelling ctx closes the connection,
// which ends any read or write at once. On an error c is closed.
func (c *conn) roundTrip(ctx context.Context, req *http.Request, maxHeader int64) (*http.Response, error) {
	c.used = true
	c.watchCtx(ctx)
	writeRequest(c.bw, req)
	c.cr.limit, c.cr.n = maxHeader, 0
	c.sw.await = true // the request ends with this flush (see sockWriter)
	err := c.bw.Flush()
	c.sw.await = false
	if err != nil {
		c.unwatch()
		c.close()
		return nil, c.failed(ctx, err)
	}
	var resp *http.Response
	for {
		var err error
		resp, err = c.readResponse(req)
		if err != nil {
			c.unwatch()
			c.close()
			if c.cr.limit <= 0 {
				return nil, &headerLimitError{maxHeader}
			}
			return nil, c.failed(ctx, err)
		}
		// 100 Continue (to a request that sent no body) and 103 Early
		// Hints are not the answer; their bytes count against the limit,
		// which bounds how many a server may send. A 101 is final.
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if len(resp.TransferEncoding) > 0 || announcesBody(resp.Header) {
			// A 1xx has no body (RFC 9110 §15.2), and one announced would
			// be read as the next answer: net/http would forward it.
			c.unwatch()
			c.close()
			return nil, fmt.Errorf("h1: malformed HTTP response: a %d answer with a body (Content-Length or Transfer-Encoding)", resp.StatusCode)
		}
	}
	c.cr.limit = math.MaxInt64
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// Never asked for (see Transport.handles): the rest of the stream
		// is handed over as net/http does, for the caller to refuse
		// (internal/upgrade); the connection is never reused.
		resp.Body = &upgradeBody{c: c}
		return resp, nil
	}
	keep := !resp.Close && !req.Close
	if leavesBytes(resp) {
		// Its body's bytes come after the answer, unframed.
		c.pool.unsolicited(false)
		keep = false
	}
	if resp.Body == http.NoBody {
		c.release(true, keep)
		return resp, nil
	}
	resp.Body = &body{rc: resp.Body, remain: resp.ContentLength, c: c, ctx: ctx, keep: keep}
	return resp, nil
}

// readResponse reads the next response's header block: readFast's when
// the first bytes read hold it and it is of the common kind, else
// http.ReadResponse's.
func (c *conn) readResponse(req *http.Request) (*http.Response, error) {
	if _, err := c.br.Peek(1); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // as ReadResponse
		}
		return nil, err
	}
	if resp := readFast(c.br, req); resp != nil {
		return resp, nil
	}
	return http.ReadResponse(c.br, req)
}

// failed returns the error for err, which ended c's exchange: the
// context's error when the context ended it (the connection was closed
// under the read), else err.
func (c *conn) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("h1: request canceled: %w", context.Cause(ctx))
	}
	if c.cr.n == 0 && (err == io.EOF || err == io.ErrUnexpectedEOF) {
		return fmt.Errorf("h1: server closed the connection before answering: %w", err)
	}
	return err
}

// release ends c's exchange, complete when its answer was read to its
// framed end: back to the pool when keep says the exchange left it in a
// state to reuse and nothing unasked for is buffered; else closed. Bytes
// buffered after a complete answer are unsolicited. The watch on the
// exchange's context ends; if it had already fired, the connection is
// closed.
func (c *conn) release(complete, keep bool) {
	stopped := c.unwatch()
	if complete && c.br.Buffered() > 0 {
		c.pool.unsolicited(false)
		keep = false
	}
	if !stopped || !keep {
		c.close()
		return
	}
	c.ctx = nil
	c.pool.put(c)
}

// body is a response body read from its connection's buffer. The
// connection goes back to the pool on Close only once the body was read
// to its end and the response allowed keep-alive; a body closed early
// closes its connection (as net/http does over HTTP/1: draining an
// unknown rest could take any time).
type body struct {
	// rc is ReadResponse's body: its framing (Content-Length, chunked,
	// to close). Nil for readFast's: remain bytes of c.br.
	rc     io.ReadCloser
	remain int64
	c      *conn // nil once closed
	ctx    context.Context
	keep   bool
	eof    bool // read to its end: the connection may be kept
	short  bool // the stream ended before the body did
}

var errBodyClosed = errors.New("h1: read on closed response body")

func (b *body) Read(p []byte) (int, error) {
	if b.c == nil {
		return 0, errBodyClosed
	}
	var n int
	var err error
	if b.rc != nil {
		n, err = b.rc.Read(p)
	} else {
		n, err = readLength(b.c.br, &b.remain, p)
	}
	switch {
	case err == io.EOF && !b.short:
		b.eof = true
		return n, err
	case err == io.EOF:
		err = io.ErrUnexpectedEOF // ReadResponse's body says EOF after a short end
	case err == io.ErrUnexpectedEOF:
		b.short = true
	}
	if err != nil && b.ctx.Err() != nil {
		err = b.c.failed(b.ctx, err) // a body cut short by the cancellation says so
	}
	return n, err
}

func (b *body) Close() error {
	if b.c == nil {
		return nil
	}
	c := b.c
	b.c = nil
	// Never rc.Close: for a response it reads the rest to the end.
	c.release(b.eof, b.keep && b.eof)
	return nil
}

// upgradeBody is the stream after a 101: whatever the server sends on the
// connection. Close closes the connection.
type upgradeBody struct {
	c *conn
}

func (u *upgradeBody) Read(p []byte) (int, error) {
	if u.c == nil {
		return 0, errBodyClosed
	}
	return u.c.br.Read(p)
}

func (u *upgradeBody) Close() error {
	if u.c != nil {
		u.c.unwatch()
		u.c.close()
		u.c = nil
	}
	return nil
}

// hostPool holds the idle connections to one backend address: the most
// recently used first, so that under light load the others stay idle
// long enough to be reaped.
type hostPool struct {
	t    *Transport
	host string // the URLs' host, the pool's key
	addr string // host:port to dial

	mu        sync.Mutex
	idle      []*conn // idle[len-1] is the most recently used
	reaper    *time.Timer
	armed     bool // reaper is due to run
	replacing bool // a replacement is being dialled
	// drained: closeIdle ran and no request came since (the transport's
	// last use, perhaps): a cancellation dials no replacement, and one
	// dialled across closeIdle is closed as it arrives.
	drained bool
	// What the backend was seen to send unasked (see stray.go): proven,
	// a new connection waited settleTimeout and got nothing; until
	// greetUntil new connections wait so (bytes came as one opened);
	// until strayUntil connections are not reused (bytes came after an
	// answer).
	proven     bool
	greetUntil time.Time
	strayUntil time.Time
}

// get returns an idle connection that nothing has arrived on since its
// last answer, or a new one when there is none or fresh is set.
func (p *hostPool) get(ctx context.Context, fresh bool) (*conn, error) {
	for !fresh {
		c := p.take()
		if c == nil {
			break
		}
		// One read that does not wait, outside the lock: what came while
		// it was idle.
		switch c.look() {
		case lookEmpty:
			return c, nil
		case lookBytes:
			p.unsolicited(!c.used)
		}
		c.close()
	}
	return p.dial(ctx)
}

// take removes the most recently used idle connection from the pool and
// returns it, or nil when none is idle for less than IdleTimeout (the
// others are closed).
func (p *hostPool) take() *conn {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drained = false
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	c := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	if now.Sub(c.idleAt) < p.t.idleTimeout {
		return c
	}
	// The most recent is too old: so are all the others.
	for _, old := range p.idle {
		old.close()
	}
	clear(p.idle)
	p.idle = p.idle[:0]
	c.close()
	return nil
}

// dial dials a new connection and checks it (see checkNew).
func (p *hostPool) dial(ctx context.Context) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, p.t.dialTimeout)
	defer cancel()
	nc, err := p.t.dialContext(dctx, "tcp", p.addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("h1: request canceled while dialling %s: %w", p.addr, context.Cause(ctx))
		}
		return nil, err
	}
	c := newConn(nc, p)
	if err := c.checkNew(ctx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// replace dials, in the caller's goroutine, a connection to stand in for
// one a cancellation (not a deadline) just closed, and keeps it idle (and
// Prove, the first connection to a backend, checked off the request path):
// hedging cancels its losers by closing their connections, as HTTP/1.1
// offers no other way, and without a replacement the next attempt to this
// backend, often the next hedge, would wait on a dial. One replacement at
// a time per backend, none when MaxIdlePerHost are idle already; a failed
// dial is not retried (the next attempt dials and reports it). None after
// CloseIdleConnections until a request comes again.
func (p *hostPool) replace() {
	p.mu.Lock()
	if p.replacing || p.drained || len(p.idle) >= p.t.maxIdle || time.Now().Before(p.strayUntil) {
		p.mu.Unlock()
		return
	}
	p.replacing = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), p.t.dialTimeout)
	nc, err := p.t.dialContext(ctx, "tcp", p.addr)
	cancel()
	var c *conn
	if err == nil {
		// Checked here, off the request path, as a connection dialled
		// for a request is.
		c = newConn(nc, p)
		if c.checkNew(context.Background()) != nil {
			c.close()
			c = nil
		}
	}
	p.mu.Lock()
	p.replacing = false
	stale := p.drained
	p.mu.Unlock()
	if c == nil {
		return
	}
	if stale {
		c.close()
		return
	}
	p.put(c)
}

// put keeps c idle, or closes it when MaxIdlePerHost are idle already or
// the backend has lately sent bytes after an answer.
func (p *hostPool) put(c *conn) {
	now := time.Now()
	p.mu.Lock()
	if len(p.idle) >= p.t.maxIdle || now.Before(p.strayUntil) {
		p.mu.Unlock()
		c.close()
		return
	}
	c.idleAt, c.pooled = now, true
	p.idle = append(p.idle, c)
	if !p.armed {
		p.armed = true
		if p.reaper == nil {
			p.reaper = time.AfterFunc(p.t.idleTimeout, p.reap)
		} else {
			p.reaper.Reset(p.t.idleTimeout)
		}
	}
	p.mu.Unlock()
}

// reap closes the connections idle for IdleTimeout or longer, and runs
// again when the oldest left is due.
func (p *hostPool) reap() {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].idleAt) >= p.t.idleTimeout {
		p.idle[n].close()
		n++
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
	clear(p.idle[len(p.idle) : len(p.idle)+n])
	if len(p.idle) == 0 {
		p.armed = false
		return
	}
	p.reaper.Reset(p.t.idleTimeout - now.Sub(p.idle[0].idleAt))
}

// closeIdle closes every idle connection and stops the reaper.
func (p *hostPool) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.idle {
		c.close()
	}
	clear(p.idle)
	p.idle = p.idle[:0]
	p.drained = true
	if p.reaper != nil {
		p.reaper.Stop()
	}
	p.armed = false
}
