// Command straggler measures hedged gRPC unary calls over real gRPC on
// 127.0.0.1: two servers, no hedging against Tailgate's interceptor, its
// Replicas, and failsafe-go's hedging interceptor, side by side in one run,
// the clients taking turns within each round so that a slow spell of a
// shared machine does not land on one of them. It prints one line per run
// on stderr and a table of the medians over the rounds on stdout.
//
// Two workloads:
//
//   - straggler (issue 15's): each server answers 5% of calls in 40ms and
//     the rest in 1ms, each drawing its own stragglers; 2,000 calls per
//     run at 200/s, open loop, hedge delay 10ms. Tailgate runs with its
//     default budget and gate.
//
//   - together: both attempts of a call answer at nearly the same time
//     (the first arrival of a call waits 2ms, a later one 1ms, and the
//     hedge goes 1ms after the primary), so that losers decode their
//     answers too; every client hedges every call (Tailgate with no budget
//     or gate). Every server writes its name into every field of its
//     reply: a reply that mixes two servers' fields is counted as mixed.
//     Run it under the race detector to see who shares the caller's
//     reply between attempts:
//
//     cd grpc && go run ./bench/straggler                      # both tables, about 3 minutes
//     cd grpc && go run -race ./bench/straggler -workload together -only failsafe-go
//     cd grpc && go run -race ./bench/straggler -workload together -only tailgate
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafegrpc"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	hedgegrpc "github.com/tailgate-dev/tailgate/grpc"
	"github.com/tailgate-dev/tailgate/hedge"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/protobuf/types/known/typepb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const method = "/bench.Straggler/Get"

// workload is how servers answer, and the hedge delay clients use.
type workload struct {
	name  string
	delay time.Duration
	// answer returns how long a server takes for the n-th arrival (from
	// 0) of call id, its own random draw r in [0, 1) given.
	answer func(n int32, r float64) time.Duration
	// unlimited: Tailgate hedges every late call (no budget, no gate), as
	// failsafe-go does, so that both are compared hedging alike.
	unlimited bool
}

var workloads = map[string]workload{
	"straggler": {name: "straggler", delay: 10 * time.Millisecond, answer: func(_ int32, r float64) time.Duration {
		if r < 0.05 {
			return 40 * time.Millisecond
		}
		return time.Millisecond
	}},
	"together": {name: "together", delay: time.Millisecond, unlimited: true, answer: func(n int32, _ float64) time.Duration {
		if n == 0 {
			return 2 * time.Millisecond
		}
		return time.Millisecond
	}},
}

func main() {
	reads := flag.Int("requests", 2000, "calls per run (1 to 100000)")
	rate := flag.Float64("rate", 200, "calls per second, open loop (1 to 5000)")
	rounds := flag.Int("rounds", 3, "rounds; each runs every client once (1 to 20)")
	wl := flag.String("workload", "", "straggler or together (default: both)")
	only := flag.String("only", "", "run only this client: "+strings.Join(clientNames, ", "))
	flag.Parse()
	if err := check(*reads, *rate, *rounds, *wl, *only); err != nil {
		fmt.Fprintln(os.Stderr, "straggler:", err)
		os.Exit(2)
	}
	names := []string{"straggler", "together"}
	if *wl != "" {
		names = []string{*wl}
	}
	for _, name := range names {
		if err := measure(workloads[name], *reads, *rate, *rounds, *only); err != nil {
			fmt.Fprintln(os.Stderr, "straggler:", err)
			os.Exit(1)
		}
	}
}

func check(reads int, rate float64, rounds int, wl, only string) error {
	switch {
	case reads < 1 || reads > 100000:
		return fmt.Errorf("-requests %d: want 1 to 100000", reads)
	case !(rate >= 1 && rate <= 5000):
		return fmt.Errorf("-rate %v: want 1 to 5000", rate)
	case rounds < 1 || rounds > 20:
		return fmt.Errorf("-rounds %d: want 1 to 20", rounds)
	case wl != "" && workloads[wl].name == "":
		return fmt.Errorf("-workload %q: want straggler or together", wl)
	case only != "" && !slices.Contains(clientNames, only):
		return fmt.Errorf("-only %q: want one of %s", only, strings.Join(clientNames, ", "))
	}
	return nil
}

