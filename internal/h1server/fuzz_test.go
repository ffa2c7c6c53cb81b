package h1server

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// FuzzServers sends the same bytes on one connection to this server and
// to net/http's, each serving a handler that records every request it is
// handed (as the gateway would forward it: method, target, version, Host,
// header, body), and fails when this server hands over a request that
// net/http's does not, or hands it over otherwise: h1server may refuse
// more (see the package doc for where it is stricter), never less. The
// client closes its side after the bytes, so that neither server waits
// for more.
//
// Its corpus is testdata/fuzz/FuzzServers, run by go test as a test;
// `go test -run '^$' -fuzz FuzzServers ./internal/h1server` explores
// (.ci/run does, briefly).
func FuzzServers(f *testing.F) {
	ours, theirs := &requestLog{}, &requestLog{}
	// The same limits on both: a hang is a failure, not a wait.
	h1 := &Server{Handler: ours, ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	std := &http.Server{Handler: theirs, ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0), DisableGeneralOptionsHandler: true}
	h1Addr, stdAddr := serveOn(f, h1), serveOn(f, std)

	f.Fuzz(func(t *testing.T, raw []byte) {
		ours.reset()
		theirs.reset()
		var wg sync.WaitGroup
		var h1Out, stdOut []byte
		var h1Err, stdErr error
		wg.Go(func() { h1Out, h1Err = exchange(h1Addr, raw) })
		wg.Go(func() { stdOut, stdErr = exchange(stdAddr, raw) })
		wg.Wait()
		if h1Err != nil || stdErr != nil {
			t.Fatalf("%q: h1server: %v; net/http: %v", raw, h1Err, stdErr)
		}
		got, want := ours.taken(), theirs.taken()
		for i, r := range got {
			if i >= len(want) {
				t.Fatalf("%q: h1server handed over %d requests, net/http %d; the first more:\n%s\nh1server answered %q\nnet/http answered %q",
					raw, len(got), len(want), r, h1Out, stdOut)
			}
			if r != want[i] {
				t.Fatalf("%q: request %d handed over as\n%s\nby h1server, as\n%s\nby net/http", raw, i, r, want[i])
			}
		}
	})
}

// serveOn serves s on a loopback listener until f ends, and returns its
// address.
func serveOn(f *testing.F, s interface {
	Serve(net.Listener) error
	Close() error
}) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	f.Cleanup(func() { s.Close(); <-done })
	return ln.Addr().String()
}

// exchange writes raw on a new connection to addr, closes its side, and
// returns what comes back until the server closes.
func exchange(addr string, raw []byte) ([]byte, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	go func() {
		// Written aside: a server may answer (and stop reading) before
		// all of it is sent.
		c.Write(raw)
		c.(*net.TCPConn).CloseWrite()
	}()
	out, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return out, fmt.Errorf("no close after 5s (answered %q)", out)
	}
	return out, nil // a reset after the answer is a close
}

// requestLog is a handler that records the requests it is handed, read
// whole, as text, and answers 200.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q %s Host %q\n", r.Method, r.RequestURI, r.Proto, r.Host)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range r.Header {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "%s: %q\n", k, r.Header[k])
	}
	fmt.Fprintf(&b, "Content-Length %d, Transfer-Encoding %q, Close %v\nbody %q", r.ContentLength, r.TransferEncoding, r.Close, body)
	if err != nil {
		b.WriteString(" (cut short)")
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, b.String())
	l.mu.Unlock()
	io.WriteString(w, "ok")
}

func (l *requestLog) reset() {
	l.mu.Lock()
	l.reqs = nil
	l.mu.Unlock()
}

func (l *requestLog) taken() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}
