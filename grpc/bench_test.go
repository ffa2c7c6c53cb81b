package hedgegrpc

import (
	"context"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/typepb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BenchmarkUnary measures what hedging costs a call when no hedge fires
// (the delay is a second; every call answers at once over bufconn): a
// plain ClientConn, the interceptor on one, and Replicas over one replica.
// Compare the rows of one run, as ratios:
//
//	cd grpc && go test -run '^$' -bench Unary -benchmem -count 5
func BenchmarkUnary(b *testing.B) {
	n := newNetwork(b)
	n.add("a:1", fast)
	policy := hedge.Policy{Delay: time.Second}
	c := mustClient(b, Config{Policy: policy, Methods: []string{getMethod}})
	r, err := NewReplicas(ReplicasConfig{Config: Config{Policy: policy, Methods: []string{getMethod}},
		Targets: []Target{{Name: "a:1", Conn: n.direct("a:1")}}})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for _, bc := range []struct {
		name string
		cc   grpc.ClientConnInterface
	}{
		{"plain", n.direct("a:1")},
		{"interceptor", n.direct("a:1", interceptor(c))},
		{"replicas", r},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req, out := wrapperspb.String("k"), new(typepb.Field)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.cc.Invoke(ctx, getMethod, req, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
