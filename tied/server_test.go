package tied_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/tied"
)

// The copy that starts first has its queued twin dropped: the client gets
// the running copy's answer, the queued copy never runs, and the dropped
// copy's 503 does not win.
func TestTwinStartDropsQueuedCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, nil, "a", "b")
		defer c.close()
		c.apps["b"].lat = 5 * time.Millisecond
		blocker := c.start(t.Context(), "http://a/block") // a's only worker is busy
		synctest.Wait()

		var rcpt hedgeReceipt
		tr := newTiedTransport(t, c.net, &rcpt, "http://a", "http://b")
		start := time.Now()
		resp, body := roundTrip(t, tr, "http://a/x")
		if resp.StatusCode != 200 || body != "b /x" {
			t.Fatalf("got %d %q, want b's answer", resp.StatusCode, body)
		}
		// b's copy went after the 1ms delay and took 5ms.
		if got := time.Since(start); got != 6*time.Millisecond {
			t.Errorf("answered after %v, want 6ms", got)
		}
		synctest.Wait()
		r := rcpt.get(t)
		if r.WinnerTarget != 1 || r.AttemptsLaunched != 2 || r.Attempts[0].Fate.String() != "rejected" ||
			!strings.Contains(r.Attempts[0].Error, "dropped") {
			t.Errorf("receipt: winner %d, %d attempts, first %v %q", r.WinnerTarget, r.AttemptsLaunched, r.Attempts[0].Fate, r.Attempts[0].Error)
		}
		close(c.apps["a"].release)
		<-blocker
		synctest.Wait()
		if got := c.apps["a"].paths(); !slices.Equal(got, []string{"/block"}) {
			t.Errorf("a ran %v: the dropped copy ran", got)
		}
		checkStats(t, "a", c.srv["a"].Stats(), tied.Stats{
			Dequeued: 1, Tied: 1, Untied: 1, DroppedByTwin: 1, CancelsReceived: 1, MaxQueued: 1,
		})
		checkStats(t, "b", c.srv["b"].Stats(), tied.Stats{Dequeued: 1, Tied: 1, CancelsSent: 1})
	})
}

// When both copies start before either's cancel arrives, both run and each
// server counts it once.
func TestBothStartedCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Cancels wait at the gate until both copies have started; the
		// copies hold their workers (path /block) until released, so each
		// cancel finds the other copy running.
		gate := &heldTransport{open: make(chan struct{})}
		c := newCluster(t, func(_ string, sc *tied.ServerConfig) { sc.CancelTransport = gate }, "a", "b")
		gate.next = c.net
		defer c.close()
		ctx := t.Context()
		ra := c.start(ctx, "http://a/block", tieHeaders("T1", "http://b")...)
		rb := c.start(ctx, "http://b/block", tieHeaders("T1", "http://a")...)
		synctest.Wait()
		if got := len(c.apps["a"].paths()) + len(c.apps["b"].paths()); got != 2 {
			t.Fatalf("%d copies started, want 2", got)
		}
		close(gate.open)
		synctest.Wait()
		for _, n := range []string{"a", "b"} {
			checkStats(t, n, c.srv[n].Stats(), tied.Stats{
				Dequeued: 1, Tied: 1, BothExecuted: 1, CancelsSent: 1, CancelsReceived: 1, Running: 1,
			})
		}
		close(c.apps["a"].release)
		close(c.apps["b"].release)
		for _, ch := range []<-chan answer{ra, rb} {
			if a := <-ch; a.err != nil || a.resp.StatusCode != 200 {
				t.Errorf("copy: %v %v", a.err, a.resp)
			}
		}
	})
}

// heldTransport holds each request until open is closed.
type heldTransport struct {
	open chan struct{}
	next http.RoundTripper
}

