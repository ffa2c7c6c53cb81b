package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The watcher's tests run in a synctest bubble against fakeDNS, an
// in-memory resolver: its schedule (refresh, TTL, retries) is checked to
// the instant, in virtual time, whatever the machine's load. The resolver
// over the wire is tested against a real server in resolver_test.go, and
// the two together through tailgate serve (cmd/tailgate).

// fakeDNS answers each entry (by Spec.Raw) as the test last set it, and
// counts the resolutions.
type fakeDNS struct {
	mu      sync.Mutex
	answers map[string]fakeAnswer
	queries map[string]int
}

type fakeAnswer struct {
	urls []string
	ttl  time.Duration // negative: unknown
	err  error
}

func newFakeDNS() *fakeDNS {
	return &fakeDNS{answers: map[string]fakeAnswer{}, queries: map[string]int{}}
}

// set gives raw these replicas, with records of ttl (negative: unknown);
// none: an empty answer.
func (d *fakeDNS) set(raw string, ttl time.Duration, urls ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.answers[raw] = fakeAnswer{urls: urls, ttl: ttl}
}

// fail makes raw's resolutions fail, as a SERVFAIL would.
func (d *fakeDNS) fail(raw string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.answers[raw] = fakeAnswer{err: fmt.Errorf("lookup %s: server misbehaving", raw)}
}

func (d *fakeDNS) count(raw string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.queries[raw]
}

func (d *fakeDNS) Resolve(_ context.Context, s Spec) (Answer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queries[s.Raw]++
	a, ok := d.answers[s.Raw]
	switch {
	case a.err != nil:
		return Answer{}, a.err
	case !ok || len(a.urls) == 0:
		return Answer{}, fmt.Errorf("%w: %s", ErrEmpty, s.Name)
	}
	return Answer{URLs: slices.Clone(a.urls), TTL: max(a.ttl, 0), HasTTL: a.ttl >= 0}, nil
}

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

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// applied records what a watcher applies, as the gateway would take it.
type applied struct {
	mu   sync.Mutex
	got  [][]string
	fail error // returned by apply when set
}

func (a *applied) apply(b []string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return a.fail
	}
	a.got = append(a.got, slices.Clone(b))
	return nil
}

// take returns the lists applied since the last take. Called once the
// bubble is idle (synctest.Wait), it sees all there is.
func (a *applied) take() [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	got := a.got
	a.got = nil
	return got
}

// next fails the test unless exactly one list was applied since the last
// take, and it is want.
func (a *applied) next(t *testing.T, want ...string) {
	t.Helper()
	synctest.Wait()
	if got := a.take(); len(got) != 1 || !slices.Equal(got[0], want) {
		t.Fatalf("applied %v; want [%v]", got, want)
	}
}

// none fails the test if anything was applied since the last take.
func (a *applied) none(t *testing.T) {
	t.Helper()
	synctest.Wait()
	if got := a.take(); len(got) > 0 {
		t.Fatalf("applied %v; want no change", got)
	}
}

