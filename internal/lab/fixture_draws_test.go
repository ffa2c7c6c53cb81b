package lab

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
)

// attemptKey names one request sent to a fixture in these tests: an id
// and a hedge index (0 for a primary).
type attemptKey struct {
	id    int
	hedge int
}

// sendAttempt sends GET /item?id=k.id, marked as hedge k.hedge if not 0.
func sendAttempt(ctx context.Context, client *http.Client, base string, k attemptKey) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/item?id="+strconv.Itoa(k.id), nil)
	if err != nil {
		return err
	}
	if k.hedge > 0 {
		req.Header.Set(hedge.HedgeHeader, strconv.Itoa(k.hedge))
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &statusError{resp.StatusCode}
	}
	return nil
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + strconv.Itoa(e.code) }

// The same seed gives a request (id and attempt) the same latency whatever
// requests arrived before or alongside it: every attempt is sent at once,
// staggered by a microsecond in three different orders, one of which has
// five extra requests arriving first.
func TestFixtureLatencyIndependentOfArrivalOrder(t *testing.T) {
	var keys []attemptKey
	for id := range 12 {
		keys = append(keys, attemptKey{id, 0}, attemptKey{id, 1})
	}
	reversed := make([]attemptKey, len(keys))
	for i, k := range keys {
		reversed[len(keys)-1-i] = k
	}
	shuffled := append([]attemptKey{{100, 0}, {101, 1}, {102, 0}, {103, 0}, {104, 1}}, keys...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })

	m := Lognormal{P50: 4 * msec, P99: 60 * msec}
	serve := func(order []attemptKey) map[attemptKey]time.Duration {
		got := make(map[attemptKey]time.Duration, len(order))
		synctest.Test(t, func(t *testing.T) {
			_, tr := memFixture(t, FixtureConfig{Name: "f", Model: m, Seed: 7})
			client := &http.Client{Transport: tr}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i, k := range order {
				wg.Go(func() {
					time.Sleep(time.Duration(i) * time.Microsecond)
					start := time.Now()
					if err := sendAttempt(t.Context(), client, "http://fixture:80", k); err != nil {
						t.Errorf("%v: %v", k, err)
					}
					mu.Lock()
					got[k] = time.Since(start)
					mu.Unlock()
				})
			}
			wg.Wait()
		})
		return got
	}
	a, b, c := serve(keys), serve(reversed), serve(shuffled)
	for _, k := range keys {
		if a[k] != b[k] || a[k] != c[k] {
			t.Errorf("id %d hedge %d: latency %v, %v and %v in three orders with the same seed", k.id, k.hedge, a[k], b[k], c[k])
		}
	}
	// A hedge draws independently of its primary.
	for id := range 12 {
		if p, h := a[attemptKey{id, 0}], a[attemptKey{id, 1}]; p == h {
			t.Errorf("id %d: primary and hedge both took %v", id, p)
		}
	}
}

// drawModel records, for each request id and hedge flag, the first number
// its random source gives, and answers at once.
type drawModel struct {
	mu    *sync.Mutex
	draws map[drawModelKey]uint64
}

type drawModelKey struct {
	id    uint64
	hedge bool
}

func newDrawModel() drawModel {
	return drawModel{mu: new(sync.Mutex), draws: map[drawModelKey]uint64{}}
}

func (d drawModel) Sample(rng *rand.Rand, r Request) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.draws[drawModelKey{r.ID, r.Hedge}] = rng.Uint64()
	return 0
}

func (drawModel) String() string { return "draws" }