func (h *heldTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case <-h.open:
		return h.next.RoundTrip(req)
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

// A cancel that comes after the copy finished still counts as both
// executed, once; a repeated cancel does not count again.
func TestCancelAfterFinishCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, nil, "a", "b")
		defer c.close()
		resp, _, err := c.get(t.Context(), "http://b/x", tieHeaders("T1", "http://a")...)
		if err != nil || resp.StatusCode != 200 {
			t.Fatal(resp, err)
		}
		synctest.Wait()
		if got := c.cancelMsg("b", "tie=T1").Header.Get(tiedwire.CancelOutcomeHeader); got != tiedwire.CancelStarted {
			t.Errorf("late cancel outcome %q, want %q", got, tiedwire.CancelStarted)
		}
		if got := c.cancelMsg("b", "tie=T1").Header.Get(tiedwire.CancelOutcomeHeader); got != tiedwire.CancelRemembered {
			t.Errorf("repeated cancel outcome %q, want %q", got, tiedwire.CancelRemembered)
		}
		checkStats(t, "b", c.srv["b"].Stats(), tied.Stats{
			Dequeued: 1, Tied: 1, BothExecuted: 1, CancelsSent: 1, CancelsReceived: 2,
		})
		// b's own cancel reached a before any copy: a remembers the tie.
		checkStats(t, "a", c.srv["a"].Stats(), tied.Stats{CancelsReceived: 1})
	})
}

// A cancel that overtakes its copy leaves a tombstone: the copy is dropped
// on arrival, once, and only while the tie is remembered.
func TestCancelBeforeCopyDropsOnArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, func(_ string, sc *tied.ServerConfig) { sc.RememberFor = time.Second }, "a", "b")
		defer c.close()
		ctx := t.Context()
		resp := c.cancelMsg("a", "tie=T1")
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get(tiedwire.CancelOutcomeHeader) != tiedwire.CancelRemembered {
			t.Fatalf("cancel: %d %q", resp.StatusCode, resp.Header.Get(tiedwire.CancelOutcomeHeader))
		}
		got, body, err := c.get(ctx, "http://a/x", tieHeaders("T1", "http://b")...)
		if err != nil {
			t.Fatal(err)
		}
		if got.StatusCode != 503 || got.Header.Get(tiedwire.DroppedHeader) != tiedwire.DroppedOnArrival || got.Header.Get("Retry-After") != "" {
			t.Errorf("copy after cancel: %d %v %q", got.StatusCode, got.Header, body)
		}
		// The tombstone is used up: a replay of the tie runs.
		if got, _, _ := c.get(ctx, "http://a/x", tieHeaders("T1", "http://b")...); got.StatusCode != 200 {
			t.Errorf("second copy of the tie: %d", got.StatusCode)
		}
		// A tombstone is forgotten after RememberFor.
		c.cancelMsg("a", "tie=T2")
		time.Sleep(time.Second)
		if got, _, _ := c.get(ctx, "http://a/x", tieHeaders("T2", "http://b")...); got.StatusCode != 200 {
			t.Errorf("copy after the tombstone expired: %d", got.StatusCode)
		}
		synctest.Wait()
		if got := c.apps["a"].paths(); len(got) != 2 {
			t.Errorf("a ran %v, want the two copies after the first", got)
		}
		checkStats(t, "a", c.srv["a"].Stats(), tied.Stats{
			Dequeued: 2, Tied: 3, DroppedOnArrival: 1, CancelsSent: 2, CancelsReceived: 2,
		})
	})
}

