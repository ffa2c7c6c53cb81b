package h1head

import (
	"net/http"
	"reflect"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBlockEnd(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"GET / HTTP/1.1\r\nHost: h\r\n\r\nbody", 27},
		{"GET / HTTP/1.1\r\nHost: h\r\n", 0},
		{"GET / HTTP/1.1\nHost: h\n\n", 0},
		{"\r\n\r\n", 4},
	} {
		if got := block([]byte(c.in)); got != c.want {
			t.Errorf("block(%q) = %d; want %d", c.in, got, c.want)
		}
	}
}

func TestLineCut(t *testing.T) {
	if line, rest, ok := line("a b\r\nc\r\n"); !ok || line != "a b" || rest != "c\r\n" {
		t.Errorf("line: %q %q %v", line, rest, ok)
	}
	for _, s := range []string{"a\nb\r\n", "a b", "a\rb"} {
		if _, _, ok := line(s); ok {
			t.Errorf("line(%q) ok; want a lone LF or no CRLF refused", s)
		}
	}
}

// Fields reads as textproto.ReadMIMEHeader: canonical keys, repeated
// keys' values in order, values trimmed of spaces and tabs; it refuses
// what ReadMIMEHeader would read otherwise or refuse.
func TestFields(t *testing.T) {
	h, ok := Fields("host: h\r\nX-A: 1\r\nx-a:  2 \t\r\nX-Empty:\r\nX-Obs: \x80\xff\r\ncontent-TYPE: a/b\r\n", nil)
	want := http.Header{"Host": {"h"}, "X-A": {"1", "2"}, "X-Empty": {""}, "X-Obs": {"\x80\xff"}, "Content-Type": {"a/b"}}
	if !ok || !reflect.DeepEqual(h, want) {
		t.Errorf("Fields = %q, %v; want %q", h, ok, want)
	}
	for _, s := range []string{
		" folded: x\r\n",       // a line that starts with a space
		"A: 1\r\n\tfolded\r\n", // a folded line
		"Host : h\r\n",         // a space before the colon
		": v\r\n",              // no name
		"No colon\r\n",         // no colon
		"A: a\rb\r\n",          // a CR in a value
		"A: a\nB: b\r\n",       // a lone LF
		"A: \x00\r\n",          // a control byte
		"A: \x7f\r\n",          // DEL
		"A\x80: v\r\n",         // a name not a token
		"A: 1\r\nB: 2",         // a line without its CRLF
	} {
		if _, ok := Fields(s, nil); ok {
			t.Errorf("Fields(%q) taken; want it left to net/http", s)
		}
	}
	// A field the caller refuses stops it, whatever the name's case.
	if _, ok := Fields("A: 1\r\ntransfer-encoding: chunked\r\n", []string{"Transfer-Encoding"}); ok {
		t.Error("a refused field taken")
	}
}