// The same over real loopback HTTP with eight concurrent clients: the draws
// of each request are the same whatever the order, and differ between the
// replicas of a pair (consecutive seeds).
func TestFixtureDrawsLoopbackConcurrent(t *testing.T) {
	client := &http.Client{Transport: hedge.NewBaseTransport()}
	defer client.CloseIdleConnections()
	serve := func(seed uint64, order []attemptKey) map[drawModelKey]uint64 {
		t.Helper()
		m := newDrawModel()
		f, err := StartFixture(FixtureConfig{Name: "f", Model: m, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		work := make(chan attemptKey)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for k := range work {
					if err := sendAttempt(t.Context(), client, f.URL(), k); err != nil {
						t.Errorf("%v: %v", k, err)
					}
				}
			})
		}
		for _, k := range order {
			work <- k
		}
		close(work)
		wg.Wait()
		return m.draws
	}
	var keys []attemptKey
	for id := range 40 {
		keys = append(keys, attemptKey{id, 0}, attemptKey{id, 1})
	}
	shuffled := append([]attemptKey{{1000, 0}, {1001, 0}, {1002, 1}}, keys...)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })

	a, b, other := serve(11, keys), serve(11, shuffled), serve(12, keys)
	for _, k := range keys {
		dk := drawModelKey{uint64(k.id), k.hedge > 0}
		if a[dk] != b[dk] {
			t.Errorf("id %d hedge %d: draw %#x, then %#x in another order, same seed", k.id, k.hedge, a[dk], b[dk])
		}
		if a[dk] == other[dk] {
			t.Errorf("id %d hedge %d: draw %#x with seeds 11 and 12", k.id, k.hedge, a[dk])
		}
	}
}

// uintModel answers the first number of its random source, as a duration.
type uintModel struct{}

func (uintModel) Sample(rng *rand.Rand, _ Request) time.Duration {
	return time.Duration(rng.Uint64() >> 1)
}
func (uintModel) String() string { return "uint" }

