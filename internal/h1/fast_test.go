package h1

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"reflect"
	"testing"
)

// FuzzFastResponse reads the same bytes, answering a GET, with readFast
// (its body through readLength) and with http.ReadResponse: whatever
// readFast takes, ReadResponse must take too, as the same response
// (every field but Body), with the same body and the same end to it
// (io.EOF, or io.ErrUnexpectedEOF when the bytes stop short), leaving
// the same bytes unread. What readFast leaves, it must leave untouched.
func FuzzFastResponse(f *testing.F) {
	for _, s := range append(fastTaken, fastLeft...) {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(fastTaken[0]), true)
	f.Fuzz(func(t *testing.T, raw []byte, head bool) {
		req := &http.Request{Method: http.MethodGet}
		if head {
			req.Method = http.MethodHead
		}
		fast := bufio.NewReaderSize(bytes.NewReader(raw), bufSize)
		fast.Peek(1)
		got := readFast(fast, req)
		if got == nil {
			if fast.Buffered() != min(len(raw), bufSize) {
				t.Fatalf("%q: left, but read from (%d buffered)", raw, fast.Buffered())
			}
			return
		}
		std := bufio.NewReaderSize(bytes.NewReader(raw), bufSize)
		want, err := http.ReadResponse(std, req)
		if err != nil {
			t.Fatalf("%q: taken as %+v; http.ReadResponse: %v", raw, got, err)
		}
		var gotBody []byte
		var gotErr error
		if got.Body == http.NoBody {
			gotBody, gotErr = io.ReadAll(got.Body)
		} else if got.Body != nil {
			t.Fatalf("%q: readFast's body %T", raw, got.Body)
		} else {
			remain := got.ContentLength
			gotBody, gotErr = io.ReadAll(readerFunc(func(p []byte) (int, error) { return readLength(fast, &remain, p) }))
		}
		wantBody, wantErr := io.ReadAll(want.Body)
		if !bytes.Equal(gotBody, wantBody) || gotErr != wantErr {
			t.Fatalf("%q: readFast's body %q, %v; ReadResponse's %q, %v", raw, gotBody, gotErr, wantBody, wantErr)
		}
		if got.Body == nil {
			// A read after the end says the end again; after a short
			// one, short again (where ReadResponse's says io.EOF).
			end := io.EOF
			if gotErr == io.ErrUnexpectedEOF {
				end = gotErr
			}
			if _, err := readLength(fast, new(int64(got.ContentLength-int64(len(gotBody)))), make([]byte, 8)); err != end {
				t.Fatalf("%q: a read after the body's end: %v; want %v", raw, err, end)
			}
		}
		if (got.Body == http.NoBody) != (want.Body == http.NoBody) {
			t.Fatalf("%q: readFast's body %T, ReadResponse's %T", raw, got.Body, want.Body)
		}
		got.Body, want.Body = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nreadFast:         %+v\nhttp.ReadResponse: %+v", raw, got, want)
		}
		restFast, _ := io.ReadAll(fast)
		restStd, _ := io.ReadAll(std)
		if !bytes.Equal(restFast, restStd) {
			t.Fatalf("%q: readFast left %q, ReadResponse %q", raw, restFast, restStd)
		}
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// fastTaken: answers readFast takes; fastLeft: near misses it leaves to
// net/http.
var fastTaken = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Wed, 02 Dec 2026 17:05:36 GMT\r\nContent-Length: 29\r\n\r\n{\"value\":\"0123456789abcdef\"}\nHTTP/1.1",
	"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nConnection: close\r\nX-A: 1\r\nx-a: 2\r\n\r\n",
	"HTTP/1.1 200\r\nContent-Length:  007 \r\nConnection: keep-alive\r\nTrailer: X\r\n\r\nabc",
	"HTTP/1.1 404 \x80\r\nContent-Length: 3\r\nX: \x80\xff\r\n\r\nabc",
}

var fastLeft = []string{
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nPragma: no-cache\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\n\r\nto the close",
	"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1  200 OK\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 2000 OK\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n folded\r\n\r\nabc",
	"HTTP/1.1 200 OK\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length : 3\r\n\r\nabc",
	"HTTP/1.1 200 O\x01K\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n",
}

// readFast takes what it should, and leaves the near misses; never the
// answer to a HEAD.
func TestReadFastTakes(t *testing.T) {
	for _, c := range []struct {
		resps  []string
		method string
		taken  bool
	}{{fastTaken, "GET", true}, {fastLeft, "GET", false}, {fastTaken, "HEAD", false}} {
		for _, s := range c.resps {
			br := bufio.NewReader(bytes.NewReader([]byte(s)))
			br.Peek(1)
			if got := readFast(br, &http.Request{Method: c.method}) != nil; got != c.taken {
				t.Errorf("%s, %q: taken %v; want %v", c.method, s, got, c.taken)
			}
		}
	}
}

// readFast takes the common answer with a handful of allocations: the
// block's copy, the header and its values' slice, the response.
func TestReadFastAllocations(t *testing.T) {
	raw := []byte(fastTaken[0])
	br := bufio.NewReaderSize(nil, bufSize)
	req := &http.Request{Method: http.MethodGet}
	var r bytes.Reader
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(raw)
		br.Reset(&r)
		br.Peek(1)
		if readFast(br, req) == nil {
			t.Fatal("not taken")
		}
	})
	if allocs > 5 {
		t.Errorf("%.0f allocations an answer; want at most 5", allocs)
	}
}

// A body that ended short says so at every read after, on either path
// (ReadResponse's own body says io.EOF then), and its connection is never
// pooled.
func TestShortBodyStaysShort(t *testing.T) {
	for _, c := range []struct{ name, resp string }{
		{"fast", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"},
		{"net/http", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nPragma: x\r\n\r\nabc"}, // Pragma: ReadResponse's
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newRawServer(t, func(nc net.Conn, br *bufio.Reader) {
				if _, err := http.ReadRequest(br); err == nil {
					io.WriteString(nc, c.resp)
				}
			})
			tr := newTransport(t, Config{})
			resp, err := get(context.Background(), tr, s.URL+"/x")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadAll(resp.Body); err != io.ErrUnexpectedEOF {
				t.Errorf("read to the end: %v; want %v", err, io.ErrUnexpectedEOF)
			}
			if _, err := resp.Body.Read(make([]byte, 8)); err != io.ErrUnexpectedEOF {
				t.Errorf("read again: %v; want %v", err, io.ErrUnexpectedEOF)
			}
			resp.Body.Close()
			p := tr.pool(resp.Request.URL.Host)
			p.mu.Lock()
			idle := len(p.idle)
			p.mu.Unlock()
			if idle != 0 {
				t.Errorf("%d idle connections after a body that ended short; want 0", idle)
			}
		})
	}
}
