package compare

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cristalhq/hedgedhttp"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/tailgate-dev/tailgate/hedge"
)

// The straggler scenario: the most basic workload a hedging library is
// judged on, with each library's own defaults around the same hedge delay.
const (
	stragglerReads = 2000
	stragglerRate  = 200 // reads per second, open loop
	stragglerShare = 0.055
	stragglerSlow  = 40 * time.Millisecond
	stragglerFast  = time.Millisecond
	stragglerDelay = 10 * time.Millisecond
)

// stragglerServer is one loopback backend for every library: each arrival
// of a request takes stragglerSlow with probability stragglerShare, else
// stragglerFast. The draw is keyed by the request's id and how many times
// that id has arrived before, so every library meets the same stragglers
// on its primaries and the same draws on its hedges. Handlers finish their
// work when the client cancels, as real servers do; attempts counts
// arrivals, the backend's own measure of the work it was given.
type stragglerServer struct {
	srv      *httptest.Server
	arrivals []atomic.Int32 // by id
	attempts atomic.Int64
	seed     uint64
}

func newStragglerServer(seed uint64) *stragglerServer {
	s := &stragglerServer{arrivals: make([]atomic.Int32, stragglerReads), seed: seed}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.Atoi(r.URL.Query().Get("id"))
		if err != nil || id < 0 || id >= len(s.arrivals) {
			http.Error(w, "bad id", http.StatusBadRequest)
			return
		}
		s.attempts.Add(1)
		n := s.arrivals[id].Add(1) - 1
		d := stragglerFast
		if rand.New(rand.NewPCG(s.seed^uint64(id), uint64(n))).Float64() < stragglerShare {
			d = stragglerSlow
		}
		time.Sleep(d)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	return s
}

func (s *stragglerServer) reset() {
	for i := range s.arrivals {
		s.arrivals[i].Store(0)
	}
	s.attempts.Store(0)
}

// stragglerRun reads stragglerReads ids through rt at stragglerRate (Poisson
// arrivals, seeded), each latency measured from its scheduled time, and
// returns the latencies in ms, sorted, and the failures.
func stragglerRun(rt http.RoundTripper, url string, seed uint64) (lat []float64, failed int) {
	rng := rand.New(rand.NewPCG(seed, 0))
	lat = make([]float64, stragglerReads)
	var wg sync.WaitGroup
	var failures atomic.Int32
	start := time.Now()
	at := time.Duration(0)
	for i := range stragglerReads {
		at += time.Duration(rng.ExpFloat64() / stragglerRate * float64(time.Second))
		time.Sleep(time.Until(start.Add(at)))
		due := start.Add(at)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/item?id="+strconv.Itoa(i), nil)
			resp, err := rt.RoundTrip(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = io.ErrUnexpectedEOF
				}
			}
			lat[i] = float64(time.Since(due)) / 1e6
			if err != nil {
				failures.Add(1)
				lat[i] = 1e9 // a failure is infinitely slow
			}
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, int(failures.Load())
}

func quantile(sorted []float64, q float64) float64 {
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

// BenchmarkStraggler runs the straggler scenario through each library in
// turn, on the same backend in one run: no hedging; Tailgate's Transport
// with Policy{Delay: 10ms} (default budget and overload gate); hedgedhttp
// with Upto 2 and Delay 10ms; failsafe-go's hedge policy with a 10ms delay.
// One iteration is a whole run of 2,000 reads (10s); it reports p50, p99
// and p99.9 in ms and backend attempts per read, as the server counted them.
// Run rounds of -count 1, so that each round runs every library in turn and
// a slow spell of a shared machine does not land on one library's runs:
//
//	cd bench/compare && for i in 1 2 3 4 5; do go test -run '^$' -bench Straggler -count 1; done
func BenchmarkStraggler(b *testing.B) {
	srv := newStragglerServer(42)
	defer srv.srv.Close()
	var gated gateHeld // Tailgate's wanted hedges its overload gate held back
	libraries := []struct {
		name string
		wrap func(base http.RoundTripper) http.RoundTripper
	}{
		{"none", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"tailgate", func(base http.RoundTripper) http.RoundTripper {
			t, err := hedge.NewTransport(hedge.TransportConfig{Base: base, Policy: hedge.Policy{Delay: stragglerDelay, Observer: &gated}})
			if err != nil {
				b.Fatal(err)
			}
			return t
		}},
		{"hedgedhttp", func(base http.RoundTripper) http.RoundTripper {
			t, err := hedgedhttp.New(hedgedhttp.Config{Transport: base, Upto: 2, Delay: stragglerDelay})
			if err != nil {
				b.Fatal(err)
			}
			return t
		}},
		{"failsafe-go", func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, hedgepolicy.NewWithDelay[*http.Response](stragglerDelay))
		}},
	}
	for _, lib := range libraries {
		b.Run(lib.name, func(b *testing.B) {
			for b.Loop() {
				srv.reset()
				gated.Store(0)
				base := hedge.NewBaseTransport()
				lat, failed := stragglerRun(lib.wrap(base), srv.srv.URL, 7)
				// Let cancelled losers finish before the next run counts.
				time.Sleep(2 * stragglerSlow)
				base.CloseIdleConnections()
				b.ReportMetric(quantile(lat, 0.50), "p50-ms")
				b.ReportMetric(quantile(lat, 0.99), "p99-ms")
				b.ReportMetric(quantile(lat, 0.999), "p99.9-ms")
				b.ReportMetric(float64(srv.attempts.Load())/stragglerReads, "attempts/read")
				b.ReportMetric(float64(failed), "failed")
				if lib.name == "tailgate" {
					b.ReportMetric(float64(gated.Load()), "gate-held")
				}
			}
		})
	}
}

// gateHeld counts the hedges a Hedger's overload gate held back.
type gateHeld struct{ atomic.Int64 }

func (g *gateHeld) Observe(e hedge.Event) {
	if e.Kind == hedge.EventSuppress && e.Reason == hedge.SuppressGate {
		g.Add(1)
	}
}
