package h1server

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"testing"
)

// FuzzFastRequest reads the same bytes with readFast and with
// http.ReadRequest: whatever readFast takes, ReadRequest must take too,
// as the same request (every field of it), leaving the same bytes
// unread. What readFast leaves, it must leave untouched.
func FuzzFastRequest(f *testing.F) {
	for _, s := range append(fastTaken, fastLeft...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fast := bufio.NewReaderSize(bytes.NewReader(raw), 4<<10)
		fast.Peek(1) // fill the buffer, as the server's wait for a request does
		got := readFast(fast)
		if got == nil {
			if fast.Buffered() != min(len(raw), 4<<10) {
				t.Fatalf("%q: left, but read from (%d buffered)", raw, fast.Buffered())
			}
			return
		}
		std := bufio.NewReaderSize(bytes.NewReader(raw), 4<<10)
		want, err := http.ReadRequest(std)
		if err != nil {
			t.Fatalf("%q: taken as %+v; http.ReadRequest: %v", raw, got, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nreadFast:        %+v\nhttp.ReadRequest: %+v", raw, got, want)
		}
		restFast, _ := io.ReadAll(fast)
		restStd, _ := io.ReadAll(std)
		if !bytes.Equal(restFast, restStd) {
			t.Fatalf("%q: readFast left %q, ReadRequest %q", raw, restFast, restStd)
		}
	})
}

// fastTaken: requests readFast takes; fastLeft: near misses it leaves
// to net/http.
var fastTaken = []string{
	"GET /item?id=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
	"GET /a HTTP/1.1\r\nhost: h\r\nuser-agent: x\r\nAccept: */*\r\nX-Many: 1\r\nx-many: 2\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\n",
	"HEAD /%7Ea/b%2Fc?q=%20#f HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Trim: \t v \t\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Close\r\nTrailer: X\r\n\r\n",
	"GET /a HTTP/1.1\r\nX: \x80\xff\r\nHost: h\r\n\r\n",
	"GET //h/a HTTP/1.1\r\nHost: h\r\n\r\n",
}

var fastLeft = []string{
	"POST /search HTTP/1.1\r\nHost: h\r\n\r\n",
	"DELETE /a HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: h\nX: y\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: h\r\n\nX: y\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost : h\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n",
	"GET /a HTTP/1.1\r\nX: a\rb\r\nHost: h\r\n\r\n",
	"GET http://h/a HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /a HTTP/1.0\r\nHost: h\r\n\r\n",
	"GET /a HTTP/1.1 \r\nHost: h\r\n\r\n",
	"G(T /a HTTP/1.1\r\nHost: h\r\n\r\n",
	"CONNECT /a HTTP/1.1\r\nHost: h\r\n\r\n",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: h\r\n",
}

// readFast takes the common request with a handful of allocations: the
// block's copy, the URL, the header and its values' slice, the request.
func TestReadFastAllocations(t *testing.T) {
	raw := []byte("GET /item?id=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: x\r\nAccept: */*\r\n\r\n")
	br := bufio.NewReaderSize(nil, 4<<10)
	var r bytes.Reader
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(raw)
		br.Reset(&r)
		br.Peek(1)
		if readFast(br) == nil {
			t.Fatal("not taken")
		}
	})
	if allocs > 6 {
		t.Errorf("%.0f allocations a request; want at most 6", allocs)
	}
}

// readFast takes what it should, and leaves the near misses.
func TestReadFastTakes(t *testing.T) {
	for _, c := range []struct {
		reqs  []string
		taken bool
	}{{fastTaken, true}, {fastLeft, false}} {
		for _, s := range c.reqs {
			br := bufio.NewReader(bytes.NewReader([]byte(s)))
			br.Peek(1)
			if got := readFast(br) != nil; got != c.taken {
				t.Errorf("%q: taken %v; want %v", s, got, c.taken)
			}
		}
	}
}
