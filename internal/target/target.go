// Package target parses the base URLs of replicas (a hedge.Transport's
// targets, a gateway's backends) and says, once and plainly, what is wrong
// with one that cannot be used.
package target

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/tailgate-dev/tailgate/internal/redact"
)

// Error is why a base URL was refused: the URL as given (its user
// information masked, see redact.URL) and the problem in words. It carries
// no package prefix, so that each caller adds its own once
// ("hedge: invalid policy: target ...", "gateway: invalid configuration:
// backend ..."), rather than prefixes piling up as errors are wrapped.
type Error struct {
	URL     string // redacted
	Problem string
}

// Error returns the URL, quoted, and the problem: `"x": problem`.
func (e *Error) Error() string { return strconv.Quote(e.URL) + ": " + e.Problem }

// Parse parses and checks a base URL: http or https, a host, a port (if
// any) within 1 to 65535, no query, fragment or user information. It
// returns the URL in one spelling per server, so that duplicates are
// caught however written: scheme and host in lower case, the scheme's
// default port dropped, a lone "/" path dropped. Its errors are *Error.
func Parse(s string) (*url.URL, error) {
	if shown := redact.URL(s); shown != s {
		// Refused before parsing: url.Parse's errors quote the string
		// whole, or a piece of the user information.
		return nil, &Error{shown, "must not carry user information"}
	}
	if !strings.Contains(s, "://") {
		// "127.0.0.1:8081" fails in url.Parse with "first path segment in
		// URL cannot contain colon", and "localhost:8081" parses with
		// "localhost" as its scheme: neither says what is missing.
		return nil, &Error{s, "URLs need http:// or https://, such as " + example(s)}
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message quotes s again
		}
		return nil, &Error{s, err.Error()}
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https": // url.Parse lower-cases it
		return nil, &Error{s, "scheme must be http or https"}
	case u.Host == "" || u.Hostname() == "":
		return nil, &Error{s, "no host"}
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, &Error{s, "must not have a query or fragment"}
	case u.User != nil:
		return nil, &Error{s, "must not carry user information"}
	}
	port := u.Port()
	if port != "" {
		// url.Parse takes any run of digits: 99999 would only fail when
		// the first attempt dials it.
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, &Error{s, "port " + port + " out of range: want 1 to 65535"}
		}
	}
	if u.Path == "/" {
		u.Path, u.RawPath = "", ""
	}
	host := strings.ToLower(u.Hostname())
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	u.Host = host
	if strings.Contains(host, ":") {
		u.Host = "[" + host + "]" // an IPv6 literal
	}
	if port != "" {
		u.Host += ":" + port
	}
	return u, nil
}

// example suggests the URL meant by s, which lacks "://": s after
// "http://", or after its own scheme when it has "http:" or "https:".
func example(s string) string {
	if strings.HasPrefix(s, "//") {
		return "http:" + s
	}
	for _, scheme := range []string{"http", "https"} {
		if len(s) > len(scheme) && strings.EqualFold(s[:len(scheme)+1], scheme+":") {
			return scheme + "://" + strings.TrimLeft(s[len(scheme)+1:], "/")
		}
	}
	return "http://" + s
}
