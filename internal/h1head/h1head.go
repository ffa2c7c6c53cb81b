// Package h1head reads the common HTTP/1.1 header block (whole in a
// buffer, each line ended by CRLF, no folded lines, nothing net/http
// would take otherwise) in one pass and a few allocations, and reads it
// exactly as net/http's ReadRequest and ReadResponse read it: canonical
// keys, values trimmed of spaces and tabs, the same header map. Whatever
// it is not sure of it leaves alone: its callers then parse with
// net/http, which gives its own answer and its own errors. So it can
// never be laxer than net/http, only quicker on what it takes; each
// caller's fuzz test (FuzzFastRequest in internal/h1server,
// FuzzFastResponse in internal/h1) checks that on arbitrary bytes.
//
// Why: textproto's general reader (line by line, a string per value, a
// count of the lines before, the transfer rules after) was a tenth of the
// gateway's CPU; docs/performance.md has the figures.
package h1head

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// block returns the length of the header block at the start of b,
// through the CRLF of its empty line, when b holds it whole; 0 when it
// does not. A block with any other line end is not seen as whole: line,
// Fields and the start-line parsers refuse a lone CR or LF within it.
func block(b []byte) int {
	i := bytes.Index(b, crlfcrlf)
	if i < 0 {
		return 0
	}
	return i + len(crlfcrlf)
}

var crlfcrlf = []byte("\r\n\r\n")

// Peek looks for a whole header block at the start of br's buffer,
// without reading: n is its length, 0 when the buffer does not hold it
// (or holds a start line with a lone LF). start is its start line, and
// fields its field lines, each with its CRLF: one copy of the block for
// both, which keys and values are cut from.
func Peek(br *bufio.Reader) (start, fields string, n int) {
	b, _ := br.Peek(br.Buffered())
	n = block(b)
	if n == 0 {
		return "", "", 0
	}
	start, fields, ok := line(string(b[:n-2])) // the empty line left out
	if !ok {
		return "", "", 0
	}
	return start, fields, n
}

// line cuts s at its first CRLF: the line before it and what follows.
// ok is false when s has no CRLF, or a lone LF before it (where net/http
// would end the line sooner).
func line(s string) (l, rest string, ok bool) {
	i := strings.Index(s, "\r\n")
	if i < 0 || strings.IndexByte(s[:i], '\n') >= 0 {
		return "", "", false
	}
	return s[:i], s[i+2:], true
}

// Fields parses s, the field lines of a header block, each ended by
// CRLF (the empty line excluded), into a header as
// textproto.ReadMIMEHeader would. ok is false for anything it would
// read otherwise or refuse: a line that starts with a space or tab (a
// folded or malformed line), a name that is not a token (empty, a
// space before the colon), a byte of a value that is not one (CR, LF,
// other controls), or a field whose canonical name is in refuse (what
// the caller leaves to net/http: it stops there). Keys and values are
// substrings of s where their text is s's.
func Fields(s string, refuse []string) (h http.Header, ok bool) {
	n := strings.Count(s, "\r\n")
	h = make(http.Header, n)
	// One slice cut up among the keys, as textproto does: most have one
	// value.
	strs := make([]string, n)
	for s != "" {
		l, rest, ok := line(s)
		if !ok {
			return nil, false
		}
		s = rest
		// textproto's rules for names and values are httpguts'.
		name, value, ok := strings.Cut(l, ":")
		if !ok || !httpguts.ValidHeaderFieldName(name) || !httpguts.ValidHeaderFieldValue(value) {
			return nil, false
		}
		value = textproto.TrimString(value)
		key := textproto.CanonicalMIMEHeaderKey(name)
		if slices.Contains(refuse, key) {
			return nil, false
		}
		if vv, seen := h[key]; seen {
			h[key] = append(vv, value)
			continue
		}
		vv := strs[:1:1]
		strs = strs[1:]
		vv[0] = value
		h[key] = vv
	}
	return h, true
}
