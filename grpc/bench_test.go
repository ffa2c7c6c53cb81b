package hedgegrpc

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/typepb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// unaryClients returns the clients BenchmarkUnary compares: a plain
// ClientConn, the interceptor on one, and Replicas over one replica, all
// to one in-memory server that answers at once, with a hedge delay of a
// second, so that no hedge fires.
func unaryClients(b *testing.B) []namedClient {
	n := newNetwork(b)
	n.add("a:1", fast)
	policy := hedge.Policy{Delay: time.Second}
	c := mustClient(b, Config{Policy: policy, Methods: []string{getMethod}})
	r, err := NewReplicas(ReplicasConfig{Config: Config{Policy: policy, Methods: []string{getMethod}},
		Targets: []Target{{Name: "a:1", Conn: n.direct("a:1")}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	return []namedClient{
		{"plain", n.direct("a:1")},
		{"interceptor", n.direct("a:1", interceptor(c))},
		{"replicas", r},
	}
}

type namedClient struct {
	name string
	cc   grpc.ClientConnInterface
}

// BenchmarkUnary measures what hedging costs a call when no hedge fires,
// in allocations (and time, which a shared machine blurs: see
// BenchmarkUnaryInterleaved):
//
//	cd grpc && go test -run '^$' -bench 'Unary$' -benchmem -count 5
func BenchmarkUnary(b *testing.B) {
	for _, bc := range unaryClients(b) {
		b.Run(bc.name, func(b *testing.B) {
			req, out := wrapperspb.String("k"), new(typepb.Field)
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.cc.Invoke(ctx, getMethod, req, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnaryInterleaved times the clients of BenchmarkUnary call by
// call in turn, so that a slow spell of a shared machine lands on all of
// them alike, and reports each one's median call in µs, and the
// interceptor's and Replicas' medians as ratios of the plain client's:
//
//	cd grpc && go test -run '^$' -bench UnaryInterleaved -count 5
func BenchmarkUnaryInterleaved(b *testing.B) {
	clients := unaryClients(b)
	req, out := wrapperspb.String("k"), new(typepb.Field)
	// With a deadline, as calls have in production: gRPC then watches
	// the context in every call, hedged or not.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	took := make([][]time.Duration, len(clients))
	for b.Loop() {
		for i, c := range clients {
			start := time.Now()
			if err := c.cc.Invoke(ctx, getMethod, req, out); err != nil {
				b.Fatal(err)
			}
			took[i] = append(took[i], time.Since(start))
		}
	}
	med := make([]float64, len(clients))
	for i, c := range clients {
		slices.Sort(took[i])
		med[i] = float64(took[i][len(took[i])/2]) / 1e3
		b.ReportMetric(med[i], c.name+"-µs")
	}
	b.ReportMetric(med[1]/med[0], "interceptor/plain")
	b.ReportMetric(med[2]/med[0], "replicas/plain")
	b.ReportMetric(0, "ns/op")
}
