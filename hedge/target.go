package hedge

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/tailgate-dev/tailgate/internal/redact"
)

// ParseTarget parses and checks a target base URL: http or https, a host,
// no query, fragment or user information. Its errors name the target once,
// with any user information masked (see redact.URL): callers that wrap
// them need not, and should not, name it again.
func ParseTarget(s string) (*url.URL, error) {
	if shown := redact.URL(s); shown != s {
		// Refused before parsing: url.Parse's errors quote the string
		// whole, or a piece of the user information.
		return nil, fmt.Errorf("%w: target %q: must not carry user information", ErrInvalidPolicy, shown)
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message quotes s again
		}
		return nil, fmt.Errorf("%w: target %q: %w", ErrInvalidPolicy, s, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: target %q: scheme must be http or https", ErrInvalidPolicy, s)
	case u.Host == "":
		return nil, fmt.Errorf("%w: target %q: no host", ErrInvalidPolicy, s)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("%w: target %q: must not have a query or fragment", ErrInvalidPolicy, s)
	case u.User != nil:
		return nil, fmt.Errorf("%w: target %q: must not carry user information", ErrInvalidPolicy, s)
	}
	if u.Path == "/" {
		u.Path, u.RawPath = "", ""
	}
	// One spelling per target, so duplicates are caught however written:
	// scheme and host in lower case, the scheme's default port dropped.
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
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

// rewriteURL sets *dst to src re-aimed at target.
func rewriteURL(dst, src, target *url.URL) {
	*dst = *src
	dst.Scheme = target.Scheme
	dst.Host = target.Host
	if target.Path != "" {
		if target.RawPath == "" && src.RawPath == "" {
			dst.Path = joinSlash(target.Path, src.Path)
		} else {
			escaped := joinSlash(target.EscapedPath(), src.EscapedPath())
			if p, err := url.PathUnescape(escaped); err == nil {
				dst.Path, dst.RawPath = p, escaped
			}
		}
	}
}

func joinSlash(a, b string) string {
	return strings.TrimSuffix(a, "/") + "/" + strings.TrimPrefix(b, "/")
}
