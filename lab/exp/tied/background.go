package tied

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
)

// maxBackgroundOutstanding bounds the background requests in flight.
const maxBackgroundOutstanding = 1000

// tiedBackground offers the loaded cluster's background load: Poisson
// arrivals at a rate, each to a server drawn at random, untied and
// unhedged, until stopped. Requests in flight when it stops are let finish.
type tiedBackground struct {
	cancel    context.CancelFunc // stops the arrivals
	done      chan struct{}
	wg        sync.WaitGroup
	base      *http.Transport
	sent      int
	skipped   int
	succeeded atomic.Int64
	once      sync.Once
	result    bgWork
}

func startTiedBackground(ctx context.Context, urls []string, rate float64, seed uint64) *tiedBackground {
	sctx, cancel := context.WithCancel(ctx)
	b := &tiedBackground{cancel: cancel, done: make(chan struct{}), base: hedge.NewBaseTransport()}
	client := &http.Client{Transport: b.base, Timeout: 30 * time.Second}
	go func() {
		defer close(b.done)
		rng := rand.New(rand.NewPCG(seed, 0x6261636b)) // "back"
		slots := make(chan struct{}, maxBackgroundOutstanding)
		start := time.Now()
		var at time.Duration
		t := time.NewTimer(0)
		defer t.Stop()
		for i := 0; ; i++ {
			at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
			server := rng.IntN(len(urls))
			t.Reset(max(time.Until(start.Add(at)), 0))
			select {
			case <-t.C:
			case <-sctx.Done():
				return
			}
			select {
			case slots <- struct{}{}:
			default:
				b.skipped++
				continue
			}
			b.sent++
			u := urls[server] + backgroundPath + "?id=" + strconv.Itoa(i)
			b.wg.Go(func() {
				defer func() { <-slots }()
				// Not sctx: stopping the arrivals lets these finish.
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
				if err != nil {
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					return
				}
				if exp.AcceptValue(resp) == nil {
					b.succeeded.Add(1)
				}
				resp.Body.Close()
			})
		}
	}()
	return b
}

// stop ends the arrivals, waits for the requests in flight, and returns
// what the background did. It may be called more than once.
func (b *tiedBackground) stop() bgWork {
	b.once.Do(func() {
		b.cancel()
		<-b.done
		b.wg.Wait()
		b.base.CloseIdleConnections()
		b.result = bgWork{Sent: b.sent, Succeeded: int(b.succeeded.Load()), Skipped: b.skipped}
	})
	return b.result
}
