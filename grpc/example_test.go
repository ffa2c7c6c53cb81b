package hedgegrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	hedgegrpc "github.com/tailgate-dev/tailgate/grpc"
	"github.com/tailgate-dev/tailgate/hedge"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A greeter, written by hand over a well-known type: its first copy of a
// call straggles for a second, a hedge answers at once.
var greeter = grpc.ServiceDesc{
	ServiceName: "example.Greeter",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Hello",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			if !hedgegrpc.IsHedge(ctx) {
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return wrapperspb.String("hello, " + in.Value), nil
		},
	}},
}

func Example() {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	srv.RegisterService(&greeter, nil)
	go srv.Serve(lis)
	defer srv.Stop()

	client, err := hedgegrpc.NewClient(hedgegrpc.Config{
		Policy:  hedge.Policy{Delay: 20 * time.Millisecond},
		Methods: []string{"/example.Greeter/Hello"}, // idempotent reads only
	})
	if err != nil {
		log.Fatal(err)
	}
	cc, err := grpc.NewClient("passthrough:///greeter",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(client.UnaryClientInterceptor()),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()

	receipt := make(chan hedge.Receipt, 1)
	out := new(wrapperspb.StringValue)
	err = cc.Invoke(context.Background(), "/example.Greeter/Hello", wrapperspb.String("gopher"), out,
		hedgegrpc.OnReceipt(func(r hedge.Receipt) { receipt <- r }))
	if err != nil {
		log.Fatal(err)
	}
	r := <-receipt
	fmt.Println(out.Value)
	fmt.Printf("attempts %d, won by attempt %d (%s), primary %s\n",
		r.AttemptsLaunched, r.WinnerAttempt, r.Attempts[1].Trigger, r.Attempts[0].Fate)
	// Output:
	// hello, gopher
	// attempts 2, won by attempt 1 (delay), primary canceled
}
