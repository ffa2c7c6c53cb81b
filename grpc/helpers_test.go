package hedgegrpc

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/typepb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The test service, written by hand over well-known types so that no
// protoc is needed: Get and Put take a key (StringValue) and answer a
// typepb.Field whose every string field the answering server fills with its
// name; Watch streams such answers.
const (
	getMethod   = "/tailgate.test.Echo/Get"
	putMethod   = "/tailgate.test.Echo/Put"
	watchMethod = "/tailgate.test.Echo/Watch"
)

// handler serves one unary call on backend b.
type handler func(ctx context.Context, b *backend, key string) (*typepb.Field, error)

// backend is one in-memory gRPC server of the test service.
type backend struct {
	name   string
	lis    *bufconn.Listener
	srv    *grpc.Server
	handle handler

	calls   atomic.Int64
	mu      sync.Mutex
	seen    []metadata.MD // incoming metadata of every unary call, in order
	keys    []string      // the key of every unary call, in order
	streams atomic.Int64
}

// answer is b's reply: its name in every string field, so that a reply
// mixing two servers' answers shows.
func (b *backend) answer() *typepb.Field {
	return &typepb.Field{Name: b.name, TypeUrl: b.name, JsonName: b.name, DefaultValue: b.name, Number: int32(len(b.name))}
}

// fast answers at once.
func fast(_ context.Context, b *backend, _ string) (*typepb.Field, error) { return b.answer(), nil }

func (b *backend) metadata() []metadata.MD {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]metadata.MD(nil), b.seen...)
}

func (b *backend) ran() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.keys...)
}

func unaryHandler(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor, method string) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	b := srv.(*backend)
	h := func(ctx context.Context, req any) (any, error) {
		b.calls.Add(1)
		md, _ := metadata.FromIncomingContext(ctx)
		b.mu.Lock()
		key := req.(*wrapperspb.StringValue).GetValue()
		b.seen = append(b.seen, md)
		b.keys = append(b.keys, key)
		b.mu.Unlock()
		return b.handle(ctx, b, key)
	}
	if ic == nil {
		return h(ctx, in)
	}
	return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, h)
}

var echoService = grpc.ServiceDesc{
	ServiceName: "tailgate.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Get", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			return unaryHandler(srv, ctx, dec, ic, getMethod)
		}},
		{MethodName: "Put", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			return unaryHandler(srv, ctx, dec, ic, putMethod)
		}},
	},
	Streams: []grpc.StreamDesc{{StreamName: "Watch", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
		b := srv.(*backend)
		b.streams.Add(1)
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err != nil {
			return err
		}
		md, _ := metadata.FromIncomingContext(ss.Context())
		b.mu.Lock()
		b.seen = append(b.seen, md)
		b.mu.Unlock()
		for range 3 {
			if err := ss.SendMsg(b.answer()); err != nil {
				return err
			}
		}
		return nil
	}}},
}

// network is a set of in-memory backends that clients reach by name.
type network struct {
	t        testing.TB
	backends map[string]*backend
}

func newNetwork(t testing.TB) *network {
	return &network{t: t, backends: make(map[string]*backend)}
}

// add starts a backend named name (a host:port, so that it may be a tied
// peer) with handler h and server options opts.
func (n *network) add(name string, h handler, opts ...grpc.ServerOption) *backend {
	return n.addServer(name, h, nil, opts...)
}

// addServer is add with s, when non-nil, installed on the backend: its
// interceptor and its cancel method.
func (n *network) addServer(name string, h handler, s *Server, opts ...grpc.ServerOption) *backend {
	b := &backend{name: name, lis: bufconn.Listen(1 << 20), handle: h}
	if s != nil {
		opts = append(opts, grpc.UnaryInterceptor(s.UnaryServerInterceptor()))
	}
	b.srv = grpc.NewServer(opts...)
	b.srv.RegisterService(&echoService, b)
	if s != nil {
		s.Register(b.srv)
	}
	n.backends[name] = b
	go b.srv.Serve(b.lis)
	n.t.Cleanup(b.srv.Stop)
	return b
}

func (n *network) dial(ctx context.Context, addr string) (net.Conn, error) {
	b := n.backends[addr]
	if b == nil {
		return nil, &net.OpError{Op: "dial", Net: "bufconn", Err: net.UnknownNetworkError(addr)}
	}
	return b.lis.DialContext(ctx)
}

// dialOptions are what a client of the network needs.
func (n *network) dialOptions(opts ...grpc.DialOption) []grpc.DialOption {
	return append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(n.dial),
	}, opts...)
}

// conn returns a ClientConn that spreads calls over the named backends
// round-robin, with opts (interceptors, say).
func (n *network) conn(names []string, opts ...grpc.DialOption) *grpc.ClientConn {
	r := manual.NewBuilderWithScheme("test")
	addrs := make([]resolver.Address, len(names))
	for i, name := range names {
		addrs[i] = resolver.Address{Addr: name}
	}
	r.InitialState(resolver.State{Addresses: addrs})
	opts = n.dialOptions(append([]grpc.DialOption{
		grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin": {}}]}`),
	}, opts...)...)
	cc, err := grpc.NewClient(r.Scheme()+":///echo", opts...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { cc.Close() })
	return cc
}

// direct returns a ClientConn to one backend.
func (n *network) direct(name string, opts ...grpc.DialOption) *grpc.ClientConn {
	cc, err := grpc.NewClient("passthrough:///"+name, n.dialOptions(opts...)...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { cc.Close() })
	return cc
}

// get calls Get with key on cc.
func get(ctx context.Context, cc grpc.ClientConnInterface, key string, opts ...grpc.CallOption) (*typepb.Field, error) {
	out := new(typepb.Field)
	err := cc.Invoke(ctx, getMethod, wrapperspb.String(key), out, opts...)
	return out, err
}

// whole reports whether f is one server's answer, not a mix.
func whole(f *typepb.Field) bool {
	return f.Name != "" && f.TypeUrl == f.Name && f.JsonName == f.Name && f.DefaultValue == f.Name && f.Number == int32(len(f.Name))
}

// interceptor returns a ClientConn option that hedges with c.
func interceptor(c *Client) grpc.DialOption {
	return grpc.WithUnaryInterceptor(c.UnaryClientInterceptor())
}

func mustClient(t testing.TB, cfg Config) *Client {
	t.Helper()
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// isHedgeMD reports whether incoming metadata md marks a hedge.
func isHedgeMD(md metadata.MD) bool {
	v := md.Get(hedgeKey)
	return len(v) > 0 && v[0] != "" && v[0] != "0"
}