// watch returns a watcher over d with refresh, logging into the buffer
// returned.
func watch(d *fakeDNS, refresh time.Duration) (*Watcher, *logBuf) {
	logs := &logBuf{}
	w := New(Config{Resolver: d, Refresh: refresh, Timeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return w, logs
}

// run runs w until the test ends.
func run(t *testing.T, w *Watcher, a *applied) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, a.apply); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func set(w *Watcher, a *applied, raw ...string) error {
	return w.Set(context.Background(), raw, a.apply)
}

const refresh = 200 * time.Millisecond

// A record added is applied, and one removed, at the next refresh to the
// instant; nothing is applied when nothing changed; Backends and the log
// say what was applied.
func TestWatcherFollowsRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDNS()
		w, logs := watch(d, refresh)
		a := &applied{}
		const name = "dns+http://replicas.test:8080"
		d.set(name, -1, "http://127.0.0.1:8080", "http://127.0.0.2:8080")
		if err := set(w, a, "http://127.0.0.9:1", name); err != nil {
			t.Fatal(err)
		}
		a.next(t, "http://127.0.0.9:1", "http://127.0.0.1:8080", "http://127.0.0.2:8080")
		run(t, w, a)
		time.Sleep(3 * refresh)
		a.none(t) // resolved again, same answer: no apply
		if n := d.count(name); n != 4 {
			t.Errorf("%d resolutions in 3 refreshes, want 4 (Set's and one a refresh)", n)
		}

		d.set(name, -1, "http://127.0.0.1:8080", "http://127.0.0.2:8080", "http://127.0.0.3:8080")
		time.Sleep(refresh - time.Nanosecond)
		a.none(t) // not before the refresh falls due
		time.Sleep(time.Nanosecond)
		a.next(t, "http://127.0.0.9:1", "http://127.0.0.1:8080", "http://127.0.0.2:8080", "http://127.0.0.3:8080")
		d.set(name, -1, "http://127.0.0.2:8080", "http://127.0.0.3:8080")
		time.Sleep(refresh)
		a.next(t, "http://127.0.0.9:1", "http://127.0.0.2:8080", "http://127.0.0.3:8080")
		// The bubble is idle: the watcher has recorded what it applied.
		if !slices.Equal(w.Backends(), []string{"http://127.0.0.9:1", "http://127.0.0.2:8080", "http://127.0.0.3:8080"}) {
			t.Errorf("Backends %v", w.Backends())
		}
		if n := logs.count("discovery: backends changed"); n != 2 {
			t.Errorf("%d change lines, want 2:\n%s", n, logs)
		}
		if !strings.Contains(logs.String(), `added="" removed=http://127.0.0.1:8080`) {
			t.Errorf("the removal is not logged by name:\n%s", logs)
		}
	})
}

// A TTL shorter than the refresh brings the next resolution sooner: the
// change is applied once the records expire, long before the refresh; a
// TTL of 0 re-resolves no sooner than MinTTLRefresh.
func TestWatcherTTLExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDNS()
		w, _ := watch(d, time.Hour)
		a := &applied{}
		const name = "dnssrv+http://_http._tcp.replicas.test"
		d.set(name, time.Second, "http://127.0.0.1:8081")
		if err := set(w, a, name); err != nil {
			t.Fatal(err)
		}
		a.next(t, "http://127.0.0.1:8081")
		if st := w.State()[0]; st.TTL != time.Second || !st.HasTTL || st.Next.Sub(st.Resolved) != MinTTLRefresh {
			t.Errorf("state %+v: want TTL 1s, next a second after", st)
		}
		run(t, w, a)
		d.set(name, time.Second, "http://127.0.0.1:8081", "http://127.0.0.1:8082")
		time.Sleep(time.Second)
		a.next(t, "http://127.0.0.1:8081", "http://127.0.0.1:8082")

		d.set(name, 0, "http://127.0.0.1:8081")
		time.Sleep(time.Second)
		a.next(t, "http://127.0.0.1:8081")
		before := d.count(name)
		time.Sleep(5 * MinTTLRefresh)
		synctest.Wait()
		if n := d.count(name) - before; n != 5 {
			t.Errorf("TTL 0: %d resolutions in 5 × MinTTLRefresh, want 5", n)
		}
	})
}