// A twin whose server is unreachable, or never answers, neither delays nor
// fails the copy that runs; the failed cancel is counted.
func TestUnreachableTwinHarmless(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, func(_ string, sc *tied.ServerConfig) {
			sc.Peers = []string{"http://hole", "http://gone"}
		}, "a")
		defer c.close()
		// hole accepts cancels and never answers them; gone does not exist.
		c.net.Handle("hole", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		c.apps["a"].lat = 2 * time.Millisecond
		for _, peer := range []string{"http://hole", "http://gone"} {
			start := time.Now()
			resp, body, err := c.get(t.Context(), "http://a/x", tieHeaders("T-"+peer[7:], peer)...)
			if err != nil || resp.StatusCode != 200 || body != "a /x" {
				t.Fatalf("peer %s: %v %v %q", peer, err, resp, body)
			}
			if got := time.Since(start); got != 2*time.Millisecond {
				t.Errorf("peer %s: served in %v, want the handler's 2ms", peer, got)
			}
		}
		synctest.Wait()
		if got := c.srv["a"].Stats(); got.CancelsFailed != 1 || got.CancelsSent != 0 {
			t.Errorf("before the cancel timeout: %+v", got)
		}
		time.Sleep(tied.DefaultCancelTimeout)
		synctest.Wait()
		checkStats(t, "a", c.srv["a"].Stats(), tied.Stats{Dequeued: 2, Tied: 2, CancelsFailed: 2})
	})
}

// A request naming a peer outside the allow-list is served untied: no
// cancel goes to the address it names.
func TestUnknownPeerServedUntied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, nil, "a", "b")
		defer c.close()
		evil := newApp("evil")
		c.net.Handle("evil:666", evil)
		c.net.Handle("b:8080", evil)
		for _, peer := range []string{"http://evil:666", "http://b:8080", "https://b", "http://b/path", "ftp://b"} {
			resp, _, err := c.get(t.Context(), "http://a/x", tieHeaders("T1", peer)...)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("peer %s: %v %v", peer, err, resp)
			}
		}
		// Another spelling of an allowed peer is the same peer.
		resp, _, _ := c.get(t.Context(), "http://a/x", tieHeaders("T2", "HTTP://B:80/")...)
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		synctest.Wait()
		if got := evil.paths(); len(got) != 0 {
			t.Errorf("cancels went to unlisted addresses: %v", got)
		}
		checkStats(t, "a", c.srv["a"].Stats(), tied.Stats{
			Dequeued: 6, Tied: 1, Untied: 5, UnknownPeer: 5, CancelsSent: 1,
		})
		checkStats(t, "b", c.srv["b"].Stats(), tied.Stats{CancelsReceived: 1})
	})
}

// Requests marked as hedges wait behind unmarked ones, unless
// NoHedgePriority.
func TestHedgePriorityOrder(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			c := newCluster(t, func(_ string, sc *tied.ServerConfig) { sc.NoHedgePriority = fifo }, "a")
			defer c.close()
			ctx := t.Context()
			var done []<-chan answer
			done = append(done, c.start(ctx, "http://a/block"))
			synctest.Wait()
			for _, p := range []string{"/h1", "/p1", "/h2", "/p2"} {
				var hdr []string
				if p[1] == 'h' {
					hdr = hedgeMark()
				}
				done = append(done, c.start(ctx, "http://a"+p, hdr...))
				synctest.Wait() // queued before the next one arrives
			}
			if got := c.srv["a"].Stats().Queued; got != 4 {
				t.Fatalf("queued %d, want 4", got)
			}
			close(c.apps["a"].release)
			for _, ch := range done {
				if a := <-ch; a.err != nil || a.resp.StatusCode != 200 {
					t.Fatal(a.err, a.resp)
				}
			}
			want := []string{"/block", "/p1", "/p2", "/h1", "/h2"}
			if fifo {
				want = []string{"/block", "/h1", "/p1", "/h2", "/p2"}
			}
			if got := c.apps["a"].paths(); !slices.Equal(got, want) {
				t.Errorf("NoHedgePriority=%v: ran %v, want %v", fifo, got, want)
			}
		})
	}
}

