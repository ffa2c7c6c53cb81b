package hedge

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/internal/memnet"
)

// logging is a base RoundTripper wrapper that logs failures with the URL,
// as many middlewares do. It honours cancellation.
type logging struct{ next http.RoundTripper }

func (l logging) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err != nil {
		time.Sleep(time.Millisecond) // the log write
		_ = r.URL.Path + r.Header.Get("X-Req")
	}
	return resp, err
}

// The RoundTripper contract lets a caller reuse a request once it has closed
// the response body. A loser still running then must not read the caller's
// URL or header map (run with -race): a losing hedge, or a losing primary
// whose Base reads its request after returning on cancellation.
func TestLoserNeverReadsCallerRequestAfterReturn(t *testing.T) {
	for _, detach := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			net := &memnet.Transport{}
			slowFirst := detach // detached: the primary loses; inline: the hedge loses
			n := 0
			net.Handle("lb", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hedge := r.Header.Get(HedgeHeader) != ""
				if hedge == slowFirst {
					io.WriteString(w, "fast")
					return
				}
				memnet.Sleep(r.Context(), time.Second)
			}))
			_ = n
			delay := 5 * time.Millisecond
			if !detach {
				delay = time.Millisecond
			}
			tr, err := NewTransport(TransportConfig{Base: logging{net}, Policy: Policy{Delay: delay}})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest("GET", "http://lb/a", nil)
			req.Header.Set("X-Req", "1")
			if !detach {
				// the primary answers after the hedge is out
				net.Handle("lb", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get(HedgeHeader) == "" {
						time.Sleep(2 * time.Millisecond)
						io.WriteString(w, "fast")
						return
					}
					memnet.Sleep(r.Context(), time.Second)
				}))
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// Reuse the request, as the contract allows.
			if detach {
				req.Header.Set("X-Req", "2")
			} else {
				req.URL.Path = "/b"
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			net.Wait()
		})
	}
}

// A GET that asks for a protocol switch (WebSocket and the like) passes
// through once, unbuffered: the upgraded connection is returned as is.
func TestUpgradePassesThrough(t *testing.T) {
	release := make(chan struct{})
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		brw.Flush()
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		_ = bufio.NewReader(conn)
	}))
	defer srv.Close()
	defer close(release)
	base := NewBaseTransport()
	defer base.CloseIdleConnections()
	tr, err := NewTransport(TransportConfig{Base: base, Policy: Policy{Delay: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "test")
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("upgrade request failed after %v (caller deadline 500ms), %d upgrade requests sent: %v", time.Since(start).Round(time.Millisecond), hits.Load(), err)
	}
	defer resp.Body.Close()
	if _, ok := resp.Body.(io.ReadWriteCloser); !ok || resp.StatusCode != 101 {
		t.Fatalf("status %d body %T: the upgraded connection is not returned", resp.StatusCode, resp.Body)
	}
}

// One replica down (fast 503s), primaries alternating between the two
// (a steering that ignores breakers): half the primaries fail and want a
// hedge at once. That is failover, not overload: the gate must not
// pause it, and with budget to spare every request must succeed.
func TestFailoverHedgesBypassGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dead := &backend{lat: time.Millisecond, status: 503}
		ok := &backend{lat: time.Millisecond, body: "ok"}
		tr, _ := newMemTransport(t, Policy{Delay: 50 * time.Millisecond, Budget: mustBudget(t, 0.5, 100)},
			TransportConfig{Targets: []string{"http://a", "http://b"}},
			map[string]*backend{"a": dead, "b": ok})
		failed := 0
		for i := range 200 {
			req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
			rotate := steerFuncs{pick: func(a Attempt, _ []int) (int, error) { return (i + a.Index) % 2, nil }}
			resp, err := tr.RoundTripWith(req, nil, rotate)
			if err != nil || resp.StatusCode != 200 {
				failed++
			}
			if err == nil {
				resp.Body.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		if failed > 0 {
			t.Errorf("%d of 200 requests failed with one healthy replica and budget to spare; stats %+v", failed, tr.Classes().Hedger("GET /").Stats())
		}
	})
}

// If no attempt is accepted, a server's answer (a 503) is returned rather
// than a transport error that arrived after it.
func TestLastResponseBeatsLaterError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &backend{lat: time.Millisecond, status: 503, body: "busy"}
		tr, _ := newMemTransport(t, Policy{Delay: 50 * time.Millisecond}, TransportConfig{Targets: []string{"http://a", "http://nohost"}},
			map[string]*backend{"a": a})
		code, body, err := get(t, tr, "http://x/")
		if err != nil {
			t.Errorf("got error %v; the 503 %q response that arrived was dropped", err, "busy")
		} else if code != 503 {
			t.Errorf("code %d body %q", code, body)
		}
		_ = errors.New
	})
}
