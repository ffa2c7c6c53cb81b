package hedge

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// switcher is a loopback server that answers every request with response
// (a 101, say) and then holds the connection open, reading nothing more,
// until the client closes it; closed receives one value per connection the
// client closed.
type switcher struct {
	ln     net.Listener
	closed chan struct{}
	done   chan struct{}
}

func newSwitcher(t *testing.T, response string) *switcher {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &switcher{ln: ln, closed: make(chan struct{}, 16), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				io.WriteString(c, response)
				// Hold the socket: only the client's close (or 5s) ends
				// this read.
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.Copy(io.Discard, br); err == nil {
					s.closed <- struct{}{} // EOF
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-s.done
	})
	return s
}

func (s *switcher) url() string { return "http://" + s.ln.Addr().String() }

// wantClosed waits (bounded) for the client to close a connection.
func (s *switcher) wantClosed(t *testing.T) {
	t.Helper()
	select {
	case <-s.closed:
	case <-time.After(2 * time.Second):
		t.Error("the client never closed the switched connection")
	}
}

const switch101 = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: evil\r\n\r\nraw"

// A server that switches protocols for a request that asked for no
// upgrade, and then holds the socket, fails the attempt at once: net/http
// hands over the raw connection as the body, which no deadline watches,
// so reading it would last as long as the server pleases. The Transport
// closes it and the attempt's error wraps ErrUnexpectedUpgrade, for GET
// and HEAD (hedged) and for a POST (passed through) alike.
func TestStrayUpgradeFailsAtOnce(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			s := newSwitcher(t, switch101)
			base := NewBaseTransport()
			defer base.CloseIdleConnections()
			tr, err := NewTransport(TransportConfig{Base: base, Targets: []string{s.url()},
				Policy: Policy{MaxAttempts: 1, Timeout: 10 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			var body io.Reader
			if method == http.MethodPost {
				body = strings.NewReader("x")
			}
			req, _ := http.NewRequest(method, "http://x/", body)
			start := time.Now()
			resp, err := tr.RoundTrip(req)
			took := time.Since(start)
			if resp != nil {
				resp.Body.Close()
			}
			if !errors.Is(err, ErrUnexpectedUpgrade) || resp != nil {
				t.Fatalf("RoundTrip = %v, %v after %v; want no response and ErrUnexpectedUpgrade", resp, err, took)
			}
			if !strings.Contains(err.Error(), "101") {
				t.Errorf("error %q does not name the 101", err)
			}
			if took > time.Second {
				t.Errorf("took %v: the attempt waited for the server", took)
			}
			s.wantClosed(t)
		})
	}
}

// A hedge to a healthy replica still wins when the primary's replica
// switches protocols: the stray 101 is a failure, which launches the next
// attempt at once.
func TestStrayUpgradeFailsOverToHealthyReplica(t *testing.T) {
	s := newSwitcher(t, switch101)
	good, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "good") })}
	served := make(chan struct{})
	go func() { srv.Serve(good); close(served) }()
	defer func() { srv.Close(); <-served }()
	base := NewBaseTransport()
	defer base.CloseIdleConnections()
	tr, err := NewTransport(TransportConfig{Base: base, Targets: []string{s.url(), "http://" + good.Addr().String()},
		Policy: Policy{Delay: 5 * time.Second, Budget: mustBudget(t, 1, 10), Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	start := time.Now()
	resp, err := ordered{tr}.RoundTrip(req) // the primary to the switcher
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != 200 || string(b) != "good" || took > time.Second {
		t.Errorf("%d %q after %v; want the healthy replica's answer at once", resp.StatusCode, b, took)
	}
	s.wantClosed(t)
}

// A request that asked for the switch still gets the connection (see
// TestUpgradePassesThrough); a 101 without Upgrade headers, which net/http
// answers with an empty body on a connection it closes itself, is refused
// too.
func TestStray101WithoutUpgradeHeaderRefused(t *testing.T) {
	s := newSwitcher(t, "HTTP/1.1 101 Switching Protocols\r\n\r\n")
	base := NewBaseTransport()
	defer base.CloseIdleConnections()
	tr, err := NewTransport(TransportConfig{Base: base, Targets: []string{s.url()}, Policy: Policy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	if resp, err := tr.RoundTrip(req); !errors.Is(err, ErrUnexpectedUpgrade) {
		if resp != nil {
			resp.Body.Close()
		}
		t.Fatalf("RoundTrip = %v, %v; want ErrUnexpectedUpgrade", resp, err)
	}
	s.wantClosed(t)
}
