package gateway

import (
	"net"
	"net/http"
	"strings"

	"github.com/tailgate-dev/tailgate/tied"
)

// hopHeaders are meaningful for one connection only (RFC 9110 §7.6.1) and
// never forwarded, in either direction.
var hopHeaders = []string{
	"Connection",
	"Proxy-Connection", // not standard, but sent by some clients
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

var emptyValue = []string{""}

// isHop reports whether the canonical header name k is hop-by-hop, either
// always or because the Connection header names it.
func isHop(k string, connection []string) bool {
	for _, h := range hopHeaders {
		if k == h {
			return true
		}
	}
	for _, v := range connection {
		for tok := range strings.SplitSeq(v, ",") {
			if http.CanonicalHeaderKey(strings.TrimSpace(tok)) == k {
				return true
			}
		}
	}
	return false
}

// copyEndToEnd copies the end-to-end headers of src into dst, sharing the
// value slices (neither side mutates them).
func copyEndToEnd(dst, src http.Header) {
	connection := src["Connection"]
	for k, v := range src {
		if isHop(k, connection) {
			continue
		}
		dst[k] = v
	}
}

// forwardedHeaders builds the header of the request sent to a replica: the
// client's end-to-end headers, but for tie headers, plus X-Forwarded-For
// (the client's address appended), X-Forwarded-Host and X-Forwarded-Proto.
func forwardedHeaders(r *http.Request) http.Header {
	h := make(http.Header, len(r.Header)+3)
	copyEndToEnd(h, r.Header)
	// Ties are the gateway's to make (Config.Tied): a client's would have
	// replicas running tied.Server send cancels on its behalf, and drop
	// copies the gateway would then take for failures.
	delete(h, tied.TieHeader)
	delete(h, tied.PeerHeader)
	vals := make([]string, 3) // one backing array for the three values
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header["X-Forwarded-For"]; len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		vals[0] = ip
		h["X-Forwarded-For"] = vals[0:1:1]
	}
	vals[1] = r.Host
	h["X-Forwarded-Host"] = vals[1:2:2]
	vals[2] = "http"
	if r.TLS != nil {
		vals[2] = "https"
	}
	h["X-Forwarded-Proto"] = vals[2:3:3]
	if _, ok := h["User-Agent"]; !ok {
		// An empty value keeps net/http from adding its own: the replica
		// sees what the client sent, nothing.
		h["User-Agent"] = emptyValue
	}
	return h
}
