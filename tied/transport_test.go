package tied_test

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/memnet"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
)

// hedgeReceipt collects the receipts of a Transport.
type hedgeReceipt struct {
	mu sync.Mutex
	rs []hedge.Receipt
}

func (h *hedgeReceipt) add(_ *http.Request, r hedge.Receipt) {
	h.mu.Lock()
	h.rs = append(h.rs, r)
	h.mu.Unlock()
}

// get returns the one receipt delivered.
func (h *hedgeReceipt) get(t *testing.T) hedge.Receipt {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.rs) != 1 {
		t.Fatalf("%d receipts, want 1", len(h.rs))
	}
	return h.rs[0]
}

// newTiedTransport returns a Transport over targets whose replica set
// prefers them in the order given (see prefer): the first request's first
// copy goes to targets[0], its twin to targets[1].
func newTiedTransport(t *testing.T, base http.RoundTripper, rc *hedgeReceipt, targets ...string) *tied.Transport {
	t.Helper()
	cfg := tied.TransportConfig{Base: base, Targets: targets}
	if rc != nil {
		cfg.OnReceipt = rc.add
	}
	tr, err := tied.NewTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	prefer(t, tr.Replicas())
	return tr
}

// prefer gives replica k of s a latency of k ms (none for replica 0), so
// that picks prefer them in index order: the primary the first, a hedge
// (or a tied twin) the cheapest other.
func prefer(t *testing.T, s *replica.Set) {
	t.Helper()
	now := time.Now()
	for k := 1; k < s.Len(); k++ {
		var others []int
		for j := range s.Len() {
			if j != k {
				others = append(others, j)
			}
		}
		i, tk, ok := s.Pick(now, replica.Attempt{Role: replica.Hedge, Exclude: others})
		if !ok || i != k {
			t.Fatalf("pick of replica %d: %d, %v", k, i, ok)
		}
		s.Done(tk, replica.Success, now.Add(time.Duration(k)*time.Millisecond))
	}
}

func roundTrip(t *testing.T, rt http.RoundTripper, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// plain is a server without tied middleware: it records what each request
// carried, and answers with status and body after lat, or stops when the
// request is cancelled (and records that).
type plain struct {
	lat    time.Duration
	status int
	hdr    http.Header // set on the answer

	mu        sync.Mutex
	seen      []http.Header
	at        []time.Time
	cancelled int
}

func (p *plain) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.seen = append(p.seen, r.Header.Clone())
	p.at = append(p.at, time.Now())
	p.mu.Unlock()
	if !memnet.Sleep(r.Context(), p.lat) {
		p.mu.Lock()
		p.cancelled++
		p.mu.Unlock()
		return
	}
	for k, v := range p.hdr {
		w.Header()[k] = v
	}
	if p.status != 0 {
		w.WriteHeader(p.status)
	}
	io.WriteString(w, "answer")
}

