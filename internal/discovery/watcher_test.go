package discovery

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/tailgate-dev/tailgate/internal/dnstest"
)

// logBuf is a log the test reads while the watcher writes it.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// countWithin is count once it reaches n, or after d: a line written
// just after the event the test waited for (the watcher logs a change
// once the gateway has taken it) has that long to arrive.
func (l *logBuf) countWithin(s string, n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		c := l.count(s)
		if c >= n || time.Now().After(deadline) {
			return c
		}
		time.Sleep(time.Millisecond)
	}
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// applied records what a watcher applies, as the gateway would take it.
type applied struct {
	ch chan []string
}

func newApplied() *applied { return &applied{ch: make(chan []string, 64)} }

func (a *applied) apply(b []string) error {
	a.ch <- slices.Clone(b)
	return nil
}

// next waits up to within for the next list applied, failing the test
// when none comes or it is not want; it returns how long it took.
func (a *applied) next(t *testing.T, want []string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var got []string
	select {
	case got = <-a.ch: // already there (within 0: Set's own)
	default:
		select {
		case got = <-a.ch:
		case <-time.After(within):
			t.Fatalf("nothing applied within %v; want %v", within, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("applied %v, want %v", got, want)
	}
	return time.Since(start)
}

// none fails the test if anything is applied within d.
func (a *applied) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case got := <-a.ch:
		t.Fatalf("applied %v; want no change", got)
	default:
	}
	select {
	case got := <-a.ch:
		t.Fatalf("applied %v; want no change", got)
	case <-time.After(d):
	}
}

