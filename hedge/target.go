package hedge

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/tailgate-dev/tailgate/internal/target"
)

// parseTarget parses and checks a target base URL: http or https, a host,
// a port (if any) within 1 to 65535, no query, fragment or user
// information. It returns one spelling per target, so that duplicates are
// caught however written: scheme and host in lower case, the scheme's
// default port dropped. Its errors wrap ErrInvalid and name the
// target once, with any user information masked (see redact.URL): callers
// that wrap them need not, and should not, name it again.
func parseTarget(s string) (*url.URL, error) {
	u, err := target.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: target %w", ErrInvalid, err)
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
