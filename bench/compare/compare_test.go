package compare

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
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

// tailgate is the Transport with its defaults over base: the README's
// example when targets are given, every attempt to the request's URL
// when not.
func tailgate(b *testing.B, base http.RoundTripper, targets []string) http.RoundTripper {
	t, err := hedge.NewTransport(hedge.TransportConfig{Base: base, Targets: targets})
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

// gets reads url through an http.Client over rt, as a user would. Beside
// the time per read it reports the process's CPU time per read
// (cpu-ns/op): on a shared machine the time also counts the waits for a
// core that other processes hold, and the CPU time does not.
func gets(b *testing.B, rt http.RoundTripper, url string) {
	b.ReportAllocs()
	client := &http.Client{Transport: rt}
	cpu0 := cpuTime()
	for b.Loop() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkInMemory: an http.Client over an in-memory RoundTripper that
// answers at once; no hedge fires. The differences from the plain client
// are each hedging layer's cost per request: Tailgate with its defaults,
// without Targets (every attempt to the request's URL) and with two
// (latency-aware picks, breakers), and hedgedhttp.
func BenchmarkInMemory(b *testing.B) {
	b.Run("plain", func(b *testing.B) { gets(b, canned{}, "http://a/x") })
	b.Run("tailgate", func(b *testing.B) { gets(b, tailgate(b, canned{}, nil), "http://a/x") })
	b.Run("tailgate-targets", func(b *testing.B) {
		gets(b, tailgate(b, canned{}, []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"}), "http://a/x")
	})
	b.Run("hedgedhttp", func(b *testing.B) { gets(b, hedged(b, canned{}), "http://a/x") })
}

// BenchmarkLoopback: real HTTP/1.1 on 127.0.0.1, no hedge fires.
func BenchmarkLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	run := func(name string, mk func(base http.RoundTripper) http.RoundTripper) {
		b.Run(name, func(b *testing.B) {
			base := hedge.NewBaseTransport()
			defer base.CloseIdleConnections()
			gets(b, mk(base), srv.URL+"/x")
		})
	}
	run("plain", func(base http.RoundTripper) http.RoundTripper { return base })
	run("tailgate", func(base http.RoundTripper) http.RoundTripper { return tailgate(b, base, nil) })
	run("hedgedhttp", func(base http.RoundTripper) http.RoundTripper { return hedged(b, base) })
}