// watch starts a watcher over s with refresh, and Run once Set has been
// called; it stops with the test.
func watch(t *testing.T, s *dnstest.Server, refresh time.Duration) (*Watcher, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	w := New(Config{Resolver: NewNetResolver(s.Addr), Refresh: refresh, Timeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return w, logs
}

func run(t *testing.T, w *Watcher, a *applied) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, a.apply); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func set(t *testing.T, w *Watcher, a *applied, raw ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return w.Set(ctx, raw, a.apply)
}

const refresh = 200 * time.Millisecond

// A record added is applied, and one removed, within a refresh (and a
// second of slack, the bound); nothing is applied when nothing
// changed.
func TestWatcherFollowsRecords(t *testing.T) {
	s := startDNS(t)
	w, logs := watch(t, s, refresh)
	a := newApplied()
	s.SetA("replicas.test", 60, "127.0.0.2", "127.0.0.1")
	if err := set(t, w, a, "http://127.0.0.9:1", "dns+http://replicas.test:8080"); err != nil {
		t.Fatal(err)
	}
	a.next(t, []string{"http://127.0.0.9:1", "http://127.0.0.1:8080", "http://127.0.0.2:8080"}, 0)
	run(t, w, a)
	a.none(t, 3*refresh) // resolved again, same answer: no apply

	s.SetA("replicas.test", 60, "127.0.0.1", "127.0.0.2", "127.0.0.3")
	took := a.next(t, []string{"http://127.0.0.9:1", "http://127.0.0.1:8080", "http://127.0.0.2:8080", "http://127.0.0.3:8080"}, refresh+time.Second)
	t.Logf("added in %v", took)
	s.SetA("replicas.test", 60, "127.0.0.2", "127.0.0.3")
	took = a.next(t, []string{"http://127.0.0.9:1", "http://127.0.0.2:8080", "http://127.0.0.3:8080"}, refresh+time.Second)
	t.Logf("removed in %v", took)
	if !slices.Equal(w.Backends(), []string{"http://127.0.0.9:1", "http://127.0.0.2:8080", "http://127.0.0.3:8080"}) {
		t.Errorf("Backends %v", w.Backends())
	}
	if n := logs.countWithin("discovery: backends changed", 2, time.Second); n != 2 {
		t.Errorf("%d change lines, want 2:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), `added="" removed=http://127.0.0.1:8080`) {
		t.Errorf("the removal is not logged by name:\n%s", logs)
	}
}

// A TTL shorter than the refresh brings the next resolution sooner: the
// change is applied once the records expire, long before the refresh.
func TestWatcherTTLExpiry(t *testing.T) {
	s := startDNS(t)
	w, _ := watch(t, s, time.Hour)
	a := newApplied()
	s.SetSRV("_http._tcp.replicas.test", 1, dnstest.SRV{Target: "r.test", Port: 8081})
	s.SetA("r.test", 60, "127.0.0.1")
	if err := set(t, w, a, "dnssrv+http://_http._tcp.replicas.test"); err != nil {
		t.Fatal(err)
	}
	a.next(t, []string{"http://127.0.0.1:8081"}, 0)
	if st := w.State()[0]; st.TTL != time.Second || !st.HasTTL || st.Next.Sub(st.Resolved) != MinTTLRefresh {
		t.Errorf("state %+v: want TTL 1s, next a second after", st)
	}
	run(t, w, a)
	s.SetSRV("_http._tcp.replicas.test", 1, dnstest.SRV{Target: "r.test", Port: 8081}, dnstest.SRV{Target: "r.test", Port: 8082})
	took := a.next(t, []string{"http://127.0.0.1:8081", "http://127.0.0.1:8082"}, MinTTLRefresh+time.Second)
	t.Logf("TTL 1s, refresh 1h: applied in %v", took)

	// A TTL of 0 re-resolves no sooner than MinTTLRefresh.
	s.SetSRV("_http._tcp.replicas.test", 0, dnstest.SRV{Target: "r.test", Port: 8081})
	a.next(t, []string{"http://127.0.0.1:8081"}, MinTTLRefresh+time.Second)
	before := s.Queries("_http._tcp.replicas.test", "SRV")
	time.Sleep(MinTTLRefresh / 2)
	if n := s.Queries("_http._tcp.replicas.test", "SRV") - before; n > 1 {
		t.Errorf("TTL 0: %d queries in half of MinTTLRefresh", n)
	}
}

// SERVFAIL, then an empty answer, then NXDOMAIN: the last good set stays
// (nothing applied), each kind of problem is logged once however many
// refreshes see it, counted at each, and State says the name is stale;
// recovery is logged once and applied.
func TestWatcherKeepsLastGoodSet(t *testing.T) {
	s := startDNS(t)
	w, logs := watch(t, s, 50*time.Millisecond)
	a := newApplied()
	s.SetA("replicas.test", 60, "127.0.0.1", "127.0.0.2")
	if err := set(t, w, a, "dns+http://replicas.test:8080"); err != nil {
		t.Fatal(err)
	}
	good := []string{"http://127.0.0.1:8080", "http://127.0.0.2:8080"}
	a.next(t, good, 0)
	run(t, w, a)

	waitErrors := func(n uint64) State {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if st := w.State()[0]; st.Errors >= n {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d errors: %+v", n, w.State())
			}
		}
	}
	s.Fail("replicas.test", dns.RcodeServerFailure)
	st := waitErrors(4)
	if !st.Stale || !slices.Equal(st.Backends, good) || !strings.Contains(st.Problem, "replicas.test") || st.Since.IsZero() {
		t.Errorf("failing: %+v", st)
	}
	since := st.Since
	s.SetA("replicas.test", 60) // empty
	st = waitErrors(st.Errors + 3)
	s.Remove("replicas.test") // NXDOMAIN: empty too
	st = waitErrors(st.Errors + 3)
	if !st.Stale || !slices.Equal(st.Backends, good) || st.Since != since {
		t.Errorf("empty: %+v; want stale since the failure began, the set kept", st)
	}
	a.none(t, 0)
	if w.Backends() == nil || !slices.Equal(w.Backends(), good) {
		t.Errorf("Backends %v", w.Backends())
	}
	if n := logs.count("did not resolve"); n != 1 {
		t.Errorf("failure logged %d times, want once:\n%s", n, logs)
	}
	if n := logs.count("has no records"); n != 1 {
		t.Errorf("empty answer logged %d times, want once:\n%s", n, logs)
	}

	s.SetA("replicas.test", 60, "127.0.0.3")
	a.next(t, []string{"http://127.0.0.3:8080"}, time.Second)
	if st := w.State()[0]; st.Stale || st.Problem != "" || st.Errors < 10 {
		t.Errorf("recovered: %+v", st)
	}
	if n := logs.count("resolves again"); n != 1 {
		t.Errorf("recovery logged %d times:\n%s", n, logs)
	}
}

// Set is a reload: entries kept keep their last good set when they fail
// now, new ones that fail give nothing yet, duplicates are dropped, no
// replica at all is refused, and an apply refused changes nothing.
func TestWatcherSet(t *testing.T) {
	s := startDNS(t)
	w, _ := watch(t, s, time.Hour)
	a := newApplied()
	s.SetA("a.test", 60, "127.0.0.1", "127.0.0.2")
	if err := set(t, w, a, "dns+http://a.test:8080"); err != nil {
		t.Fatal(err)
	}
	a.next(t, []string{"http://127.0.0.1:8080", "http://127.0.0.2:8080"}, 0)

	// a.test fails now: its last set stands. b.test is new and fails: it
	// gives nothing. The static backend that a.test also gives (spelled
	// otherwise) comes once, where the static entry is.
	s.Fail("a.test", dns.RcodeServerFailure)
	err := set(t, w, a, "dns+http://a.test:8080", "dns+http://b.test:8080", "HTTP://127.0.0.2:8080/")
	if err != nil {
		t.Fatal(err)
	}
	a.next(t, []string{"http://127.0.0.1:8080", "HTTP://127.0.0.2:8080/"}, 0)
	st := w.State()
	if len(st) != 2 || !st[0].Stale || st[0].Errors != 1 || len(st[0].Backends) != 2 || !st[1].Stale || len(st[1].Backends) != 0 {
		t.Errorf("state %+v", st)
	}

	// Only b.test, which has nothing: refused, apply not called.
	err = set(t, w, a, "dns+http://b.test:8080")
	if !errors.Is(err, ErrNoBackends) || !strings.Contains(err.Error(), "b.test") {
		t.Errorf("no replica: %v", err)
	}
	a.none(t, 0)

	// The apply refuses: nothing changes.
	s.SetA("b.test", 60, "127.0.0.5")
	refused := errors.New("refused")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Set(ctx, []string{"dns+http://b.test:8080"}, func([]string) error { return refused }); !errors.Is(err, refused) {
		t.Errorf("apply refused: %v", err)
	}
	if len(w.State()) != 2 || !slices.Equal(w.Backends(), []string{"http://127.0.0.1:8080", "HTTP://127.0.0.2:8080/"}) {
		t.Errorf("after a refused apply: %v %+v", w.Backends(), w.State())
	}
	if _, err := ParseAll([]string{"http://x:1", "dns+ftp://x"}); err == nil {
		t.Error("a bad entry parsed")
	}
	if err := set(t, w, a, "dns+ftp://x"); err == nil {
		t.Error("Set took a bad entry")
	}
}

// A name that Set adds while Run waits (with nothing to resolve, or a long
// way off) is followed from then on.
func TestWatcherSetWakesRun(t *testing.T) {
	s := startDNS(t)
	w, _ := watch(t, s, refresh)
	a := newApplied()
	run(t, w, a) // no entries yet
	s.SetA("a.test", 60, "127.0.0.1")
	if err := set(t, w, a, "http://127.0.0.9:1", "dns+http://a.test:1"); err != nil {
		t.Fatal(err)
	}
	a.next(t, []string{"http://127.0.0.9:1", "http://127.0.0.1:1"}, 0)
	s.SetA("a.test", 60, "127.0.0.2")
	a.next(t, []string{"http://127.0.0.9:1", "http://127.0.0.2:1"}, refresh+time.Second)
	if err := set(t, w, a, "http://127.0.0.9:1"); err != nil {
		t.Fatal(err)
	}
	a.next(t, []string{"http://127.0.0.9:1"}, 0)
	if st := w.State(); len(st) != 0 {
		t.Errorf("a name removed is still watched: %+v", st)
	}
	a.none(t, 2*refresh)
}