// A full queue refuses with 503 and Retry-After; an unmarked request takes
// the place of the last queued hedge, never the reverse.
func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, func(_ string, sc *tied.ServerConfig) { sc.QueueLimit = 1 }, "a")
		defer c.close()
		ctx := t.Context()
		blocker := c.start(ctx, "http://a/block")
		synctest.Wait()
		h1 := c.start(ctx, "http://a/h1", hedgeMark()...)
		synctest.Wait()
		p1 := c.start(ctx, "http://a/p1") // displaces h1
		synctest.Wait()
		if a := <-h1; a.resp.StatusCode != 503 || a.resp.Header.Get("Retry-After") != "1" || tied.Dropped(a.resp) {
			t.Errorf("displaced hedge: %d %v", a.resp.StatusCode, a.resp.Header)
		}
		for _, p := range []string{"/h2", "/p2"} {
			var hdr []string
			if p[1] == 'h' {
				hdr = hedgeMark()
			}
			resp, body, _ := c.get(ctx, "http://a"+p, hdr...)
			if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "queue full") {
				t.Errorf("%s at a full queue: %d %v %q", p, resp.StatusCode, resp.Header, body)
			}
		}
		close(c.apps["a"].release)
		<-blocker
		if a := <-p1; a.resp.StatusCode != 200 {
			t.Errorf("p1: %d", a.resp.StatusCode)
		}
		synctest.Wait()
		if got := c.apps["a"].paths(); !slices.Equal(got, []string{"/block", "/p1"}) {
			t.Errorf("ran %v", got)
		}
		checkStats(t, "a", c.srv["a"].Stats(), tied.Stats{
			Dequeued: 2, Untied: 5, QueueFull: 2, Displaced: 1, MaxQueued: 1,
		})
	})
}

// A queued request whose client leaves is taken out of the queue and never
// runs; one whose deadline passes is answered 504.
func TestQueuedClientGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, nil, "a", "b")
		defer c.close()
		blocker := c.start(t.Context(), "http://a/block")
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		gone := c.start(ctx, "http://a/gone", tieHeaders("T1", "http://b")...)
		synctest.Wait()
		cancel()
		if a := <-gone; !errors.Is(a.err, context.Canceled) {
			t.Errorf("client: %v", a.err)
		}
		synctest.Wait()
		// Straight into the handler, so its answer is seen.
		dctx, dcancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer dcancel()
		rec := httptest.NewRecorder()
		c.srv["a"].Handler(c.apps["a"]).ServeHTTP(rec, httptest.NewRequestWithContext(dctx, "GET", "http://a/late", nil))
		if rec.Code != http.StatusGatewayTimeout {
			t.Errorf("deadline passed while queued: %d %q", rec.Code, rec.Body)
		}
		// Its tie is forgotten: a cancel for it finds nothing.
		if got := c.cancelMsg("a", "tie=T1").Header.Get(tiedwire.CancelOutcomeHeader); got != tiedwire.CancelRemembered {
			t.Errorf("cancel for the gone copy: %q", got)
		}
		close(c.apps["a"].release)
		<-blocker
		synctest.Wait()
		if got := c.apps["a"].paths(); !slices.Equal(got, []string{"/block"}) {
			t.Errorf("ran %v", got)
		}
		checkStats(t, "a", c.srv["a"].Stats(), tied.Stats{
			Dequeued: 1, Tied: 1, Untied: 2, Abandoned: 2, CancelsReceived: 1, MaxQueued: 1,
		})
	})
}

// next sees neither tie header, but does see the hedge mark; the caller's
// request is not modified.
func TestTieHeadersStripped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, nil, "a", "b")
		defer c.close()
		s := c.srv["a"]
		req := httptest.NewRequest("GET", "http://a/x", nil)
		req.Header.Set(tiedwire.TieHeader, "T1")
		req.Header.Set(tiedwire.PeerHeader, "http://b")
		req.Header.Set("Tailgate-Hedge", "1")
		s.Handler(c.apps["a"]).ServeHTTP(httptest.NewRecorder(), req)
		h := c.apps["a"].headers[0]
		if h.Get(tiedwire.TieHeader) != "" || h.Get(tiedwire.PeerHeader) != "" || h.Get("Tailgate-Hedge") != "1" {
			t.Errorf("next saw %v", h)
		}
		if req.Header.Get(tiedwire.TieHeader) != "T1" {
			t.Error("the request's own header was changed")
		}
		synctest.Wait()
	})
}

