package tied_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"github.com/tailgate-dev/tailgate/tied"
)

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// ack answers every cancel message at once, without a network.
type ack struct{}

func (ack) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}}, nil
}

var noop = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

func benchServer(b *testing.B, workers int) (*tied.Server, http.Handler) {
	s, err := tied.NewServer(tied.ServerConfig{
		Workers:         workers,
		QueueLimit:      1 << 16,
		Peers:           []string{"http://peer"},
		CancelTransport: ack{},
		// The loop outruns the cancel goroutines; none is shed, so that
		// their cost is measured.
		MaxCancelsInFlight: 1 << 30,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, s.Handler(noop)
}

// The path of a request that finds a worker free: admission, run, hand-off.
func BenchmarkServerUntied(b *testing.B) {
	_, h := benchServer(b, 4)
	req, _ := http.NewRequest("GET", "http://a/x", nil)
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}

// A tied copy: the tie is registered, the cancel sent (to a transport that
// answers at once), the tie headers stripped and the tie remembered.
func BenchmarkServerTied(b *testing.B) {
	s, h := benchServer(b, 4)
	reqs := make([]*http.Request, 4096)
	for i := range reqs {
		reqs[i], _ = http.NewRequest("GET", "http://a/x", nil)
		reqs[i].Header.Set(tiedwire.TieHeader, "bench-"+strconv.Itoa(i))
		reqs[i].Header.Set(tiedwire.PeerHeader, "http://peer")
	}
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.ServeHTTP(w, reqs[i%len(reqs)])
		i++
	}
	b.StopTimer()
	s.Shutdown(context.Background())
	st := s.Stats()
	b.ReportMetric(float64(st.CancelsFailed)/float64(st.CancelsSent+st.CancelsFailed), "shed/op")
}

// A cancel received for a tie not here: a tombstone is remembered.
func BenchmarkServerCancelReceived(b *testing.B) {
	_, h := benchServer(b, 4)
	reqs := make([]*http.Request, 4096)
	for i := range reqs {
		reqs[i], _ = http.NewRequest("POST", "http://a"+tied.DefaultCancelPath+"?tie=bench-"+strconv.Itoa(i), nil)
	}
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.ServeHTTP(w, reqs[i%len(reqs)])
		i++
	}
}

// Requests from many goroutines through one worker: most wait in the queue
// and are handed the worker by the one before them.
func BenchmarkServerQueued(b *testing.B) {
	s, h := benchServer(b, 1)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest("GET", "http://a/x", nil)
		w := &discard{h: http.Header{}}
		for pb.Next() {
			h.ServeHTTP(w, req)
		}
	})
	b.ReportMetric(float64(s.Stats().MaxQueued), "maxqueued")
}
