package h1

import (
	"net"
	"os"
	"syscall"
)

// sockWriter is what a conn's bufio.Writer writes to. The flush that ends
// a request (await set) writes and then waits for the answer in one call
// to the runtime's poller (syscall.RawConn.Read), where a write and then
// a read would cost a read system call that finds nothing: the backend
// has not answered yet (Go's poller reads before it waits). The read of
// the answer then finds it there. One system call fewer per request: see
// docs/performance.md, "Gateway throughput".
//
// The wait is safe where a wait before a read is not in general: the
// poller forgets what it was told of the socket as the call begins, so
// bytes already there would go unnoticed; none can be, since the
// connection was looked at as it was taken (look) and the answer cannot
// come before the request is written, which the call itself does.
type sockWriter struct {
	nc    net.Conn
	raw   syscall.RawConn // nil: not a socket, plain writes
	fn    func(fd uintptr) bool
	await bool // the next Write ends a request: write it, then wait to read

	// The write under way in fn.
	p    []byte
	n    int
	err  error
	sent bool
}

func (w *sockWriter) Write(p []byte) (int, error) {
	if !w.await || w.raw == nil {
		return w.nc.Write(p)
	}
	w.await = false
	w.p, w.n, w.err, w.sent = p, 0, nil, false
	rerr := w.raw.Read(w.fn)
	n, err, sent := w.n, w.err, w.sent
	w.p, w.err = nil, nil
	switch {
	case sent:
		// Written. A wait cut short (the connection closed under it, on
		// a cancellation) is for the read of the answer to report.
		return n, nil
	case rerr != nil:
		return n, rerr
	case err != nil && err != syscall.EAGAIN:
		return n, &net.OpError{Op: "write", Net: "tcp", Addr: w.nc.RemoteAddr(), Err: os.NewSyscallError("write", err)}
	}
	// The socket's buffer was full: the rest as any write, and the
	// answer read as usual.
	m, err := w.nc.Write(p[n:])
	return n + m, err
}

// sendFD is fn: first it writes w.p to fd, then, once all of it is
// written, it asks the poller to wait until fd is readable; called again
// then, it is done. A write that is cut short, or fails, ends the call.
func (w *sockWriter) sendFD(fd uintptr) bool {
	if w.sent {
		return true // readable: the answer (or the connection's end) is there
	}
	for w.n < len(w.p) {
		n, err := syscall.Write(int(fd), w.p[w.n:])
		if err == syscall.EINTR {
			continue
		}
		if n > 0 {
			w.n += n
		}
		if err != nil || n <= 0 {
			w.err = err
			return true
		}
	}
	w.sent = true
	return false
}
