package lab

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/memnet"
)

const msec = time.Millisecond

// memFixture builds a fixture served in memory, for synctest bubbles.
func memFixture(t *testing.T, cfg FixtureConfig) (*Fixture, *memnet.Transport) {
	t.Helper()
	f, err := newFixture(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &memnet.Transport{}
	tr.Handle("fixture:80", f.handler)
	t.Cleanup(tr.Wait)
	return f, tr
}

// memGet sends GET /item?id=id (a hedge if hedged) and returns the status,
// or 0 if the request failed.
func memGet(ctx context.Context, tr http.RoundTripper, id int, hedged bool) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://fixture:80/item?id="+strconv.Itoa(id), nil)
	if err != nil {
		panic(err)
	}
	if hedged {
		req.Header.Set(hedge.HedgeHeader, "1")
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Five requests at once to a one-slot fixture with 20ms of work each: they
// are served one after another, and the waits count in their latency.
func TestFixtureQueueServesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, tr := memFixture(t, FixtureConfig{Name: "q", Model: Constant(20 * msec), Capacity: 1})
		start := time.Now()
		done := make([]time.Duration, 5)
		var wg sync.WaitGroup
		for i := range done {
			wg.Go(func() {
				if code := memGet(t.Context(), tr, i, false); code != http.StatusOK {
					t.Errorf("request %d: status %d", i, code)
				}
				done[i] = time.Since(start)
			})
			synctest.Wait()
		}
		wg.Wait()
		tr.Wait()
		if want := []time.Duration{20 * msec, 40 * msec, 60 * msec, 80 * msec, 100 * msec}; !slices.Equal(done, want) {
			t.Errorf("answers at %v, want %v", done, want)
		}
		want := Stats{Started: 5, Completed: 5, MaxInFlight: 1, Queued: 4, MaxQueue: 4, QueueWait: (20 + 40 + 60 + 80) * msec}
		if got := f.Stats(); got != want {
			t.Errorf("stats %+v, want %+v", got, want)
		}
	})
}

func TestFixtureDeprioritizesHedges(t *testing.T) {
	for _, deprioritize := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			f, tr := memFixture(t, FixtureConfig{Model: Constant(10 * msec), Capacity: 1, DeprioritizeHedges: deprioritize})
			start := time.Now()
			done := make([]time.Duration, 3)
			var wg sync.WaitGroup
			// A primary in service, then a hedge waits, then a primary.
			for i, hedged := range []bool{false, true, false} {
				wg.Go(func() {
					memGet(t.Context(), tr, i, hedged)
					done[i] = time.Since(start)
				})
				synctest.Wait()
			}
			wg.Wait()
			want := []time.Duration{10 * msec, 20 * msec, 30 * msec}
			if deprioritize {
				want = []time.Duration{10 * msec, 30 * msec, 20 * msec}
			}
			if !slices.Equal(done, want) {
				t.Errorf("deprioritize %v: answers at %v, want %v", deprioritize, done, want)
			}
			if s := f.Stats(); s.Hedges != 1 || s.HedgesServed != 1 || s.Queued != 2 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestFixtureQueueFullAnswers503(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, tr := memFixture(t, FixtureConfig{Model: Constant(10 * msec), Capacity: 1, QueueLimit: 1})
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() { memGet(t.Context(), tr, i, false) })
			synctest.Wait()
		}
		start := time.Now()
		if code := memGet(t.Context(), tr, 2, true); code != http.StatusServiceUnavailable || time.Since(start) != 0 {
			t.Errorf("third request: status %d after %v, want 503 at once", code, time.Since(start))
		}
		wg.Wait()
		want := Stats{Started: 2, Completed: 2, Hedges: 1, MaxInFlight: 1, Queued: 1, MaxQueue: 1, Rejected: 1, QueueWait: 10 * msec}
		if got := f.Stats(); got != want {
			t.Errorf("stats %+v, want %+v", got, want)
		}
	})
}