// Malformed tie headers are served untied and counted, without a cancel.
func TestInvalidTieServedUntied(t *testing.T) {
	cases := map[string][]string{
		"empty tie":       {tiedwire.TieHeader, "", tiedwire.PeerHeader, "http://b"},
		"space":           {tiedwire.TieHeader, "a b", tiedwire.PeerHeader, "http://b"},
		"slash":           {tiedwire.TieHeader, "a/../b", tiedwire.PeerHeader, "http://b"},
		"query":           {tiedwire.TieHeader, "a&tie=b", tiedwire.PeerHeader, "http://b"},
		"non-ascii":       {tiedwire.TieHeader, "tié", tiedwire.PeerHeader, "http://b"},
		"too long":        {tiedwire.TieHeader, strings.Repeat("x", tiedwire.MaxTieLen+1), tiedwire.PeerHeader, "http://b"},
		"two ties":        {tiedwire.TieHeader, "T1", tiedwire.TieHeader, "T2", tiedwire.PeerHeader, "http://b"},
		"two peers":       {tiedwire.TieHeader, "T1", tiedwire.PeerHeader, "http://b", tiedwire.PeerHeader, "http://b"},
		"no peer":         {tiedwire.TieHeader, "T1"},
		"no tie":          {tiedwire.PeerHeader, "http://b"},
		"huge peer":       {tiedwire.TieHeader, "T1", tiedwire.PeerHeader, "http://b/" + strings.Repeat("x", 100<<10)},
		"huge tie":        {tiedwire.TieHeader, strings.Repeat("y", 100<<10), tiedwire.PeerHeader, "http://b"},
		"peer with space": {tiedwire.TieHeader, "T1", tiedwire.PeerHeader, "http://b /"},
	}
	for name, hdr := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, nil, "a", "b")
				defer c.close()
				resp, body, err := c.get(t.Context(), "http://a/x", hdr...)
				if err != nil || resp.StatusCode != 200 || body != "a /x" {
					t.Fatalf("%v %v %q", err, resp, body)
				}
				synctest.Wait()
				want := tied.Stats{Dequeued: 1, Untied: 1, InvalidTie: 1}
				if name == "peer with space" {
					want = tied.Stats{Dequeued: 1, Untied: 1, UnknownPeer: 1}
				}
				checkStats(t, "a", c.srv["a"].Stats(), want)
				checkStats(t, "b", c.srv["b"].Stats(), tied.Stats{})
			})
		})
	}
}

// Two copies of one tie at the same server cannot cancel each other: the
// second is served untied.
func TestDuplicateTieServedUntied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, nil, "a", "b")
		defer c.close()
		first := c.start(t.Context(), "http://a/block", tieHeaders("T1", "http://b")...)
		synctest.Wait()
		second := c.start(t.Context(), "http://a/x", tieHeaders("T1", "http://b")...)
		synctest.Wait()
		close(c.apps["a"].release)
		for _, ch := range []<-chan answer{first, second} {
			if a := <-ch; a.err != nil || a.resp.StatusCode != 200 {
				t.Fatal(a.err, a.resp)
			}
		}
		synctest.Wait()
		checkStats(t, "a", c.srv["a"].Stats(), tied.Stats{
			Dequeued: 2, Tied: 1, Untied: 1, InvalidTie: 1, CancelsSent: 1, MaxQueued: 1,
		})
	})
}

