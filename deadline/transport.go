package deadline

import (
	"context"
	"net/http"
	"time"
)

// Transport writes Header on each request from its context's deadline (the time remaining at send time,
// truncated as Format does). A request whose deadline has already passed is not sent: RoundTrip returns an
// error wrapping context.DeadlineExceeded. A request without a deadline is sent with any Header it carries
// removed (a stale value from an upstream hop must not be forwarded as if it were ours). It never modifies
// the caller's request: it sends a copy with its own header map when it changes anything.
//
// The zero value is ready to use, and a Transport is safe for concurrent use.
// Used as the Base of a hedge.Transport, it stamps each attempt with the
// time left when that attempt is sent, so a hedge launched later claims
// less time than the primary did, as it should.
type Transport struct {
	Base http.RoundTripper // nil: http.DefaultTransport

	// Slack, when positive, lets a request that already carries a value
	// at most Slack below the time left go as it is, without a copy: a
	// caller that owns its requests (a proxy, say) can write the header
	// itself as it builds them, and only requests sent later than that (a
	// hedge) are rewritten. A value above the time left is always
	// rewritten, however close: the receiver must never be told more time
	// than the sender has. So a caller writing the header ahead of sending
	// writes its time left less Slack (Format(left - Slack)), which stays
	// kept for as long as sending takes less than Slack. Zero rewrites
	// every request.
	Slack time.Duration

	// Header is the header written, in canonical form: "" means Header
	// (Tailgate-Timeout); "Grpc-Timeout" stamps gRPC calls, whose timeout
	// has the same format.
	Header string
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	dl, has := ctx.Deadline()
	if !has {
		if _, stale := req.Header[t.name()]; !stale {
			return t.base().RoundTrip(req)
		}
		out := withHeader(req)
		delete(out.Header, t.name())
		return t.base().RoundTrip(out)
	}
	// The remaining time, not the deadline itself, goes on the wire: the
	// receiver adds it to its own clock, so the two clocks need not agree.
	left := time.Until(dl)
	if left <= 0 {
		// A RoundTripper must close the body even when it sends nothing.
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &expiredError{late: -left}
	}
	if t.Slack > 0 && t.current(req.Header, left) {
		return t.base().RoundTrip(req)
	}
	out := withHeader(req)
	out.Header[t.name()] = []string{Format(left)}
	return t.base().RoundTrip(out)
}

// current reports whether h carries exactly one well-formed value no more
// than left and at most t.Slack below it.
func (t *Transport) current(h http.Header, left time.Duration) bool {
	v := h[t.name()]
	if len(v) != 1 {
		return false
	}
	d, err := Parse(v[0])
	return err == nil && d <= left && left-d <= t.Slack
}

// CloseIdleConnections closes the idle connections of Base if it has any,
// so that http.Client.CloseIdleConnections reaches through the Transport.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *Transport) name() string {
	if t.Header != "" {
		return t.Header
	}
	return Header
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// withHeader returns a shallow copy of req with its own header map, which
// the caller may change without touching req's.
func withHeader(req *http.Request) *http.Request {
	out := req.WithContext(req.Context())
	out.Header = req.Header.Clone()
	if out.Header == nil {
		out.Header = make(http.Header, 1)
	}
	return out
}

// expiredError is RoundTrip's error for a request whose deadline had passed.
// It wraps context.DeadlineExceeded and, like it, reports a timeout, so
// url.Error.Timeout and net.Error checks see one.
type expiredError struct{ late time.Duration }

func (e *expiredError) Error() string {
	return "deadline: request not sent, deadline passed " + e.late.String() + " ago: " + context.DeadlineExceeded.Error()
}

func (e *expiredError) Unwrap() error { return context.DeadlineExceeded }
func (e *expiredError) Timeout() bool { return true }

// Temporary completes net.Error, as context.DeadlineExceeded does.
func (e *expiredError) Temporary() bool { return true }