func (p *plain) requests() []http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// Both copies carry the same tie and name each other; the first acceptable
// answer wins and the other copy is cancelled.
func TestTransportFirstAcceptableWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var net memnet.Transport
		a, b := &plain{lat: 10 * time.Millisecond}, &plain{lat: 2 * time.Millisecond}
		net.Handle("a", a)
		net.Handle("b:8080", b)
		var rc hedgeReceipt
		tr := newTiedTransport(t, &net, &rc, "http://a", "http://b:8080/prefix")
		start := time.Now()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://x/path", nil)
		req.Header.Set("X-Caller", "1")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := time.Since(start); got != 3*time.Millisecond || resp.StatusCode != 200 || resp.Request != req {
			t.Errorf("answer after %v: %d", got, resp.StatusCode)
		}
		net.Wait()
		synctest.Wait()
		ha, hb := a.requests(), b.requests()
		if len(ha) != 1 || len(hb) != 1 {
			t.Fatalf("a got %d, b got %d requests", len(ha), len(hb))
		}
		tie := ha[0].Get(tiedwire.TieHeader)
		if !tiedwire.ValidTie(tie) || hb[0].Get(tiedwire.TieHeader) != tie {
			t.Errorf("ties %q and %q", tie, hb[0].Get(tiedwire.TieHeader))
		}
		if ha[0].Get(tiedwire.PeerHeader) != "http://b:8080" || hb[0].Get(tiedwire.PeerHeader) != "http://a" {
			t.Errorf("peers %q and %q", ha[0].Get(tiedwire.PeerHeader), hb[0].Get(tiedwire.PeerHeader))
		}
		if ha[0].Get(hedge.HedgeHeader) != "" || hb[0].Get(hedge.HedgeHeader) != "1" || hb[0].Get("X-Caller") != "1" {
			t.Errorf("headers: a %v, b %v", ha[0], hb[0])
		}
		if b.at[0].Sub(start) != tied.DefaultDelay {
			t.Errorf("second copy sent after %v", b.at[0].Sub(start))
		}
		if a.cancelled != 1 {
			t.Error("the losing copy was not cancelled")
		}
		if len(req.Header) != 1 {
			t.Errorf("caller's header changed: %v", req.Header)
		}
		if r := rc.get(t); r.WinnerTarget != 1 || r.CancellationsObserved != 1 {
			t.Errorf("receipt %+v", r)
		}
		// A second request gets a new tie, and its first copy goes to the
		// replica that answered faster: b.
		roundTrip(t, tr, "http://x/path")
		net.Wait()
		if ha, hb := a.requests(), b.requests(); len(ha) != 2 || len(hb) != 2 ||
			ha[1].Get(tiedwire.TieHeader) == tie || hb[1].Get(hedge.HedgeHeader) != "" || ha[1].Get(hedge.HedgeHeader) != "1" {
			t.Errorf("second request: a %v, b %v", ha, hb)
		}
	})
}

// An answer dropped for its twin never wins, even when Accept would take
// it: the twin's answer does.
func TestTransportDroppedIsNotWinner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var net memnet.Transport
		dropped := http.Header{tiedwire.DroppedHeader: {tiedwire.DroppedQueued}}
		a := &plain{lat: 2 * time.Millisecond, hdr: dropped}
		b := &plain{lat: 20 * time.Millisecond}
		net.Handle("a", a)
		net.Handle("b", b)
		tr, err := tied.NewTransport(tied.TransportConfig{
			Base:    &net,
			Targets: []string{"http://a", "http://b"},
			Accept:  func(*http.Response) error { return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		prefer(t, tr.Replicas()) // the first copy to a, which drops it
		start := time.Now()
		resp, _ := roundTrip(t, tr, "http://x/")
		if tied.Dropped(resp) || time.Since(start) != 21*time.Millisecond {
			t.Errorf("got %v after %v", resp.Header, time.Since(start))
		}
		net.Wait()
	})
}

// Every copy goes tied to a server other than its twin's, and names its
// twin's server.
func TestTransportCopiesNameEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var net memnet.Transport
		srv := map[string]*plain{}
		for _, n := range []string{"a", "b", "c"} {
			srv[n] = &plain{lat: 5 * time.Millisecond}
			net.Handle(n, srv[n])
		}
		tr := newTiedTransport(t, &net, nil, "http://c", "http://b", "http://a")
		for range 6 {
			roundTrip(t, tr, "http://x/")
		}
		net.Wait()
		ties := map[string][]string{} // tie -> "server<-peer" of each copy
		for n, p := range srv {
			for _, h := range p.requests() {
				ties[h.Get(tiedwire.TieHeader)] = append(ties[h.Get(tiedwire.TieHeader)], "http://"+n+"<-"+h.Get(tiedwire.PeerHeader))
			}
		}
		if len(ties) != 6 {
			t.Fatalf("%d ties for 6 requests", len(ties))
		}
		for tie, copies := range ties {
			if len(copies) != 2 {
				t.Errorf("tie %s: copies %v", tie, copies)
				continue
			}
			s0, p0, _ := strings.Cut(copies[0], "<-")
			s1, p1, _ := strings.Cut(copies[1], "<-")
			if s0 == s1 || p0 != s1 || p1 != s0 {
				t.Errorf("tie %s: copies %v do not name each other", tie, copies)
			}
		}
	})
}

