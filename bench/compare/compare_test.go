package compare

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cristalhq/hedgedhttp"
	"github.com/tailgate-dev/tailgate/hedge"
)

var body = []byte(`{"value":"0123456789abcdef"}`)

// canned answers at once from memory: the benchmark measures the layers on
// top of it.
type canned struct{}

func (canned) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Header: http.Header{}, ContentLength: int64(len(body)),
		Body: io.NopCloser(bytes.NewReader(body)), Request: req,
	}, nil
}

func tailgate(b *testing.B, base http.RoundTripper, targets []string) http.RoundTripper {
	budget, _ := hedge.NewBudget(1, 1e6)
	p := hedge.Policy{Delay: time.Second, Budget: budget, Gate: hedge.Gate{Disabled: true}}
	t, err := hedge.NewTransport(hedge.TransportConfig{Base: base, Policy: p, Targets: targets})
	if err != nil {
		b.Fatal(err)
	}
	return t
}

func hedged(b *testing.B, base http.RoundTripper) http.RoundTripper {
	t, err := hedgedhttp.New(hedgedhttp.Config{Transport: base, Upto: 2, Delay: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return t
}

func roundTrips(b *testing.B, rt http.RoundTripper, url string, ctx context.Context) {
	b.ReportAllocs()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkInMemory: no network, no hedge fires; the differences are the
// cost of each hedging layer per request.
func BenchmarkInMemory(b *testing.B) {
	for _, cc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"cancellable", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
	} {
		ctx, cancel := cc.ctx()
		b.Run(cc.name+"/bare", func(b *testing.B) { roundTrips(b, canned{}, "http://a/x", ctx) })
		b.Run(cc.name+"/tailgate", func(b *testing.B) { roundTrips(b, tailgate(b, canned{}, nil), "http://a/x", ctx) })
		b.Run(cc.name+"/hedgedhttp", func(b *testing.B) { roundTrips(b, hedged(b, canned{}), "http://a/x", ctx) })
		// The README's example: two replicas, the Transport's defaults.
		b.Run(cc.name+"/tailgate-targets", func(b *testing.B) {
			t, err := hedge.NewTransport(hedge.TransportConfig{Base: canned{}, Targets: []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"}})
			if err != nil {
				b.Fatal(err)
			}
			roundTrips(b, t, "http://a/x", ctx)
		})
		cancel()
	}
}

// BenchmarkLoopback: real HTTP/1.1 on 127.0.0.1, no hedge fires.
func BenchmarkLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := func(name string, mk func(base http.RoundTripper) http.RoundTripper) {
		b.Run(name, func(b *testing.B) {
			base := hedge.NewBaseTransport()
			defer base.CloseIdleConnections()
			roundTrips(b, mk(base), srv.URL+"/x", ctx)
		})
	}
	run("bare", func(base http.RoundTripper) http.RoundTripper { return base })
	run("tailgate", func(base http.RoundTripper) http.RoundTripper { return tailgate(b, base, nil) })
	run("hedgedhttp", func(base http.RoundTripper) http.RoundTripper { return hedged(b, base) })
}