// A failure, then an empty answer: the last good set stays (nothing
// applied), each kind of problem is logged once however many refreshes
// see it, counted at each, and State says the name is stale; recovery is
// logged once and applied.
func TestWatcherKeepsLastGoodSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 50 * time.Millisecond
		d := newFakeDNS()
		w, logs := watch(d, every)
		a := &applied{}
		const name = "dns+http://replicas.test:8080"
		good := []string{"http://127.0.0.1:8080", "http://127.0.0.2:8080"}
		d.set(name, -1, good...)
		if err := set(w, a, name); err != nil {
			t.Fatal(err)
		}
		a.next(t, good...)
		run(t, w, a)

		d.fail(name)
		time.Sleep(4 * every)
		synctest.Wait()
		st := w.State()[0]
		if st.Errors != 4 || !st.Stale || !slices.Equal(st.Backends, good) || !strings.Contains(st.Problem, "replicas.test") || st.Since.IsZero() {
			t.Errorf("failing, 4 refreshes: %+v", st)
		}
		since := st.Since
		d.set(name, -1) // empty
		time.Sleep(3 * every)
		synctest.Wait()
		if st = w.State()[0]; st.Errors != 7 || !st.Stale || !slices.Equal(st.Backends, good) || st.Since != since {
			t.Errorf("empty, 3 refreshes more: %+v; want 7 errors, stale since the failure began, the set kept", st)
		}
		a.none(t)
		if !slices.Equal(w.Backends(), good) {
			t.Errorf("Backends %v", w.Backends())
		}
		if n := logs.count("did not resolve"); n != 1 {
			t.Errorf("failure logged %d times, want once:\n%s", n, logs)
		}
		if n := logs.count("has no records"); n != 1 {
			t.Errorf("empty answer logged %d times, want once:\n%s", n, logs)
		}

		d.set(name, -1, "http://127.0.0.3:8080")
		time.Sleep(every)
		a.next(t, "http://127.0.0.3:8080")
		if st := w.State()[0]; st.Stale || st.Problem != "" || st.Errors != 7 {
			t.Errorf("recovered: %+v", st)
		}
		if n := logs.count("resolves again"); n != 1 {
			t.Errorf("recovery logged %d times:\n%s", n, logs)
		}
	})
}

// Set is a reload: entries kept keep their last good set when they fail
// now, new ones that fail give nothing yet, duplicates are dropped, no
// replica at all is refused, and an apply refused changes nothing.
func TestWatcherSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDNS()
		w, _ := watch(d, time.Hour)
		a := &applied{}
		const nameA, nameB = "dns+http://a.test:8080", "dns+http://b.test:8080"
		d.set(nameA, -1, "http://127.0.0.1:8080", "http://127.0.0.2:8080")
		if err := set(w, a, nameA); err != nil {
			t.Fatal(err)
		}
		a.next(t, "http://127.0.0.1:8080", "http://127.0.0.2:8080")

		// a.test fails now: its last set stands. b.test is new and fails:
		// it gives nothing. The static backend that a.test also gives
		// (spelled otherwise) comes once, where the static entry is.
		d.fail(nameA)
		d.fail(nameB)
		if err := set(w, a, nameA, nameB, "HTTP://127.0.0.2:8080/"); err != nil {
			t.Fatal(err)
		}
		a.next(t, "http://127.0.0.1:8080", "HTTP://127.0.0.2:8080/")
		st := w.State()
		if len(st) != 2 || !st[0].Stale || st[0].Errors != 1 || len(st[0].Backends) != 2 || !st[1].Stale || len(st[1].Backends) != 0 {
			t.Errorf("state %+v", st)
		}

		// Only b.test, which has nothing: refused, apply not called, the
		// entries as they were.
		d.set(nameB, -1)
		err := set(w, a, nameB)
		if !errors.Is(err, ErrNoBackends) || !strings.Contains(err.Error(), "b.test") {
			t.Errorf("no replica: %v", err)
		}
		a.none(t)
		if len(w.State()) != 2 {
			t.Errorf("a refused Set changed the entries: %+v", w.State())
		}

		// The apply refuses: nothing changes.
		d.set(nameB, -1, "http://127.0.0.5:8080")
		a.fail = errors.New("refused")
		if err := set(w, a, nameB); !errors.Is(err, a.fail) {
			t.Errorf("apply refused: %v", err)
		}
		if len(w.State()) != 2 || !slices.Equal(w.Backends(), []string{"http://127.0.0.1:8080", "HTTP://127.0.0.2:8080/"}) {
			t.Errorf("after a refused apply: %v %+v", w.Backends(), w.State())
		}
		if _, err := ParseAll([]string{"http://x:1", "dns+ftp://x"}); err == nil {
			t.Error("a bad entry parsed")
		}
		if err := set(w, a, "dns+ftp://x"); err == nil {
			t.Error("Set took a bad entry")
		}
	})
}

