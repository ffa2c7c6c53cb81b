package hedgegrpc

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/replica"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/typepb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func newReplicas(t *testing.T, n *network, cfg ReplicasConfig, names ...string) *Replicas {
	t.Helper()
	for _, name := range names {
		cfg.Targets = append(cfg.Targets, Target{Name: name, Conn: n.direct(name)})
	}
	if cfg.Methods == nil && cfg.Hedgeable == nil {
		cfg.Methods = []string{getMethod}
	}
	r, err := NewReplicas(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// A hedge goes to the other replica, and a replica that keeps failing has
// its breaker opened: then it gets no more attempts.
func TestReplicasHedgeElsewhereAndBreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		bad := n.add("bad:1", func(context.Context, *backend, string) (*typepb.Field, error) {
			return nil, status.Error(codes.Unavailable, "down")
		})
		good := n.add("good:1", fast)
		r := newReplicas(t, n, ReplicasConfig{
			Config:  Config{Policy: hedge.Policy{Delay: time.Second}},
			Replica: replica.Config{FailureThreshold: 3, Cooldown: time.Minute},
		}, "bad:1", "good:1")
		for i := range 20 {
			out, err := get(context.Background(), r, "k")
			if err != nil || out.Name != "good:1" {
				t.Fatalf("call %d: %v %v, want good's answer", i, out, err)
			}
		}
		if c := bad.calls.Load(); c != 3 {
			t.Errorf("the failing replica got %d attempts, want 3: its breaker opens at the third failure", c)
		}
		if good.calls.Load() != 20 {
			t.Errorf("good got %d calls, want 20", good.calls.Load())
		}
		snap := r.Set().Snapshot(time.Now())
		if snap[0].Breaker != replica.Open {
			t.Errorf("bad's breaker %v, want open", snap[0].Breaker)
		}
		// Methods not hedged go once, streams too, to an available replica.
		if err := r.Invoke(context.Background(), putMethod, wrapperspb.String("k"), new(typepb.Field)); err != nil {
			t.Error(err)
		}
		st, err := r.NewStream(context.Background(), &echoService.Streams[0], watchMethod)
		if err != nil {
			t.Fatal(err)
		}
		st.SendMsg(wrapperspb.String("k"))
		st.CloseSend()
		for st.RecvMsg(new(typepb.Field)) == nil {
		}
		if good.streams.Load() != 1 || good.calls.Load() != 21 {
			t.Error("Put or the stream did not reach the available replica")
		}
	})
}

// A replica whose latency diverges goes on probation: it gets no
// primaries, and shadow copies of hedged calls measure it, marked.
func TestReplicasProbationShadows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		var slowOn atomic.Bool
		slowOn.Store(true)
		slow := n.add("slow:1", func(ctx context.Context, b *backend, _ string) (*typepb.Field, error) {
			if slowOn.Load() {
				if err := sleep(ctx, 40*time.Millisecond); err != nil {
					return nil, err
				}
			}
			return b.answer(), nil
		})
		n.add("fast:1", func(ctx context.Context, b *backend, _ string) (*typepb.Field, error) {
			return b.answer(), sleep(ctx, time.Millisecond)
		})
		r := newReplicas(t, n, ReplicasConfig{
			Config: Config{Policy: hedge.Policy{Delay: 5 * time.Millisecond, Gate: hedge.Gate{Disabled: true}}},
			// A short decay has the slow replica tried again soon: enough
			// samples to judge it.
			Replica: replica.Config{DecayTime: 20 * time.Millisecond, Probation: replica.Probation{
				Enabled: true, Window: 200 * time.Millisecond, MinSamples: 3, ShadowRate: 100,
			}},
		}, "slow:1", "fast:1")
		deadline := time.Now().Add(5 * time.Second)
		for r.Set().OnProbation() == 0 && time.Now().Before(deadline) {
			if _, err := get(context.Background(), r, "k"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if r.Set().OnProbation() != 1 {
			t.Fatal("the slow replica never went on probation")
		}
		before := slow.calls.Load()
		for range 20 {
			if _, err := get(context.Background(), r, "k"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		synctest.Wait()
		shadows := 0
		for _, md := range slow.metadata()[before:] {
			if len(md.Get(shadowKey)) == 0 || !isHedgeMD(md) {
				t.Errorf("a call to the replica on probation is not a marked shadow: %v", md)
			}
			shadows++
		}
		if shadows == 0 {
			t.Error("no shadow reached the replica on probation")
		}
		// Once it is fast again, its shadows bring it back.
		slowOn.Store(false)
		for r.Set().OnProbation() > 0 && time.Now().Before(deadline.Add(5*time.Second)) {
			get(context.Background(), r, "k")
			time.Sleep(10 * time.Millisecond)
		}
		if r.Set().OnProbation() != 0 {
			t.Error("the replica did not come back from probation")
		}
	})
}

func TestReplicasConfigErrors(t *testing.T) {
	n := newNetwork(t)
	conn := n.direct("a:1")
	for _, tc := range []struct {
		cfg  ReplicasConfig
		want string
	}{
		{ReplicasConfig{Config: Config{Methods: []string{getMethod}}}, "Targets is empty"},
		{ReplicasConfig{Config: Config{Methods: []string{getMethod}}, Targets: []Target{{Name: "a"}}}, "Conn is nil"},
		{ReplicasConfig{Config: Config{Methods: []string{getMethod}}, Targets: []Target{{Name: "a", Conn: conn}, {Name: "a", Conn: conn}}}, "Targets"},
		{ReplicasConfig{Config: Config{Methods: []string{getMethod}}, Targets: []Target{{Name: "a:1", Conn: conn}}, Tied: true}, "at least two"},
		{ReplicasConfig{Config: Config{Methods: []string{getMethod}}, Targets: []Target{{Name: "a", Conn: conn}, {Name: "b:1", Conn: conn}}, Tied: true}, "Targets[0].Name"},
		{ReplicasConfig{Config: Config{Methods: []string{getMethod}}, Targets: []Target{{Name: "a", Conn: conn}}, MaxInFlightShadows: -1}, "MaxInFlightShadows"},
	} {
		_, err := NewReplicas(tc.cfg)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewReplicas: %v, want an ErrInvalid naming %q", err, tc.want)
		}
	}
}