// server is one loopback gRPC server of the workload.
type server struct {
	addr      string
	srv       *grpc.Server
	w         workload
	seed      uint64
	arrivals  []atomic.Int32 // by call id
	attempts  atomic.Int64   // arrivals, the server's own measure of its work
	completed atomic.Int64   // answers sent (not cut short by a cancel)
}

func startServer(w workload, reads int, seed uint64) (*server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{addr: lis.Addr().String(), w: w, seed: seed, arrivals: make([]atomic.Int32, reads)}
	s.srv = grpc.NewServer()
	s.srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "bench.Straggler",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Get", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.Int64Value)
			if err := dec(in); err != nil {
				return nil, err
			}
			return s.get(ctx, in.Value)
		}}},
	}, nil)
	go s.srv.Serve(lis)
	return s, nil
}

// get answers call id after the workload's time, or gives up when the
// client cancels, as a real server would.
func (s *server) get(ctx context.Context, id int64) (*typepb.Field, error) {
	d := time.Duration(0) // warm-up calls (id < 0) answer at once, uncounted
	if id >= 0 && id < int64(len(s.arrivals)) {
		s.attempts.Add(1)
		n := s.arrivals[id].Add(1) - 1
		d = s.w.answer(n, rand.New(rand.NewPCG(s.seed^uint64(id), uint64(n))).Float64())
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if id >= 0 {
		s.completed.Add(1)
	}
	return &typepb.Field{Name: s.addr, TypeUrl: s.addr, JsonName: s.addr, DefaultValue: s.addr, Number: int32(len(s.addr))}, nil
}

func (s *server) reset() {
	for i := range s.arrivals {
		s.arrivals[i].Store(0)
	}
	s.attempts.Store(0)
	s.completed.Store(0)
}

var clientNames = []string{"none", "tailgate", "tailgate-replicas", "failsafe-go"}

// client makes the named client's connection to the servers, and what
// closes it.
func client(name string, w workload, servers []*server) (grpc.ClientConnInterface, func(), error) {
	policy := hedge.Policy{Delay: w.delay}
	if w.unlimited {
		b, err := hedge.NewBudget(1, 1e9)
		if err != nil {
			return nil, nil, err
		}
		policy.Budget, policy.Gate.Disabled = b, true
	}
	cfg := hedgegrpc.Config{Policy: policy, Methods: []string{method}}
	switch name {
	case "tailgate":
		c, err := hedgegrpc.NewClient(cfg)
		if err != nil {
			return nil, nil, err
		}
		return balanced(servers, grpc.WithUnaryInterceptor(c.UnaryClientInterceptor()))
	case "tailgate-replicas":
		var targets []hedgegrpc.Target
		var conns []*grpc.ClientConn
		closeAll := func() {
			for _, c := range conns {
				c.Close()
			}
		}
		for _, s := range servers {
			cc, err := grpc.NewClient("passthrough:///"+s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			conns = append(conns, cc)
			targets = append(targets, hedgegrpc.Target{Name: s.addr, Conn: cc})
		}
		r, err := hedgegrpc.NewReplicas(hedgegrpc.ReplicasConfig{Config: cfg, Targets: targets})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		return r, func() { r.Close(); closeAll() }, nil
	case "failsafe-go":
		return balanced(servers, grpc.WithUnaryInterceptor(
			failsafegrpc.NewUnaryClientInterceptor[*typepb.Field](hedgepolicy.NewWithDelay[*typepb.Field](w.delay))))
	}
	return balanced(servers)
}

// balanced returns a ClientConn that spreads calls (and so attempts) over
// the servers round-robin.
func balanced(servers []*server, opts ...grpc.DialOption) (grpc.ClientConnInterface, func(), error) {
	r := manual.NewBuilderWithScheme("bench")
	var addrs []resolver.Address
	for _, s := range servers {
		addrs = append(addrs, resolver.Address{Addr: s.addr})
	}
	r.InitialState(resolver.State{Addresses: addrs})
	opts = append(opts, grpc.WithResolvers(r), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin": {}}]}`))
	cc, err := grpc.NewClient(r.Scheme()+":///straggler", opts...)
	if err != nil {
		return nil, nil, err
	}
	return cc, func() { cc.Close() }, nil
}

// result is one run of one client.
type result struct {
	p50, p99, p999     float64 // ms
	attempts, answered float64 // per call: arrivals at the servers, answers they sent
	failed, mixed      int
}

// run makes reads calls through cc at rate (Poisson arrivals, seeded),
// each latency measured from its scheduled time.
func run(cc grpc.ClientConnInterface, reads int, rate float64, seed uint64) (lat []float64, failed, mixed int) {
	rng := rand.New(rand.NewPCG(seed, 0))
	lat = make([]float64, reads)
	var wg sync.WaitGroup
	var nFailed, nMixed atomic.Int32
	start := time.Now()
	at := time.Duration(0)
	for i := range reads {
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		due := start.Add(at)
		time.Sleep(time.Until(due))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			out := new(typepb.Field)
			err := cc.Invoke(ctx, method, wrapperspb.Int64(int64(i)), out)
			lat[i] = float64(time.Since(due)) / 1e6
			if err != nil {
				nFailed.Add(1)
				lat[i] = 1e9 // a failure is infinitely slow
				return
			}
			if f := out; f.Name == "" || f.TypeUrl != f.Name || f.JsonName != f.Name || f.DefaultValue != f.Name {
				nMixed.Add(1)
			}
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, int(nFailed.Load()), int(nMixed.Load())
}

func quantile(sorted []float64, q float64) float64 {
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

// measure runs every client (or only one) for rounds rounds on w and
// prints the table of medians.
func measure(w workload, reads int, rate float64, rounds int, only string) error {
	var servers []*server
	for i := range 2 {
		s, err := startServer(w, reads, uint64(42+i))
		if err != nil {
			return err
		}
		defer s.srv.Stop()
		servers = append(servers, s)
	}
	names := clientNames
	if only != "" {
		names = []string{only}
	}
	results := make(map[string][]result)
	for round := range rounds {
		for k := range names {
			name := names[(k+round)%len(names)] // each takes each place in turn
			cc, closeCC, err := client(name, w, servers)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			for i := range 20 { // connect before the clock runs
				cc.Invoke(context.Background(), method, wrapperspb.Int64(-1-int64(i)), new(typepb.Field))
			}
			for _, s := range servers {
				s.reset()
			}
			lat, failed, mixed := run(cc, reads, rate, uint64(7+round))
			time.Sleep(100 * time.Millisecond) // cancelled losers finish
			closeCC()
			var att, done int64
			for _, s := range servers {
				att += s.attempts.Load()
				done += s.completed.Load()
			}
			r := result{quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 0.999),
				float64(att) / float64(reads), float64(done) / float64(reads), failed, mixed}
			results[name] = append(results[name], r)
			fmt.Fprintf(os.Stderr, "%s round %d %-17s p50 %.1f p99 %.1f p99.9 %.1f ms, attempts/call %.3f, answers/call %.3f, failed %d, mixed %d\n",
				w.name, round+1, name, r.p50, r.p99, r.p999, r.attempts, r.answered, failed, mixed)
		}
	}
	fmt.Printf("\n%s workload: %d calls per run at %v/s, hedge delay %v, medians of %d rounds\n\n", w.name, reads, rate, w.delay, rounds)
	fmt.Println("| client | p50 ms | p99 ms | p99.9 ms | attempts per call | answers per call | failed | mixed replies |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, name := range names {
		rs := results[name]
		med := func(f func(result) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		fmt.Printf("| %s | %.1f | %.1f | %.1f | %.3f | %.3f | %.0f | %.0f |\n", name,
			med(func(r result) float64 { return r.p50 }), med(func(r result) float64 { return r.p99 }),
			med(func(r result) float64 { return r.p999 }), med(func(r result) float64 { return r.attempts }),
			med(func(r result) float64 { return r.answered }), med(func(r result) float64 { return float64(r.failed) }),
			med(func(r result) float64 { return float64(r.mixed) }))
	}
	return nil
}