// The cancel endpoint takes POST with one valid tie, and the token when one
// is configured.
func TestCancelEndpointValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, func(_ string, sc *tied.ServerConfig) { sc.CancelToken = "s3cret" }, "a", "b")
		defer c.close()
		tok := []string{tiedwire.TokenHeader, "s3cret"}
		for _, tc := range []struct {
			query string
			hdr   []string
			code  int
		}{
			{"tie=T1", nil, http.StatusForbidden},
			{"tie=T1", []string{tiedwire.TokenHeader, "wrong!"}, http.StatusForbidden},
			{"tie=T1", []string{tiedwire.TokenHeader, "s3cret", tiedwire.TokenHeader, "s3cret"}, http.StatusForbidden},
			{"", tok, http.StatusBadRequest},
			{"tie=", tok, http.StatusBadRequest},
			{"tie=a%20b", tok, http.StatusBadRequest},
			{"tie=T1&tie=T2", tok, http.StatusBadRequest},
			{"x=1&tie=T1", tok, http.StatusBadRequest},
			{"tie=" + strings.Repeat("z", 5000), tok, http.StatusBadRequest},
			{"tie=T1", tok, http.StatusNoContent},
		} {
			if got := c.cancelMsg("a", tc.query, tc.hdr...).StatusCode; got != tc.code {
				t.Errorf("POST ?%.40s %v: %d, want %d", tc.query, tc.hdr, got, tc.code)
			}
		}
		resp, _, _ := c.get(t.Context(), "http://a"+tied.DefaultCancelPath+"?tie=T1", tok...)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("GET cancel: %d %v", resp.StatusCode, resp.Header)
		}
		// Servers that share the token cancel each other.
		resp, _, _ = c.get(t.Context(), "http://b/x", tieHeaders("T9", "http://a")...)
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		synctest.Wait()
		if got := c.srv["a"].Stats(); got.CancelsReceived != 2 || got.CancelsRefused != 10 || got.Dequeued != 0 {
			t.Errorf("a: %+v", got)
		}
		if got := c.srv["b"].Stats(); got.CancelsSent != 1 {
			t.Errorf("b: %+v", got)
		}
	})
}

// A handler that panics gives its worker back.
func TestPanicReleasesWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := tied.NewServer(tied.ServerConfig{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/panic" {
				panic(http.ErrAbortHandler)
			}
		}))
		func() {
			defer func() { recover() }()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/panic", nil))
		}()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/ok", nil))
		if rec.Code != 200 || s.Stats().Running != 0 {
			t.Errorf("after a panic: %d, %+v", rec.Code, s.Stats())
		}
	})
}

// At most MaxCancelsInFlight cancels are out at once; after Close none is
// sent.
func TestCancelLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, func(_ string, sc *tied.ServerConfig) {
			sc.Workers, sc.MaxCancelsInFlight, sc.Peers = 4, 1, []string{"http://hole"}
		}, "a")
		defer c.close()
		c.net.Handle("hole", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		for _, tie := range []string{"T1", "T2"} {
			if resp, _, err := c.get(t.Context(), "http://a/x", tieHeaders(tie, "http://hole")...); err != nil || resp.StatusCode != 200 {
				t.Fatal(err, resp)
			}
		}
		synctest.Wait()
		if got := c.srv["a"].Stats(); got.CancelsFailed != 1 {
			t.Errorf("second cancel over the limit: %+v", got)
		}
		start := time.Now()
		c.srv["a"].Close() // abandons the one in flight at once
		if time.Since(start) != 0 {
			t.Errorf("Close waited %v", time.Since(start))
		}
		if resp, _, _ := c.get(t.Context(), "http://a/x", tieHeaders("T3", "http://hole")...); resp.StatusCode != 200 {
			t.Errorf("after Close: %d", resp.StatusCode)
		}
		checkStats(t, "a", c.srv["a"].Stats(), tied.Stats{Dequeued: 3, Tied: 3, CancelsFailed: 3})
	})
}