// With StopOnCancel, a client that gives up while its request waits takes
// it out of the queue: a cancellation observed, never started.
func TestFixtureCancelWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, tr := memFixture(t, FixtureConfig{Model: Constant(50 * msec), Capacity: 1, StopOnCancel: true})
		var wg sync.WaitGroup
		wg.Go(func() { memGet(t.Context(), tr, 1, false) })
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 10*msec)
		defer cancel()
		wg.Go(func() {
			if code := memGet(ctx, tr, 2, true); code != 0 {
				t.Errorf("cancelled request answered %d", code)
			}
		})
		synctest.Wait()
		time.Sleep(20 * msec)
		synctest.Wait()
		if s := f.Stats(); s.Started != 1 || s.CancellationsObserved != 1 || s.Queued != 1 || s.QueueWait != 10*msec {
			t.Errorf("after the cancel: %+v", s)
		}
		if err := f.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		want := Stats{Started: 1, Completed: 1, CancellationsObserved: 1, Hedges: 1, MaxInFlight: 1, Queued: 1, MaxQueue: 1, QueueWait: 10 * msec}
		if got := f.Stats(); got != want {
			t.Errorf("stats %+v, want %+v", got, want)
		}
	})
}

// By default a server does not notice a cancel in its queue either: the
// request waits its turn and is served, wasted work that the counters show.
func TestFixtureCancelledWhileQueuedIsStillServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, tr := memFixture(t, FixtureConfig{Model: Constant(50 * msec), Capacity: 1})
		var wg sync.WaitGroup
		wg.Go(func() { memGet(t.Context(), tr, 1, false) })
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 10*msec)
		defer cancel()
		wg.Go(func() { memGet(ctx, tr, 2, true) })
		synctest.Wait()
		if err := f.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		want := Stats{Started: 2, Completed: 2, CompletedAfterCancel: 1, CancellationsObserved: 1, Hedges: 1, HedgesServed: 1,
			MaxInFlight: 1, Queued: 1, MaxQueue: 1, QueueWait: 50 * msec}
		if got := f.Stats(); got != want {
			t.Errorf("stats %+v, want %+v", got, want)
		}
	})
}

// The model sees the id, the hedge mark and the arrival time since the
// fixture started, not the time service started.
func TestFixturePassesRequestToModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []Request
		_, tr := memFixture(t, FixtureConfig{Model: recordModel{seen: &seen, d: 10 * msec}, Capacity: 1})
		time.Sleep(5 * msec)
		var wg sync.WaitGroup
		wg.Go(func() { memGet(t.Context(), tr, 7, true) })
		synctest.Wait()
		wg.Go(func() { memGet(t.Context(), tr, 8, false) }) // waits 10ms
		synctest.Wait()
		wg.Wait()
		time.Sleep(time.Second)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://fixture:80/item?id=x", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := []Request{{ID: 7, Hedge: true, At: 5 * msec}, {ID: 8, At: 5 * msec}, {ID: 0, At: 1025 * msec}}
		if !reflect.DeepEqual(seen, want) {
			t.Errorf("model saw %+v, want %+v", seen, want)
		}
		if string(body) != "{\"value\":\":0\"}\n" {
			t.Errorf("body %q", body)
		}
	})
}

func TestFixtureStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, tr := memFixture(t, FixtureConfig{Model: Stalls{Every: time.Second, For: 100 * msec, Base: Constant(msec)}})
		for _, c := range []struct{ at, want time.Duration }{
			{0, 101 * msec},          // inside the first stall
			{500 * msec, msec},       // between stalls
			{1050 * msec, 51 * msec}, // waits out the second stall's last 50ms
			{2100 * msec, msec},      // just after the third
		} {
			time.Sleep(c.at - time.Since(f.start))
			start := time.Now()
			memGet(t.Context(), tr, 1, false)
			if got := time.Since(start); got != c.want {
				t.Errorf("arrival at %v: latency %v, want %v", c.at, got, c.want)
			}
		}
	})
}

