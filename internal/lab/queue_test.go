package lab

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// serveQueued takes a slot from q, holds it for d and releases it,
// recording name in order when done.
func serveQueued(ctx context.Context, q *fixtureQueue, hedge bool, d time.Duration, name string, mu *sync.Mutex, order *[]string) error {
	if _, err := q.acquire(ctx, hedge); err != nil {
		return err
	}
	time.Sleep(d)
	q.release()
	mu.Lock()
	*order = append(*order, name)
	mu.Unlock()
	return nil
}

func TestQueueFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newFixtureQueue(1, 10, false)
		start := time.Now()
		done := make([]time.Duration, 5)
		queued := make([]bool, 5)
		var wg sync.WaitGroup
		for i := range done {
			wg.Go(func() {
				var err error
				if queued[i], err = q.acquire(context.Background(), false); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(20 * time.Millisecond)
				q.release()
				done[i] = time.Since(start)
			})
			synctest.Wait() // arrivals in order i
		}
		if st := q.state(); st.busy != 1 || st.waiting != 4 {
			t.Errorf("state %+v", st)
		}
		wg.Wait()
		want := []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 60 * time.Millisecond, 80 * time.Millisecond, 100 * time.Millisecond}
		if !slices.Equal(done, want) {
			t.Errorf("completions at %v, want %v", done, want)
		}
		if !slices.Equal(queued, []bool{false, true, true, true, true}) {
			t.Errorf("queued %v", queued)
		}
		if st := q.state(); st.busy != 0 || st.waiting != 0 || st.peak != 4 || st.total != 4 {
			t.Errorf("after: %+v", st)
		}
	})
}

func TestQueueCapacityTwo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newFixtureQueue(2, 10, false)
		start := time.Now()
		done := make([]time.Duration, 5)
		var wg sync.WaitGroup
		for i := range done {
			wg.Go(func() {
				q.acquire(context.Background(), false)
				time.Sleep(20 * time.Millisecond)
				q.release()
				done[i] = time.Since(start)
			})
			synctest.Wait()
		}
		wg.Wait()
		ms := time.Millisecond
		if want := []time.Duration{20 * ms, 20 * ms, 40 * ms, 40 * ms, 60 * ms}; !slices.Equal(done, want) {
			t.Errorf("completions at %v, want %v", done, want)
		}
	})
}

func TestQueueDeprioritizesHedges(t *testing.T) {
	for _, deprioritize := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			q := newFixtureQueue(1, 10, deprioritize)
			var mu sync.Mutex
			var order []string
			var wg sync.WaitGroup
			for _, a := range []struct {
				name  string
				hedge bool
			}{{"first", false}, {"hedge1", true}, {"hedge2", true}, {"primary1", false}, {"primary2", false}} {
				wg.Go(func() { serveQueued(t.Context(), q, a.hedge, 10*time.Millisecond, a.name, &mu, &order) })
				synctest.Wait()
			}
			wg.Wait()
			want := []string{"first", "hedge1", "hedge2", "primary1", "primary2"}
			if deprioritize {
				want = []string{"first", "primary1", "primary2", "hedge1", "hedge2"}
			}
			if !slices.Equal(order, want) {
				t.Errorf("deprioritize %v: served %v, want %v", deprioritize, order, want)
			}
		})
	}
}

func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newFixtureQueue(1, 2, true)
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		for _, name := range []string{"a", "b", "c"} {
			wg.Go(func() { serveQueued(t.Context(), q, name == "c", time.Millisecond, name, &mu, &order) })
			synctest.Wait()
		}
		// The limit counts primaries and hedges together.
		for _, hedge := range []bool{false, true} {
			if queued, err := q.acquire(t.Context(), hedge); !errors.Is(err, errQueueFull) || queued {
				t.Errorf("hedge %v: acquire on a full queue: %v %v", hedge, queued, err)
			}
		}
		wg.Wait()
		if !slices.Equal(order, []string{"a", "b", "c"}) {
			t.Errorf("served %v", order)
		}
		if st := q.state(); st.busy != 0 || st.waiting != 0 || st.peak != 2 {
			t.Errorf("after: %+v", st)
		}
	})
}

func TestQueueCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newFixtureQueue(1, 10, false)
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		wg.Go(func() { serveQueued(t.Context(), q, false, 50*time.Millisecond, "a", &mu, &order) })
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		var errB error
		wg.Go(func() { errB = serveQueued(ctx, q, false, time.Millisecond, "b", &mu, &order) })
		synctest.Wait()
		wg.Go(func() { serveQueued(t.Context(), q, false, time.Millisecond, "c", &mu, &order) })
		synctest.Wait()
		time.Sleep(20 * time.Millisecond) // b gives up at 10ms
		if st := q.state(); st.waiting != 1 {
			t.Errorf("after b's cancel: %+v, want 1 waiting", st)
		}
		wg.Wait()
		if !errors.Is(errB, context.DeadlineExceeded) || !slices.Equal(order, []string{"a", "c"}) {
			t.Errorf("b: %v; served %v", errB, order)
		}
		if st := q.state(); st.busy != 0 || st.waiting != 0 {
			t.Errorf("after: %+v", st)
		}
	})
}

// A slot granted to a request whose client has gone in the same instant
// passes on to the next waiter.
func TestQueueGrantToCancelledPassesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newFixtureQueue(1, 10, false)
		if _, err := q.acquire(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var errB, errC error
		var queuedB bool
		var wg sync.WaitGroup
		wg.Go(func() { queuedB, errB = q.acquire(ctx, false) })
		synctest.Wait()
		cGot := make(chan struct{})
		wg.Go(func() {
			if _, errC = q.acquire(t.Context(), false); errC == nil {
				close(cGot)
			}
		})
		synctest.Wait()
		// b's client leaves, and b is granted the slot before it can
		// leave the queue: under q.mu, so b cannot run in between and
		// take the slot as if its client were still there.
		q.mu.Lock()
		cancel()
		q.releaseLocked()
		q.mu.Unlock()
		wg.Wait()
		<-cGot
		if !queuedB || !errors.Is(errB, context.Canceled) || errC != nil {
			t.Errorf("b: %v %v; c: %v", queuedB, errB, errC)
		}
		if st := q.state(); st.busy != 1 || st.waiting != 0 {
			t.Errorf("state %+v", st)
		}
		q.release()
	})
}

// Many goroutines acquire and release at once; the capacity is never
// exceeded and everything drains. Run under -race.
func TestQueueConcurrent(t *testing.T) {
	q := newFixtureQueue(3, 1000, true)
	var inService, peak, served, gaveUp int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			ctx := context.Background()
			if i%7 == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(i%5)*50*time.Microsecond)
				defer cancel()
			}
			if _, err := q.acquire(ctx, i%2 == 0); err != nil {
				mu.Lock()
				gaveUp++
				mu.Unlock()
				return
			}
			mu.Lock()
			inService++
			peak = max(peak, inService)
			mu.Unlock()
			time.Sleep(20 * time.Microsecond)
			mu.Lock()
			inService--
			served++
			mu.Unlock()
			q.release()
		})
	}
	wg.Wait()
	if peak > 3 || served+gaveUp != 200 {
		t.Errorf("peak %d in service, %d served, %d gave up", peak, served, gaveUp)
	}
	if st := q.state(); st.busy != 0 || st.waiting != 0 {
		t.Errorf("after: %+v", st)
	}
}

func BenchmarkQueueUncontended(b *testing.B) {
	b.ReportAllocs()
	q := newFixtureQueue(1, 10, false)
	ctx := context.Background()
	for b.Loop() {
		q.acquire(ctx, false)
		q.release()
	}
}

func BenchmarkQueueContended(b *testing.B) {
	b.ReportAllocs()
	q := newFixtureQueue(2, 1<<20, true)
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		hedge := false
		for pb.Next() {
			q.acquire(ctx, hedge)
			q.release()
			hedge = !hedge
		}
	})
}
