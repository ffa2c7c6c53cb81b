// Package redact hides the secrets a URL may carry before it is written
// into an error, a log line or an admin view.
package redact

import "strings"

// Mask replaces the user information of a URL.
const Mask = "xxxxx"

// URL returns s, a URL as given (it need not parse), with the user
// information of its authority replaced by Mask: "http://u:p@h:1/x" is
// "http://xxxxx@h:1/x". Unlike url.URL.Redacted it hides the user name
// too, since a lone user name is often a token ("http://TOKEN@host"), and
// it works on strings url.Parse refuses, whose errors would otherwise
// quote them whole. Without "://" the authority is taken to start the
// string ("user:pass@host:8080", the scheme forgotten): a mistyped URL
// is where a secret is most likely to end up in an error. A string
// without "@" in its authority is returned as it is.
func URL(s string) string {
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	} else if strings.HasPrefix(s, "//") {
		start = len("//") // a network-path reference
	}
	end := len(s)
	if j := strings.IndexAny(s[start:], "/?#"); j >= 0 {
		end = start + j
	}
	// The last "@" ends the user information: a password may hold an
	// unescaped "@", a host never does.
	at := strings.LastIndexByte(s[start:end], '@')
	if at < 0 {
		return s
	}
	return s[:start] + Mask + s[start+at:]
}
