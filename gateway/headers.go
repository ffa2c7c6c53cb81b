package gateway

import (
	"net"
	"net/http"
	"strings"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
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

// hopOnly reports whether a client's header named k is one that only a
// trusted hop may send (Config.TrustedHop): the client-address headers and
// Tailgate's own, matched whatever the case of k.
//
// Tailgate's headers (Tailgate-*) mark what the gateway and its peers do:
// a client's Tailgate-Hedge or Tailgate-Shadow would have a replica that
// deprioritises hedges serve that client last and count its reads as
// duplicates. The whole prefix goes, not a list: the namespace is
// Tailgate's, and headers added to it later are covered.
//
// The client-address headers say who the client is, as proxies tell it.
// A gateway facing the internet trusts only what it saw itself, as Envoy
// at the edge (use_remote_address: true, xff_num_trusted_hops: 0) and
// Go's httputil.ReverseProxy with Rewrite do: a client's Forwarded,
// X-Forwarded-* (For, Host, Proto, and others such as Envoy's
// X-Forwarded-Client-Cert), X-Real-Ip and True-Client-Ip are removed, and
// forwardedHeaders sets X-Forwarded-For, -Host and -Proto to the peer's
// address, the Host header and the scheme. Appending to a client's
// X-Forwarded-For instead (nginx's $proxy_add_x_forwarded_for) would leave
// a replica that reads its first entry, as many do, reading the client's
// own claim.
func hopOnly(k string) bool {
	return hasPrefixFold(k, "Tailgate-") || hasPrefixFold(k, "X-Forwarded-") ||
		strings.EqualFold(k, "Forwarded") || strings.EqualFold(k, "X-Real-Ip") || strings.EqualFold(k, "True-Client-Ip")
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// forwardedHeaders builds the header of the request sent to a replica: the
// client's end-to-end headers, less those only a trusted hop may send
// unless trusted (see hopOnly and Config.TrustedHop), less ties and
// Tailgate-Timeout always, plus X-Forwarded-For, X-Forwarded-Host and
// X-Forwarded-Proto. From a trusted hop, its X-Forwarded-For gets the
// peer's address appended, and its X-Forwarded-Host and -Proto are kept
// (set if it sent none); a header the hop names in Connection is its own,
// and goes, as every hop-by-hop header does. The values it sets are
// slices of vals (the caller's: the exchange holds them, with no
// allocation of their own).
func forwardedHeaders(r *http.Request, trusted bool, vals *[3]string) http.Header {
	h := make(http.Header, len(r.Header)+3)
	connection := r.Header["Connection"]
	for k, v := range r.Header {
		if isHop(k, connection) || !trusted && hopOnly(k) {
			continue
		}
		h[k] = v // sharing the value slices: neither side mutates them
	}
	// Ties are the gateway's to make (Config.Tied), even behind a trusted
	// hop: a client's would have replicas running tied.Server send
	// cancels on its behalf, and drop copies the gateway would then take
	// for failures. The time left is the gateway's to write (see
	// newExchange and shadow): a client's value only shortens the
	// request's deadline (see serve).
	delete(h, tiedwire.TieHeader)
	delete(h, tiedwire.PeerHeader)
	delete(h, deadline.Header)
	// A read carries no body: an expectation of one (100-continue) is
	// the client's to the gateway, met or refused there, and a replica
	// told to expect a body that never comes may wait for it (nginx drops
	// it too).
	delete(h, "Expect")
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := h["X-Forwarded-For"]; len(prior) > 0 { // trusted only
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		vals[0] = ip
		h["X-Forwarded-For"] = vals[0:1:1]
	}
	if _, ok := h["X-Forwarded-Host"]; !ok {
		vals[1] = r.Host
		h["X-Forwarded-Host"] = vals[1:2:2]
	}
	if _, ok := h["X-Forwarded-Proto"]; !ok {
		vals[2] = "http"
		if r.TLS != nil {
			vals[2] = "https"
		}
		h["X-Forwarded-Proto"] = vals[2:3:3]
	}
	if _, ok := h["User-Agent"]; !ok {
		// An empty value keeps net/http from adding its own: the replica
		// sees what the client sent, nothing.
		h["User-Agent"] = emptyValue
	}
	return h
}
