package tied_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/tied"
)

// loopback is a pair of real HTTP servers on 127.0.0.1, a and b, each with
// tied middleware naming the other as its peer.
type loopback struct {
	url  [2]string
	http [2]*httptest.Server
	srv  [2]*tied.Server
}

func newLoopback(t *testing.T, cfg tied.ServerConfig, handler func(i int) http.Handler) *loopback {
	t.Helper()
	l := &loopback{}
	for i := range 2 {
		l.http[i] = httptest.NewUnstartedServer(nil)
		l.url[i] = "http://" + l.http[i].Listener.Addr().String()
	}
	for i := range 2 {
		c := cfg
		c.Peers = []string{l.url[1-i]}
		s, err := tied.NewServer(c)
		if err != nil {
			t.Fatal(err)
		}
		l.srv[i] = s
		l.http[i].Config.Handler = s.Handler(handler(i))
		l.http[i].Start()
	}
	return l
}

// close stops the HTTP servers (waiting for their handlers), then the tied
// servers (waiting for their cancels).
func (l *loopback) close() {
	for i := range 2 {
		l.http[i].Close()
	}
	for i := range 2 {
		l.srv[i].Close()
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Over real HTTP: the copy queued behind a busy worker on a is dropped when
// b starts its twin, and b's answer is the client's.
func TestLoopbackTwinDropped(t *testing.T) {
	release := make(chan struct{})
	var ranOnA atomic.Int32
	var l *loopback
	l = newLoopback(t, tied.ServerConfig{Workers: 1}, func(i int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/block":
				<-release
			case i == 0:
				ranOnA.Add(1)
			default:
				// Answer once a has dropped its copy, which would
				// otherwise be cancelled by the client as a loser. On a
				// loaded machine b's cancel may overtake a's copy, which
				// is then dropped on arrival.
				waitFor(t, "a to drop its copy", func() bool { return dropped(l.srv[0].Stats()) == 1 })
			}
			io.WriteString(w, []string{"a", "b"}[i])
		})
	})
	defer l.close()
	var blocked sync.WaitGroup
	blocked.Go(func() {
		resp, err := http.Get(l.url[0] + "/block")
		if err == nil {
			resp.Body.Close()
		}
	})
	defer blocked.Wait()
	defer close(release)
	waitFor(t, "a's worker to be busy", func() bool { return l.srv[0].Stats().Running == 1 })

	tr, err := tied.NewTransport(tied.TransportConfig{Targets: l.url[:]})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := client.Get("http://ignored/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "b" {
		t.Fatalf("got %d %q, want b's answer", resp.StatusCode, b)
	}
	if sa, sb := l.srv[0].Stats(), l.srv[1].Stats(); dropped(sa) != 1 || sa.Queued != 0 || sb.Dequeued != 1 {
		t.Errorf("a %+v\nb %+v", sa, sb)
	}
	l.srv[1].Shutdown(t.Context()) // waits for b's cancel to be answered
	if got := l.srv[1].Stats(); got.CancelsSent != 1 || got.CancelsFailed != 0 {
		t.Errorf("b's cancel: %+v", got)
	}
	if ranOnA.Load() != 0 {
		t.Error("a ran the dropped copy")
	}
}

// Over real HTTP, a twin whose server refuses connections or never answers
// costs the running copy nothing; the failed cancels are counted.
func TestLoopbackUnreachableTwin(t *testing.T) {
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + refused.Addr().String()
	refused.Close()
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	var conns sync.WaitGroup
	defer conns.Wait()
	conns.Go(func() {
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	})
	holeURL := "http://" + hole.Addr().String()

	s, err := tied.NewServer(tied.ServerConfig{
		Workers:       1,
		Peers:         []string{refusedURL, holeURL},
		CancelTimeout: time.Minute, // the request must not wait for it
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})))
	defer srv.Close()
	for _, peer := range []string{holeURL, refusedURL} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/x", nil)
		req.Header.Set(tiedwire.TieHeader, tiedwire.NewTie())
		req.Header.Set(tiedwire.PeerHeader, peer)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err != nil {
			t.Fatalf("peer %s: %v", peer, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("peer %s: %d", peer, resp.StatusCode)
		}
	}
	if got := s.Stats(); got.CancelsSent != 0 || got.Dequeued != 2 {
		t.Errorf("%+v", got)
	}
	s.Close() // abandons the cancel stuck at the hole
	if got := s.Stats(); got.CancelsFailed != 2 {
		t.Errorf("after Close: %+v", got)
	}
	http.DefaultClient.CloseIdleConnections()
	hole.Close()
}

// Many tied requests over real HTTP: every one is answered, and every copy
// that reached a server is accounted for exactly once.
func TestLoopbackAccounting(t *testing.T) {
	var runs [2]atomic.Uint64
	l := newLoopback(t, tied.ServerConfig{Workers: 2}, func(i int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs[i].Add(1)
			time.Sleep(time.Millisecond)
			io.WriteString(w, "ok")
		})
	})
	tr, err := tied.NewTransport(tied.TransportConfig{Targets: l.url[:]})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	const workers, each = 4, 15
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range workers {
		wg.Go(func() {
			for range each {
				resp, err := client.Get("http://ignored/x")
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	tr.CloseIdleConnections()
	l.close()
	if failed.Load() != 0 {
		t.Errorf("%d requests failed", failed.Load())
	}
	var total uint64
	for i, s := range l.srv {
		st := s.Stats()
		t.Logf("server %d: %+v", i, st)
		if got := st.Dequeued + st.DroppedByTwin + st.DroppedOnArrival + st.Abandoned + st.QueueFull + st.Displaced; got != st.Tied+st.Untied {
			t.Errorf("server %d: %d copies accounted for, %d arrived", i, got, st.Tied+st.Untied)
		}
		if st.Dequeued != runs[i].Load() {
			t.Errorf("server %d: dequeued %d, ran %d", i, st.Dequeued, runs[i].Load())
		}
		if st.Untied != 0 || st.Queued != 0 || st.Running != 0 {
			t.Errorf("server %d: %+v", i, st)
		}
		total += st.Dequeued
	}
	if total < workers*each || total > 2*workers*each {
		t.Errorf("%d copies ran for %d requests", total, workers*each)
	}
}