// Which draw a request gets: keyed by its id and attempt (the hedge
// header's index, 1 if not a positive integer), and for a request without
// an id by its rank among such arrivals, never confused with an id.
func TestFixtureDrawKeys(t *testing.T) {
	f, err := newFixture(FixtureConfig{Name: "f", Model: uintModel{}, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	draw := func(target, hedgeMark string) time.Duration {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		if hedgeMark != "" {
			r.Header.Set(hedge.HedgeHeader, hedgeMark)
		}
		req, key := f.arrival(r, time.Now())
		return f.sample(req, key)
	}
	primary := draw("/item?id=7", "")
	hedge1 := draw("/item?id=7", "1")
	distinct := map[string]time.Duration{
		"primary":  primary,
		"hedge 1":  hedge1,
		"hedge 2":  draw("/item?id=7", "2"),
		"id 8":     draw("/item?id=8", ""),
		"id 0":     draw("/item?id=0", ""),
		"no id #0": draw("/item", ""),        // the first arrival without an id
		"no id #1": draw("/item?id=x", ""),   // the second: x is no id
		"no id #2": draw("/item?id=-1", "1"), // the third, a hedge
	}
	seen := map[time.Duration]string{}
	for name, d := range distinct {
		if other, dup := seen[d]; dup {
			t.Errorf("%s and %s drew the same %v", name, other, d)
		}
		seen[d] = name
	}
	if d := draw("/item?id=7", ""); d != primary {
		t.Errorf("id 7 again: %v, first %v", d, primary)
	}
	for _, mark := range []string{"yes", "0", "-3"} {
		if d := draw("/item?id=7", mark); d != hedge1 {
			t.Errorf("hedge marked %q: %v, want hedge 1's %v", mark, d, hedge1)
		}
	}
	g, err := newFixture(FixtureConfig{Name: "g", Model: uintModel{}, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	req, key := g.arrival(httptest.NewRequest(http.MethodGet, "/item", nil), time.Now())
	if d := g.sample(req, key); d != distinct["no id #0"] {
		t.Errorf("first arrival without an id: %v on another fixture with the same seed, %v on the first", d, distinct["no id #0"])
	}
}

// Drawing a request's service time does not allocate.
func TestFixtureSampleAllocs(t *testing.T) {
	f, err := newFixture(FixtureConfig{Model: Lognormal{P50: msec, P99: 10 * msec}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var id uint64
	if n := testing.AllocsPerRun(100, func() {
		id++
		f.sample(Request{ID: id}, drawKey{n: id})
	}); n != 0 {
		t.Errorf("%v allocations per draw", n)
	}
}

// A stall pauses work in progress as well as arrivals: a request completes
// once it has run for its base time outside stalls.
func TestStallsPauseWorkInProgress(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		at, base, want time.Duration
	}{
		{990 * ms, 50 * ms, 150 * ms},               // 10ms, the stall [1s, 1.1s), then 40ms
		{950 * ms, 50 * ms, 50 * ms},                // completes just as the stall begins
		{950 * ms, 50*ms + 1, 150*ms + 1},           // one nanosecond too many
		{0, ms, 101 * ms},                           // arrives in a stall: waits, then works
		{30 * ms, ms, 71 * ms},                      // likewise
		{50 * ms, time.Second, 1150 * ms},           // waits 50ms, works 900ms, stalls 100ms, works 100ms
		{500 * ms, 2500 * ms, 2800 * ms},            // overlaps three stalls
		{500 * ms, 1800 * ms, 2000 * ms},            // two: 500ms + 900ms + 400ms of work
		{100 * ms, 900 * ms, 900 * ms},              // fills a whole run between stalls
		{100 * ms, 900*ms + 1, time.Second + 1},     // and one nanosecond past the next stall
		{3*time.Second + 40*ms, ms, 61 * ms},        // a later stall
		{999 * ms, 0, 0},                            // no work, outside a stall
		{1050 * ms, 0, 50 * ms},                     // no work, in a stall: waits it out
		{200 * ms, 5 * time.Second, 5500 * ms},      // five stalls of 100ms
		{time.Second - 1, 2 * ms, 102 * ms},         // 1ns of work, the stall, the rest
		{2*time.Second + 99*ms, 900 * ms, 901 * ms}, // 1ms wait, then exactly one run
	} {
		m := Stalls{Every: time.Second, For: 100 * ms, Base: Constant(c.base)}
		if got := m.Sample(nil, Request{At: c.at}); got != c.want {
			t.Errorf("arrival at %v, %v of work: latency %v, want %v", c.at, c.base, got, c.want)
		}
	}
	// The reviewer's case: it must not complete inside the stall.
	m := Stalls{Every: time.Second, For: 100 * ms, Base: Constant(50 * ms)}
	if done := 990*ms + m.Sample(nil, Request{At: 990 * ms}); done > time.Second && done < 1100*ms {
		t.Errorf("completes at %v, inside the stall [1s, 1.1s)", done)
	}
	// The text form is unchanged.
	const text = "stalls:every=1s,for=100ms,base=const:50ms"
	if m.String() != text {
		t.Errorf("text form %q, want %q", m.String(), text)
	}
	if p, err := ParseModel(text); err != nil || p != Model(m) {
		t.Errorf("ParseModel(%q) = %v, %v", text, p, err)
	}
}

// The latency agrees with a nanosecond-by-nanosecond simulation of a
// replica whose stalls stop all work, over many arrivals and works.
func TestStallsMatchSimulation(t *testing.T) {
	const every, stall = 1000, 300 // ns
	simulate := func(at, work time.Duration) time.Duration {
		t := at
		for t%every < stall {
			t++ // arrived in a stall
		}
		for ; work > 0; t++ {
			if t%every >= stall {
				work--
			}
		}
		return t - at
	}
	rng := rand.New(rand.NewPCG(8, 9))
	for range 2000 {
		at, work := time.Duration(rng.IntN(5000)), time.Duration(rng.IntN(4000))
		m := Stalls{Every: every, For: stall, Base: Constant(work)}
		if got, want := m.Sample(nil, Request{At: at}), simulate(at, work); got != want {
			t.Fatalf("arrival at %dns, %dns of work: latency %dns, want %dns", at, work, got, want)
		}
	}
}

// A stall that leaves almost no time for work makes long latencies, but
// cannot overflow them.
func TestStallsSaturate(t *testing.T) {
	// 1µs of work a second: a minute of work takes 6e7 seconds.
	slow := Stalls{Every: time.Second, For: time.Second - time.Microsecond, Base: Constant(time.Minute)}
	if got, want := slow.Sample(nil, Request{}), 60e6*time.Second; got != want {
		t.Errorf("1µs of work a second: latency %v, want %v", got, want)
	}
	// 1ns a minute: 6e10 minutes, beyond the largest Duration.
	tiny := Stalls{Every: time.Minute, For: time.Minute - 1, Base: Constant(time.Minute)}
	for _, m := range []Stalls{tiny, {Every: time.Second, For: time.Millisecond, Base: tiny}} {
		if got := m.Sample(nil, Request{At: time.Second}); got != math.MaxInt64-time.Second {
			t.Errorf("%v: latency %v, want the largest completion time less the arrival", m, got)
		}
	}
}
