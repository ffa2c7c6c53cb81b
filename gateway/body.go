package gateway

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// This file: the bodies of reads that carry one (Route.Methods beyond GET
// and HEAD: a search POST, a gRPC call). A hedge sends the request again,
// so the body must be there to send again: it is read whole before the
// first attempt, within Config.MaxRequestBodyBytes, and every attempt gets
// the same bytes with the same Content-Length (hedge.Transport replays
// GetBody per attempt). Only a route's declared methods get here: GET and
// HEAD with a body are refused as ever, and so is a method no route
// declares (405).

// Rejection reasons of bodies, as counted in tailgate_rejections_total.
const (
	rejectBodyTooLarge = "body_too_large" // over MaxRequestBodyBytes: 413
	rejectBodyTimeout  = "body_timeout"   // not whole within the read's time: 408
)

// readBody reads the body of r, a read of a method its route rt declared,
// whole, and returns a copy of r whose Body, GetBody and ContentLength
// give those bytes: a chunked body is decoded by the server and goes on
// with a Content-Length, never as chunks. Its time counts against the
// read's (it arrived at start): the body must be whole within rt's
// timeout, and within the server's read limit. ok is false when r was
// refused instead (s says how), its connection closed: a body not read
// whole leaves the connection's framing in doubt.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request, v *view, rt *route, start time.Time) (_ *http.Request, s served, ok bool) {
	limit := v.cfg.MaxRequestBodyBytes
	if len(r.TransferEncoding) > 0 {
		// A chunked body, decoded: net/http's server removes a
		// Content-Length that came with it before the gateway can see it,
		// and a hop in front that framed the request by that length would
		// take what follows the chunks for this body. RFC 9112 §6.1: the
		// connection closes after the answer, and nothing after the
		// chunks is ever parsed as a request.
		w.Header().Set("Connection", "close")
	}
	rc := http.NewResponseController(w)
	if r.ContentLength > limit {
		// Refused unread: a client that asked to continue (Expect:
		// 100-continue) is never told to send it.
		return r, g.refuseBody(w, rc, rejectBodyTooLarge, http.StatusRequestEntityTooLarge, bodyTooLarge(limit)), false
	}
	restore := false
	if rt.timeout < readTimeout {
		// The server's own read limit (readTimeout, from the request's
		// arrival) is longer than the read may take: a body still coming
		// then is a read that cannot be answered in time. The limit is put
		// back once the body is in, for the rest of the request (net/http's
		// background read of an HTTP/1.1 connection takes a limit that
		// passes for the client leaving).
		restore = rc.SetReadDeadline(start.Add(rt.timeout)) == nil
	}
	body, err := readAtMost(r.Body, r.ContentLength, limit)
	switch {
	case errors.Is(err, errBodyTooLarge):
		return r, g.refuseBody(w, rc, rejectBodyTooLarge, http.StatusRequestEntityTooLarge, bodyTooLarge(limit)), false
	case timedOut(err):
		return r, g.refuseBody(w, rc, rejectBodyTimeout, http.StatusRequestTimeout, "request body not received within "+min(rt.timeout, readTimeout).String()), false
	case err != nil:
		// Cut short, malformed chunks, a client gone: nothing to forward.
		return r, g.refuseBody(w, rc, rejectBody, http.StatusBadRequest, "request body could not be read: "+cause(err)), false
	}
	if restore {
		rc.SetReadDeadline(start.Add(readTimeout))
	}
	out := r.WithContext(r.Context())
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	if len(body) == 0 {
		// net/http's client takes a body it cannot see the end of, with a
		// length of 0, for one of unknown length, and sends it chunked.
		out.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
	out.Body, _ = out.GetBody()
	out.ContentLength = int64(len(body))
	out.TransferEncoding = nil
	return out, served{}, true
}

// refuseBody refuses a read whose body was not read whole, and reads no
// more of it: net/http's server, as it ends the request, would otherwise
// wait for the rest of a body it was promised (up to 256 KiB, until its
// read limit) before it closes the connection, though the answer says it
// closes.
func (g *Gateway) refuseBody(w http.ResponseWriter, rc *http.ResponseController, reason string, code int, msg string) served {
	rc.SetReadDeadline(longAgo)
	return g.refuseAndClose(w, reason, code, msg)
}

// longAgo is a read deadline that has passed.
var longAgo = time.Unix(1, 0)

// timedOut reports whether a read failed on its deadline.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func bodyTooLarge(limit int64) string {
	return "request body larger than " + strconv.FormatInt(limit, 10) + " bytes"
}

var errBodyTooLarge = errors.New("gateway: request body too large")

// readAtMost reads rc to its end, at most limit bytes (errBodyTooLarge
// past it); n is its announced length (-1: unknown), to size the buffer
// once.
func readAtMost(rc io.Reader, n, limit int64) ([]byte, error) {
	size := int64(512)
	if n >= 0 {
		size = n + 1 // room for the read that sees EOF
	}
	buf := make([]byte, 0, min(size, limit+1))
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := min(cap(buf), int(limit)+1) // one past the limit tells it is over
		m, err := rc.Read(buf[len(buf):end])
		buf = buf[:len(buf)+m]
		if int64(len(buf)) > limit {
			return nil, errBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
