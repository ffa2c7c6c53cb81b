package h1

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// defaultUserAgent is what net/http sends for a request without a
// User-Agent key; an empty value sends none, as there.
const defaultUserAgent = "Go-http-client/1.1"

// maxSortedKeys is how many header keys are sorted on the stack; a request
// with more sorts a slice of its own.
const maxSortedKeys = 32

// checkRequest refuses what net/http's Transport refuses before it writes
// anything: a method that is not a token, header names that are not
// tokens, values with control bytes other than tab, a target with control
// bytes. Nothing is written for a refused request, so its connection
// stays usable.
func checkRequest(req *http.Request) error {
	if req.Method != "" && !httpguts.ValidHeaderFieldName(req.Method) { // a token, as net/http's validMethod
		return fmt.Errorf("h1: invalid method %q", req.Method)
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h1: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				// Not the value: it may be a secret.
				return fmt.Errorf("h1: invalid header field value for %q", k)
			}
		}
	}
	u := req.URL
	if hasCTL(u.Opaque) || hasCTL(u.RawQuery) || u.Opaque == "" && hasCTL(u.EscapedPath()) {
		return errors.New("h1: can't write control character in Request.URL")
	}
	if u.Opaque != "" && strings.HasPrefix(u.Opaque, "//") && hasCTL(u.Scheme) {
		return errors.New("h1: can't write control character in Request.URL")
	}
	return nil
}

// writeRequest writes req's request line and header block to w as
// net/http's Transport does (Request.write, no proxy, no compression
// negotiated): the request target of URL.RequestURI, Host (the request's
// or else the URL's, its IPv6 zone removed; empty when it holds a byte no
// host may), User-Agent (net/http's default when the request has none),
// Content-Length: 0 for the methods that expect a body, Connection: close
// when req.Close, then the other headers sorted by name, each value
// trimmed. req has been through checkRequest and carries no body.
func writeRequest(w *bufio.Writer, req *http.Request) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	w.WriteString(method)
	w.WriteByte(' ')
	writeTarget(w, req.URL)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if validHost(host) {
		w.WriteString(removeZone(host))
	}
	w.WriteString("\r\n")
	ua := defaultUserAgent
	if v, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(v) > 0 {
			ua = trim(v[0])
		}
	}
	if ua != "" {
		writeField(w, "User-Agent", ua)
	}
	if req.Close && !hasToken(req.Header["Connection"], "close") {
		w.WriteString("Connection: close\r\n")
	}
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		// As net/http: these methods expect a body, and an empty one is
		// announced rather than left for the server to guess.
		w.WriteString("Content-Length: 0\r\n")
	}
	var stack [maxSortedKeys]string
	keys := stack[:0]
	for k := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // written above, or framing this request does not have
		}
		keys = append(keys, k) // on the stack up to maxSortedKeys
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range req.Header[k] {
			writeField(w, k, trim(v))
		}
	}
	w.WriteString("\r\n")
}

// writeTarget writes u.RequestURI() without building it.
func writeTarget(w *bufio.Writer, u *url.URL) {
	switch {
	case u.Opaque == "":
		p := u.EscapedPath()
		if p == "" {
			p = "/"
		}
		w.WriteString(p)
	case strings.HasPrefix(u.Opaque, "//"):
		w.WriteString(u.Scheme)
		w.WriteByte(':')
		w.WriteString(u.Opaque)
	default:
		w.WriteString(u.Opaque)
	}
	if u.ForceQuery || u.RawQuery != "" {
		w.WriteByte('?')
		w.WriteString(u.RawQuery)
	}
}

func writeField(w *bufio.Writer, k, v string) {
	w.WriteString(k)
	w.WriteString(": ")
	w.WriteString(v)
	w.WriteString("\r\n")
}

// trim removes leading and trailing ASCII white space, as
// textproto.TrimString does (values hold no CR or LF: see checkRequest).
func trim(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// hasToken reports whether a comma-separated list in vs holds token,
// whatever its case.
func hasToken(vs []string, token string) bool {
	for _, v := range vs {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// alnumAnd returns a byte set of the ASCII letters and digits, and extra.
func alnumAnd(extra string) (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range extra {
		t[c] = true
	}
	return t
}

// hasCTL reports whether s holds a control byte.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < ' ' || b == 0x7f {
			return true
		}
	}
	return false
}

// validHost reports whether h holds only bytes a host and port may (the
// bytes httpguts.ValidHostHeader allows).
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		if !hostByte[h[i]] {
			return false
		}
	}
	return true
}

var hostByte = alnumAnd("!$%&'()*+,;=-._~:[]")

// removeZone removes an IPv6 zone from a bracketed host, as net/http does.
func removeZone(host string) string {
	if !strings.HasPrefix(host, "[") {
		return host
	}
	i := strings.LastIndex(host, "]")
	if i < 0 {
		return host
	}
	j := strings.LastIndex(host[:i], "%")
	if j < 0 {
		return host
	}
	return host[:j] + host[i:]
}
