package compare

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cristalhq/hedgedhttp"
	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/exp/straggler"
	"github.com/tailgate-dev/tailgate/lab/fixture"
	"github.com/tailgate-dev/tailgate/lab/load"
)

// The gateway reference shape (issue 10): two loopback replicas; a share
// of the reads is slow (40ms) on whichever replica serves it as a primary
// and fast (1ms) as a hedge; 500 reads at 100/s, open loop; the replicas
// read directly with alternating primaries, then through a hedging proxy
// with a 10ms delay that sends the hedge to the other replica.
const (
	shapeReads = 500
	shapeRate  = 100
	shapeSlow  = 40 * time.Millisecond
	shapeFast  = time.Millisecond
	shapeDelay = 10 * time.Millisecond
)

// BenchmarkGatewayShape runs the reference shape through three front ends
// in turn, on the same replicas in one run, at each share of slow reads:
// the replicas read directly; `tailgate serve`'s gateway with
// -hedge-delay 10ms -hedge-fraction 0.25; and the proxy a Go developer
// would build from a peer, httputil.ReverseProxy over hedgedhttp (Upto 2,
// Delay 10ms) with each hedge sent to the other replica. One iteration is
// one round of the three (15s), seeded by its number; it logs each round
// and reports the medians over the rounds of each one's p99 in ms, the
// ratios of the direct p99 to the hedged ones (the line is 3x),
// the attempts per read the replicas counted, and the CPU time the
// machine's hypervisor stole during a round (Linux's steal time), which is
// what moves a p99 of 500 reads most on a shared virtual machine:
//
//	cd bench/compare && go test -run '^$' -bench GatewayShape -benchtime 5x -timeout 30m
func BenchmarkGatewayShape(b *testing.B) {
	for _, share := range []float64{0.05, 0.1, 0.2} {
		b.Run("slow="+strconv.FormatFloat(share, 'g', -1, 64), func(b *testing.B) {
			var rounds []*shapeResult
			for b.Loop() {
				r, err := shapeRound(share, uint64(len(rounds)+1))
				if err != nil {
					b.Fatal(err)
				}
				rounds = append(rounds, r)
			}
			med := func(f func(*shapeResult) float64) float64 {
				xs := make([]float64, len(rounds))
				for i, r := range rounds {
					xs[i] = f(r)
				}
				slices.Sort(xs)
				return (xs[(len(xs)-1)/2] + xs[len(xs)/2]) / 2
			}
			b.ReportMetric(med(func(r *shapeResult) float64 { return r.p99["direct"] }), "direct-p99-ms")
			for _, side := range []string{"tailgate", "hedgedhttp"} {
				b.ReportMetric(med(func(r *shapeResult) float64 { return r.p99[side] }), side+"-p99-ms")
				b.ReportMetric(med(func(r *shapeResult) float64 { return r.p99["direct"] / r.p99[side] }), side+"-x")
				b.ReportMetric(med(func(r *shapeResult) float64 { return r.attempts[side] }), side+"-attempts/read")
			}
			b.ReportMetric(med(func(r *shapeResult) float64 { return r.stealMs }), "steal-ms")
			for i, r := range rounds {
				b.Logf("round %d: direct %.1fms, tailgate %.1fms (%.2fx), hedgedhttp %.1fms (%.2fx), steal %.0fms", i+1,
					r.p99["direct"], r.p99["tailgate"], r.p99["direct"]/r.p99["tailgate"], r.p99["hedgedhttp"], r.p99["direct"]/r.p99["hedgedhttp"], r.stealMs)
			}
		})
	}
}

// shapeResult is one round of the reference shape.
type shapeResult struct {
	p99, attempts map[string]float64
	stealMs       float64
}

// shapeRound runs one round at share with seed: fresh replicas, gateway and
// peer proxy, each front end read in turn.
func shapeRound(share float64, seed uint64) (*shapeResult, error) {
	model, err := straggler.IDs(shapeReads, share, shapeFast, shapeSlow)
	if err != nil {
		return nil, err
	}
	replicas, err := fixture.StartPair(model, seed)
	if err != nil {
		return nil, err
	}
	defer fixture.CloseAll(replicas)
	backends := []string{replicas[0].URL(), replicas[1].URL()}

	budget, err := hedge.NewBudget(0.25, hedge.DefaultBudgetBurst)
	if err != nil {
		return nil, err
	}
	g, err := gateway.New(gateway.Config{Backends: backends, Policy: hedge.Policy{Delay: shapeDelay, Budget: budget}})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	tailgate, stopTailgate, err := exp.ServeGateway(g)
	if err != nil {
		return nil, err
	}
	defer stopTailgate()
	peer, stopPeer, err := servePeerProxy(backends)
	if err != nil {
		return nil, err
	}
	defer stopPeer()

	client := exp.GatewayClient(10 * time.Second)
	defer client.CloseIdleConnections()
	fronts := []struct {
		name string
		url  func(i int) string
	}{
		{"direct", func(i int) string { return backends[i%2] }},
		{"tailgate", func(int) string { return tailgate }},
		{"hedgedhttp", func(int) string { return peer }},
	}
	res := &shapeResult{p99: map[string]float64{}, attempts: map[string]float64{}}
	stolenBefore, _ := exp.Stolen()
	for _, f := range fronts {
		before, start := fixture.Sum(replicas).Started, time.Now()
		outs := load.Generate(context.Background(), load.Config{Requests: shapeReads, Rate: shapeRate, Seed: seed},
			func(ctx context.Context, i int) error {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url(i)+"/item?id="+strconv.Itoa(i), nil)
				if err != nil {
					return err
				}
				return exp.Fetch(client, req)
			})
		// Losers finish their work after a cancel: count it before the
		// next front end starts.
		if err := fixture.SettleAll(context.Background(), replicas); err != nil {
			return nil, err
		}
		s := load.Summarize(outs, time.Since(start))
		if s.Failed+s.Dropped > 0 {
			return nil, fmt.Errorf("%s: %d of %d reads failed or dropped: %s", f.name, s.Failed+s.Dropped, shapeReads, s.FirstError)
		}
		res.p99[f.name] = s.P99Ms
		res.attempts[f.name] = float64(fixture.Sum(replicas).Started-before) / shapeReads
	}
	stolen, _ := exp.Stolen()
	res.stealMs = float64(stolen-stolenBefore) / 1e6
	return res, nil
}

// servePeerProxy serves httputil.ReverseProxy over hedgedhttp on loopback:
// primaries alternate between the backends; a hedge goes to the other one,
// marked as Tailgate marks its hedges (the replicas serve hedges fast in
// this shape). It returns the proxy's URL and its stop.
func servePeerProxy(backends []string) (string, func(), error) {
	var hosts [2]*url.URL
	for i, b := range backends {
		u, err := url.Parse(b)
		if err != nil {
			return "", nil, err
		}
		hosts[i] = u
	}
	other := map[string]string{hosts[0].Host: hosts[1].Host, hosts[1].Host: hosts[0].Host}
	base := hedge.NewBaseTransport()
	hedged, err := hedgedhttp.NewRoundTripper(shapeDelay, 2, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if hedgedhttp.IsHedgedRequest(r) {
			r = r.Clone(r.Context())
			r.URL.Host = other[r.URL.Host]
			r.Host = r.URL.Host
			r.Header.Set(hedge.HedgeHeader, "1")
		}
		return base.RoundTrip(r)
	}))
	if err != nil {
		return "", nil, err
	}
	var n atomic.Uint64
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(hosts[n.Add(1)%2]) },
		Transport: hedged,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close(); base.CloseIdleConnections() }, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
