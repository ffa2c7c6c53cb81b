package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
)

var errNoDial = errors.New("test: no dial")

// FuzzWireFormat checks the requests the Transport writes against
// net/http's: a request net/http's Transport refuses (a method, header
// name or value it does not allow) is refused before anything is sent,
// and any other is written byte for byte as net/http's Request.Write
// writes it (what its Transport sends, with compression off and no
// proxy). The seeds run as a test; `go test -run '^$' -fuzz
// FuzzWireFormat ./internal/h1/` explores.
func FuzzWireFormat(f *testing.F) {
	for _, s := range []struct{ method, target, host, name, value string }{
		{"GET", "/x?q=1", "", "Accept", "*/*"},
		{"HEAD", "/", "", "User-Agent", ""},
		{"GET", "/a%2Fb;p?x=%20y&z=1+2", "", "X-A", "  padded\t"},
		{"GET", "//double/slash?", "", "X-Multi", "a"},
		{"GET", "/x", "h.example:8080", "Cookie", "a=b; c=d"},
		{"GET", "/x", "[fe80::1%25lo0]:80", "X", "y"},
		{"GET", "/x", "bad host", "X", "y"},
		{"DELETE", "/x", "", "Connection", "close"},
		{"POST", "/x", "", "Idempotency-Key", "k"},
		{"OPTIONS", "/x", "", "Te", "trailers"},
		{"G ET", "/x", "", "X", "y"},
		{"GET", "/x", "", "Bad Name", "y"},
		{"GET", "/x", "", "X-Ctl", "a\x01b"},
		{"GET", "/x", "", "X-Crlf", "a\r\nInjected: 1"},
		{"GET", "/x", "", "X-Del", "a\x7fb"},
		{"GET", "/x", "", "X-Obs", "caf\xc3\xa9"},
	} {
		f.Add(s.method, s.target, s.host, s.name, s.value)
	}
	ref := &http.Transport{DisableCompression: true, DialContext: func(context.Context, string, string) (net.Conn, error) { return nil, errNoDial }}
	f.Fuzz(func(t *testing.T, method, target, host, name, value string) {
		req, err := http.NewRequest(method, "http://127.0.0.1:9", nil)
		if err != nil {
			return
		}
		if req.URL, err = req.URL.Parse(target); err != nil || req.URL.Scheme != "http" || req.URL.Host == "" {
			return
		}
		req.Host = host
		req.Header.Add(name, value)
		req.Header.Add("X-Multi", "2nd")
		if !handles(req) {
			return
		}
		var want bytes.Buffer
		_, refErr := ref.RoundTrip(req)
		netOK := errors.Is(refErr, errNoDial) && req.Write(&want) == nil
		if err := checkRequest(req); (err == nil) != netOK {
			t.Fatalf("checkRequest: %v; net/http's Transport: %v", err, refErr)
		}
		if !netOK {
			return
		}
		var got bytes.Buffer
		w := bufio.NewWriter(&got)
		writeRequest(w, req)
		w.Flush()
		if got.String() != want.String() {
			t.Fatalf("wrote\n%q\nnet/http writes\n%q", got.String(), want.String())
		}
	})
}
