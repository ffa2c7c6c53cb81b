package h1server

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// BenchmarkServe is a keep-alive client on loopback reading a small
// answer, as a proxied read's client side is: this server against
// net/http's with the same settings, the client's own cost the same in
// both (a raw request, a minimal response reader).
//
//	go test -run '^$' -bench Serve -benchmem -count 6 ./internal/h1server
func BenchmarkServe(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"text/plain"}
		w.Header()["X-Replica"] = []string{"a"}
		io.WriteString(w, "a small answer from the backend")
	})
	for _, name := range []string{"h1server", "net/http"} {
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			var serveFn func(net.Listener) error
			var closeFn func() error
			if name == "h1server" {
				s := &Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute}
				serveFn, closeFn = s.Serve, s.Close
			} else {
				s := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute}
				serveFn, closeFn = s.Serve, s.Close
			}
			done := make(chan struct{})
			go func() { serveFn(ln); close(done) }()
			defer func() { closeFn(); <-done }()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			req := []byte("GET /item?id=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if err := readSmall(br); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// readSmall reads an answer with a Content-Length, allocating nothing.
func readSmall(br *bufio.Reader) error {
	n := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(": ")); ok && string(k) == "Content-Length" {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if n < 0 {
		return io.ErrUnexpectedEOF
	}
	_, err := br.Discard(n)
	return err
}