// A first copy that fails before the second is due makes the second go at
// once, untied: there is nothing left to cancel.
func TestTransportFailoverUntied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var net memnet.Transport
		a, b := &plain{status: 500}, &plain{lat: time.Millisecond}
		net.Handle("a", a)
		net.Handle("b", b)
		tr := newTiedTransport(t, &net, nil, "http://a", "http://b")
		start := time.Now()
		resp, _ := roundTrip(t, tr, "http://x/")
		if resp.StatusCode != 200 || time.Since(start) != time.Millisecond {
			t.Errorf("%d after %v", resp.StatusCode, time.Since(start))
		}
		net.Wait()
		if h := b.requests()[0]; h.Get(tiedwire.TieHeader) != "" || h.Get(tiedwire.PeerHeader) != "" || h.Get(hedge.HedgeHeader) != "1" {
			t.Errorf("failover copy carried %v", h)
		}
	})
}

// If the first copy answers within the delay, the second is never sent;
// with a negative delay both go at once.
func TestTransportDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var net memnet.Transport
		a, b := &plain{lat: 500 * time.Microsecond}, &plain{lat: 10 * time.Millisecond}
		net.Handle("a", a)
		net.Handle("b", b)
		tr := newTiedTransport(t, &net, nil, "http://a", "http://b")
		roundTrip(t, tr, "http://x/")
		net.Wait()
		if len(b.requests()) != 0 {
			t.Error("second copy sent after the first answered")
		}
		now, err := tied.NewTransport(tied.TransportConfig{Base: &net, Targets: []string{"http://b", "http://a"}, Delay: -1})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		roundTrip(t, now, "http://x/")
		net.Wait()
		if got := a.at[len(a.at)-1].Sub(start); got > time.Microsecond || len(b.requests()) != 1 {
			t.Errorf("second copy after %v", got)
		}
	})
}

// Requests that may not be sent twice go once, to the first target, with
// stray tie headers removed; the caller's header stays as it was.
func TestTransportUnsafePassesThroughUntied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var net memnet.Transport
		a, b := &plain{}, &plain{}
		net.Handle("a", a)
		net.Handle("b", b)
		tr := newTiedTransport(t, &net, nil, "http://a", "http://b")
		req, _ := http.NewRequest("POST", "http://x/", strings.NewReader("body"))
		req.Header.Set(tiedwire.TieHeader, "forged")
		req.Header.Set(tiedwire.PeerHeader, "http://evil")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		net.Wait()
		if len(a.requests()) != 1 || len(b.requests()) != 0 {
			t.Fatalf("a %d, b %d", len(a.requests()), len(b.requests()))
		}
		if h := a.requests()[0]; h.Get(tiedwire.TieHeader) != "" || h.Get(tiedwire.PeerHeader) != "" {
			t.Errorf("sent %v", h)
		}
		if req.Header.Get(tiedwire.TieHeader) != "forged" {
			t.Error("caller's header changed")
		}
	})
}

// When neither copy is acceptable, the last answer is returned as is.
func TestTransportNoWinner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var net memnet.Transport
		net.Handle("a", &plain{lat: 5 * time.Millisecond, status: 503, hdr: http.Header{tiedwire.DroppedHeader: {tiedwire.DroppedQueued}}})
		net.Handle("b", &plain{lat: 10 * time.Millisecond, status: 502})
		tr := newTiedTransport(t, &net, nil, "http://a", "http://b")
		resp, _ := roundTrip(t, tr, "http://x/")
		if resp.StatusCode != 502 {
			t.Errorf("got %d, want the last answer, 502", resp.StatusCode)
		}
		net.Wait()
	})
}

func TestNewTransportConfig(t *testing.T) {
	for _, cfg := range []tied.TransportConfig{
		{},
		{Targets: []string{"http://a"}},
		{Targets: []string{"http://a/x", "HTTP://A:80/y"}},
		{Targets: []string{"http://a", "ftp://b"}},
		{Targets: []string{"http://a", "http://b"}, MaxBodyBytes: -1},
		{Targets: []string{"http://a", "http://b"}, SafeMethods: []string{"post"}},
	} {
		if _, err := tied.NewTransport(cfg); !errors.Is(err, tied.ErrInvalid) {
			t.Errorf("%+v: err %v", cfg, err)
		}
	}
}
