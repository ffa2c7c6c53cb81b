package hedge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/replica"
)

func benchHedger(b *testing.B, delay time.Duration) *Hedger {
	b.Helper()
	h, err := New(benchPolicy(b, delay))
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// benchPolicy hedges after delay, with a budget that never runs out and
// the gate off: the benchmarks measure the engine's bookkeeping.
func benchPolicy(b *testing.B, delay time.Duration) Policy {
	b.Helper()
	budget, err := NewBudget(1, 1e6)
	if err != nil {
		b.Fatal(err)
	}
	return Policy{Delay: delay, Budget: budget, Gate: Gate{Disabled: true}}
}

// BenchmarkDo measures the engine around a call that costs nothing, so the
// figures are pure overhead.
func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		call := func(context.Context, Attempt) (int, error) { return 1, nil }
		for b.Loop() {
			if _, err := call(ctx, Attempt{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("no-hedge", func(b *testing.B) {
		b.ReportAllocs()
		h := benchHedger(b, time.Second)
		op := Op[int]{Call: func(context.Context, Attempt) (int, error) { return 1, nil }}
		for b.Loop() {
			if _, err := Do(ctx, h, op); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("no-hedge-inline", func(b *testing.B) {
		b.ReportAllocs()
		h := benchHedger(b, time.Second)
		op := Op[int]{Call: func(context.Context, Attempt) (int, error) { return 1, nil }}
		for b.Loop() {
			if _, err := Do(ctx, h, op); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hedge-on-failure", func(b *testing.B) {
		b.ReportAllocs()
		h := benchHedger(b, time.Second)
		failed := errors.New("reset")
		op := Op[int]{
			Targets: []string{"a", "b"},
			Call: func(ctx context.Context, a Attempt) (int, error) {
				if a.Index == 0 {
					return 0, failed // launches the hedge at once
				}
				return 1, nil
			},
		}
		for b.Loop() {
			if v, err := Do(ctx, h, op); err != nil || v != 1 {
				b.Fatal(v, err)
			}
		}
	})
	// hedge-fires waits for a 1µs delay timer: its time is mostly the
	// runtime's timer wake-up, its allocations are those of a hedge.
	b.Run("hedge-fires", func(b *testing.B) {
		b.ReportAllocs()
		h := benchHedger(b, time.Microsecond)
		op := Op[int]{
			Targets: []string{"a", "b"},
			Call: func(ctx context.Context, a Attempt) (int, error) {
				if a.Index == 0 {
					<-ctx.Done() // a straggler, until cancelled
					return 0, ctx.Err()
				}
				return 1, nil
			},
		}
		for b.Loop() {
			if v, err := Do(ctx, h, op); err != nil || v != 1 {
				b.Fatal(v, err)
			}
		}
	})
}

// cannedTransport answers every request at once from memory, so transport
// benchmarks measure the hedging layer and not a network.
type cannedTransport struct{ body []byte }

func (c *cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode:    200,
		Header:        http.Header{},
		Body:          io.NopCloser(bytes.NewReader(c.body)),
		ContentLength: int64(len(c.body)),
		Request:       req,
	}, nil
}

// failFirst fails the primary at once and answers the hedge.
type failFirst struct{ cannedTransport }

func (f *failFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get(HedgeHeader) == "" {
		return nil, errors.New("connection reset")
	}
	return f.cannedTransport.RoundTrip(req)
}

// stallFirst stalls the primary (until cancelled) and answers the hedge.
type stallFirst struct{ cannedTransport }

func (s *stallFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get(HedgeHeader) == "" {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return s.cannedTransport.RoundTrip(req)
}

func benchRoundTrips(b *testing.B, rt http.RoundTripper, url string) {
	b.Helper()
	b.ReportAllocs()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	for b.Loop() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime returns the CPU time the process has used, user and system: on
// a shared machine a benchmark's time per operation also counts the waits
// for a core that other processes hold, and its CPU time does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTransportOverhead compares a bare in-memory transport with the
// hedging Transport wrapped around it: the difference is what hedging adds
// to a request when no hedge fires. The in-memory base returns at once, as
// net/http does when cancelled, so the primary runs inline, as it does by
// default over an *http.Transport (hedged-no-hedge-detached: over a base
// the Transport cannot vouch for, by default).
func BenchmarkTransportOverhead(b *testing.B) {
	body := []byte(`{"value":"0123456789abcdef"}`)
	canned := &cannedTransport{body: body}
	b.Run("bare", func(b *testing.B) { benchRoundTrips(b, canned, "http://a/x") })
	b.Run("hedged-no-hedge", func(b *testing.B) {
		tr, err := NewTransport(TransportConfig{Base: canned, Policy: benchPolicy(b, time.Second)})
		if err != nil {
			b.Fatal(err)
		}
		benchRoundTrips(b, tr, "http://a/x")
	})
	b.Run("hedged-no-hedge-detached", func(b *testing.B) {
		tr, err := NewTransport(TransportConfig{Base: canned, Policy: benchPolicy(b, time.Second)})
		if err != nil {
			b.Fatal(err)
		}
		benchRoundTrips(b, tr, "http://a/x")
	})
	b.Run("hedged-no-hedge-targets", func(b *testing.B) {
		tr, err := NewTransport(TransportConfig{Base: canned, Policy: benchPolicy(b, time.Second), Targets: []string{"http://a", "http://b"}})
		if err != nil {
			b.Fatal(err)
		}
		benchRoundTrips(b, tr, "http://x/x")
	})
	b.Run("hedged-hedge-on-failure", func(b *testing.B) {
		// Every primary fails, wherever it goes: breakers that opened
		// would leave no replica for the hedge, so they never open here.
		set, err := replica.New([]string{"http://a", "http://b"}, replica.Config{FailureThreshold: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		tr, err := NewTransport(TransportConfig{Base: &failFirst{*canned}, Policy: benchPolicy(b, time.Second), Replicas: set})
		if err != nil {
			b.Fatal(err)
		}
		benchRoundTrips(b, tr, "http://x/x")
	})
	b.Run("hedged-hedge-fires", func(b *testing.B) {
		tr, err := NewTransport(TransportConfig{Base: &stallFirst{*canned}, Policy: benchPolicy(b, time.Microsecond), Targets: []string{"http://a", "http://b"}})
		if err != nil {
			b.Fatal(err)
		}
		benchRoundTrips(b, tr, "http://x/x")
	})
}

// BenchmarkTransportLoopback runs real HTTP/1.1 on 127.0.0.1: a bare
// http.Transport against the hedging Transport on the same server.
func BenchmarkTransportLoopback(b *testing.B) {
	body := []byte(`{"value":"0123456789abcdef"}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	b.Run("bare", func(b *testing.B) {
		base := NewBaseTransport()
		defer base.CloseIdleConnections()
		benchRoundTrips(b, base, srv.URL+"/x")
	})
	b.Run("hedged-no-hedge", func(b *testing.B) {
		base := NewBaseTransport()
		defer base.CloseIdleConnections()
		tr, err := NewTransport(TransportConfig{Base: base, Policy: benchPolicy(b, time.Second), Targets: []string{srv.URL}})
		if err != nil {
			b.Fatal(err)
		}
		benchRoundTrips(b, tr, "http://x/x")
	})
}