func TestNewServerConfig(t *testing.T) {
	for _, cfg := range []tied.ServerConfig{
		{Workers: -1},
		{QueueLimit: -1},
		{CancelTimeout: -1},
		{MaxCancelsInFlight: -1},
		{RememberTies: -1},
		{RememberFor: -1},
		{CancelPath: "relative"},
		{CancelPath: "/a?b"},
		{CancelPath: "/a b"},
		{CancelToken: "a\nb"},
		{Peers: []string{"http://a/path"}},
		{Peers: []string{"ftp://a"}},
		{Peers: []string{"http://user@a"}},
		{Peers: []string{"http://a", "HTTP://A:80"}},
	} {
		if s, err := tied.NewServer(cfg); !errors.Is(err, tied.ErrInvalid) {
			t.Errorf("%+v: err %v", cfg, err)
			if s != nil {
				s.Close()
			}
		}
	}
	s, err := tied.NewServer(tied.ServerConfig{Peers: []string{"http://a:8080", "https://[::1]:443"}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// Shutdown waits for the cancels in flight, or until its context ends.
func TestShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, func(_ string, sc *tied.ServerConfig) {
			sc.Workers, sc.Peers = 2, []string{"http://slow", "http://hole"}
		}, "a")
		defer c.close()
		c.net.Handle("slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(100 * time.Millisecond)
			w.WriteHeader(http.StatusNoContent)
		}))
		c.net.Handle("hole", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		s := c.srv["a"]
		c.get(t.Context(), "http://a/x", tieHeaders("T1", "http://slow")...)
		start := time.Now()
		if err := s.Shutdown(t.Context()); err != nil || time.Since(start) != 100*time.Millisecond {
			t.Errorf("Shutdown: %v after %v", err, time.Since(start))
		}
		if got := s.Stats(); got.CancelsSent != 1 || got.CancelsFailed != 0 {
			t.Errorf("%+v", got)
		}

		c2 := newCluster(t, func(_ string, sc *tied.ServerConfig) { sc.Peers = []string{"http://hole"} }, "b")
		defer c2.close()
		c2.net.Handle("hole", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		c2.get(t.Context(), "http://b/x", tieHeaders("T1", "http://hole")...)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		start = time.Now()
		if err := c2.srv["b"].Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 50*time.Millisecond {
			t.Errorf("Shutdown: %v after %v", err, time.Since(start))
		}
		if got := c2.srv["b"].Stats(); got.CancelsFailed != 1 {
			t.Errorf("%+v", got)
		}
	})
}

// slowLink delays requests to one host before they reach the network.
type slowLink struct {
	host  string
	delay time.Duration
	next  http.RoundTripper
}

func (s slowLink) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == s.host {
		time.Sleep(s.delay)
	}
	return s.next.RoundTrip(req)
}

// When the first copy is slow to reach its server, the twin's cancel gets
// there first, and the copy is dropped as it arrives.
func TestTiedPairDropOnArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, nil, "a", "b")
		defer c.close()
		c.apps["b"].lat = 5 * time.Millisecond
		tr := newTiedTransport(t, slowLink{"a", 3 * time.Millisecond, c.net}, nil, "http://a", "http://b")
		start := time.Now()
		resp, body := roundTrip(t, tr, "http://x/y")
		if body != "b /y" || time.Since(start) != 6*time.Millisecond {
			t.Errorf("%d %q after %v", resp.StatusCode, body, time.Since(start))
		}
		synctest.Wait()
		if got := c.apps["a"].paths(); len(got) != 0 {
			t.Errorf("a ran %v", got)
		}
		checkStats(t, "a", c.srv["a"].Stats(), tied.Stats{Tied: 1, DroppedOnArrival: 1, CancelsReceived: 1})
		checkStats(t, "b", c.srv["b"].Stats(), tied.Stats{Dequeued: 1, Tied: 1, CancelsSent: 1})
	})
}