// A name that Set adds while Run waits (with nothing to resolve, or a long
// way off) is followed from then on; one Set removes is not.
func TestWatcherSetWakesRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDNS()
		w, _ := watch(d, refresh)
		a := &applied{}
		run(t, w, a) // no entries yet
		const name = "dns+http://a.test:1"
		d.set(name, -1, "http://127.0.0.1:1")
		if err := set(w, a, "http://127.0.0.9:1", name); err != nil {
			t.Fatal(err)
		}
		a.next(t, "http://127.0.0.9:1", "http://127.0.0.1:1")
		d.set(name, -1, "http://127.0.0.2:1")
		time.Sleep(refresh)
		a.next(t, "http://127.0.0.9:1", "http://127.0.0.2:1")
		if err := set(w, a, "http://127.0.0.9:1"); err != nil {
			t.Fatal(err)
		}
		a.next(t, "http://127.0.0.9:1")
		if st := w.State(); len(st) != 0 {
			t.Errorf("a name removed is still watched: %+v", st)
		}
		before := d.count(name)
		time.Sleep(3 * refresh)
		a.none(t)
		if n := d.count(name) - before; n != 0 {
			t.Errorf("a name removed resolved %d times", n)
		}
	})
}

// Await, at a start before the names have records: it goes on from the
// Set that found nothing (no second query at once), keeps resolving every
// refresh, State says why no replica comes (the problem logged once, the
// tries counted), and it returns once apply has taken the first replicas,
// at the refresh that finds them; Run then follows the names. A context
// that ends stops it.
func TestWatcherAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDNS()
		w, logs := watch(d, refresh)
		a := &applied{}
		const name = "dns+http://replicas.test:8080"
		if err := set(w, a, name); !errors.Is(err, ErrNoBackends) {
			t.Fatalf("Set with no records: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Await(context.Background(), []string{name}, a.apply) }()
		synctest.Wait()
		if n := d.count(name); n != 1 {
			t.Errorf("%d queries before the refresh, want Set's alone", n)
		}
		time.Sleep(5 * refresh)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Await returned with no records: %v", err)
		default:
		}
		a.none(t)
		st := w.State()
		if len(st) != 1 || !st[0].Stale || st[0].Errors != 6 || !strings.Contains(st[0].Problem, "no records") || len(st[0].Backends) != 0 {
			t.Errorf("state while waiting, 6 tries: %+v", st)
		}
		if n := logs.count("has no records; it gives no replica until it does"); n != 1 {
			t.Errorf("the empty name logged %d times, want once:\n%s", n, logs)
		}

		d.set(name, -1, "http://127.0.0.1:8080")
		time.Sleep(refresh)
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("Await still waits once the name has records")
		}
		a.next(t, "http://127.0.0.1:8080")
		if n := logs.count("resolves again"); n != 1 {
			t.Errorf("the recovery logged %d times:\n%s", n, logs)
		}
		run(t, w, a)
		d.set(name, -1, "http://127.0.0.1:8080", "http://127.0.0.2:8080")
		time.Sleep(refresh)
		a.next(t, "http://127.0.0.1:8080", "http://127.0.0.2:8080")

		// A context that ends stops the wait.
		w2, _ := watch(d, refresh)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- w2.Await(ctx, []string{"dns+http://none.test:1"}, a.apply) }()
		time.Sleep(refresh / 2)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Await after its context ended: %v", err)
		}
	})
}