// The same queue over real loopback HTTP, with wide tolerances: one slot,
// 20ms each, five at once.
func TestFixtureQueueLoopback(t *testing.T) {
	f, err := StartFixture(FixtureConfig{Name: "q", Model: Constant(20 * msec), Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	client := &http.Client{Transport: hedge.NewBaseTransport()}
	defer client.CloseIdleConnections()
	start := time.Now()
	done := make([]time.Duration, 5)
	var wg sync.WaitGroup
	for i := range done {
		wg.Go(func() {
			resp, err := client.Get(f.URL() + "/item?id=" + strconv.Itoa(i))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			done[i] = time.Since(start)
		})
	}
	wg.Wait()
	slices.Sort(done)
	for k, d := range done {
		// One server, 20ms per request: the k-th answer cannot come
		// before (k+1)·20ms.
		if lo, hi := time.Duration(k+1)*20*msec, time.Duration(k+1)*20*msec+2*time.Second; d < lo || d > hi {
			t.Errorf("answer %d at %v, want in [%v, %v]", k, d, lo, hi)
		}
	}
	s := f.Stats()
	if s.Started != 5 || s.Completed != 5 || s.MaxInFlight != 1 || s.Queued < 1 || s.QueueWait <= 0 || s.MaxQueue < 1 {
		t.Errorf("stats %+v", s)
	}
	// The counters over HTTP, QueueWait in milliseconds.
	resp, err := client.Get(f.URL() + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got Stats
	if err := json.Unmarshal(body, &got); err != nil || got.QueueWait.Round(time.Microsecond) != s.QueueWait.Round(time.Microsecond) || got.Queued != s.Queued {
		t.Errorf("/stats %s decodes to %+v, %v", body, got, err)
	}
	if !strings.Contains(string(body), `"queueWaitMs":`) {
		t.Errorf("/stats %s has no queueWaitMs", body)
	}
}

func TestFixtureQueueFullLoopback(t *testing.T) {
	f, err := StartFixture(FixtureConfig{Model: Constant(300 * msec), Capacity: 1, QueueLimit: 1, StopOnCancel: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	client := &http.Client{Transport: hedge.NewBaseTransport()}
	defer client.CloseIdleConnections()
	get := func(ctx context.Context) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.URL()+"/item", nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { get(context.Background()) })
	waitFor(t, func() bool { return f.Stats().Started == 1 })
	// A second request waits; its client gives up, so it leaves the queue
	// without being started.
	ctx, cancel := context.WithCancel(context.Background())
	wg.Go(func() { get(ctx) })
	waitFor(t, func() bool { return f.Stats().Queued == 1 })
	cancel()
	waitFor(t, func() bool { return f.Stats().CancellationsObserved == 1 })
	// Its place goes to a third.
	wg.Go(func() { get(context.Background()) })
	waitFor(t, func() bool { return f.Stats().Queued == 2 })
	// The queue holds one: a fourth is refused at once.
	start := time.Now()
	code, err := get(context.Background())
	if err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("fourth request: %d %v, want 503", code, err)
	}
	if d := time.Since(start); d > 250*msec {
		t.Errorf("503 took %v", d)
	}
	wg.Wait()
	settle, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := f.Settle(settle); err != nil {
		t.Fatal(err)
	}
	s := f.Stats()
	if s.Started != 2 || s.Completed != 2 || s.CancellationsObserved != 1 || s.Rejected != 1 || s.Queued != 2 || s.MaxQueue != 1 || s.MaxInFlight != 1 {
		t.Errorf("stats %+v", s)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestStatsJSON(t *testing.T) {
	in := Stats{Started: 1, Completed: 2, CompletedAfterCancel: 3, CancellationsObserved: 4, Hedges: 5, MaxInFlight: 6,
		HedgesServed: 7, Queued: 8, MaxQueue: 9, Rejected: 10, QueueWait: 1234567 * time.Nanosecond}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"started":1,"completed":2,"completedAfterCancel":3,"cancellationsObserved":4,"hedges":5,"maxInFlight":6,` +
		`"hedgesServed":7,"queued":8,"maxQueue":9,"rejected":10,"queueWaitMs":1.234567}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var out Stats
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("round trip: %+v %v", out, err)
	}
	// Through a pointer and inside other values too.
	b, _ = json.Marshal(map[string]*Stats{"a": &in})
	if !strings.Contains(string(b), `"queueWaitMs":1.234567`) {
		t.Errorf("%s", b)
	}
}
