package hedgegrpc

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/typepb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// slowPrimary answers a primary after 50ms and a hedge at once.
func slowPrimary(ctx context.Context, b *backend, _ string) (*typepb.Field, error) {
	if !IsHedge(ctx) {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}
	return b.answer(), nil
}

// sleep waits d or until ctx ends, as a server's work would.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestHedgeWinsOverSlowPrimary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		a, b := n.add("a:1", slowPrimary), n.add("b:1", slowPrimary)
		var got hedge.Receipt
		c := mustClient(t, Config{Policy: hedge.Policy{Delay: 10 * time.Millisecond}, Methods: []string{getMethod}})
		cc := n.conn([]string{"a:1", "b:1"}, interceptor(c))
		start := time.Now()
		out, err := get(context.Background(), cc, "k", OnReceipt(func(r hedge.Receipt) { got = r }))
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Errorf("call took %v, want the hedge delay, 10ms", d)
		}
		if !whole(out) {
			t.Errorf("reply %v is not one server's", out)
		}
		synctest.Wait()
		if got.WinnerAttempt != 1 || got.AttemptsLaunched != 2 {
			t.Errorf("receipt: winner %d of %d attempts, want 1 of 2", got.WinnerAttempt, got.AttemptsLaunched)
		}
		if a.calls.Load()+b.calls.Load() != 2 {
			t.Errorf("servers saw %d+%d calls, want 2", a.calls.Load(), b.calls.Load())
		}
	})
}

func TestHedgeMetadata(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		a, b := n.add("a:1", slowPrimary), n.add("b:1", slowPrimary)
		c := mustClient(t, Config{Policy: hedge.Policy{Delay: 10 * time.Millisecond}, Methods: []string{getMethod}})
		cc := n.conn([]string{"a:1", "b:1"}, interceptor(c))
		if _, err := get(context.Background(), cc, "k"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var primaries, hedges int
		for _, md := range append(a.metadata(), b.metadata()...) {
			prev := md.Get(previousAttemptsKey)
			if isHedgeMD(md) {
				hedges++
				if v := md.Get(hedgeKey); len(v) != 1 || v[0] != "1" || len(prev) != 1 || prev[0] != "1" {
					t.Errorf("hedge carries %s=%q %s=%q, want 1 and 1", hedgeKey, v, previousAttemptsKey, prev)
				}
				continue
			}
			primaries++
			if len(prev) != 0 {
				t.Errorf("primary carries %s=%q, want none", previousAttemptsKey, prev)
			}
		}
		if primaries != 1 || hedges != 1 {
			t.Errorf("servers saw %d primaries and %d hedges, want 1 and 1", primaries, hedges)
		}
	})
}

// A hedge from an earlier hop stays marked: a call made with the context
// of an incoming hedge marks its primary too.
func TestPrimaryKeepsIncomingMark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		a := n.add("a:1", fast)
		c := mustClient(t, Config{Policy: hedge.Policy{Delay: 10 * time.Millisecond}, Methods: []string{getMethod}})
		cc := n.conn([]string{"a:1"}, interceptor(c))
		in := metadata.NewIncomingContext(context.Background(), metadata.Pairs(hedgeKey, "1"))
		if !IsHedge(in) {
			t.Fatal("IsHedge of a context whose incoming call is a hedge is false")
		}
		if _, err := get(in, cc, "k"); err != nil {
			t.Fatal(err)
		}
		if _, err := get(context.Background(), cc, "k"); err != nil {
			t.Fatal(err)
		}
		seen := a.metadata()
		if len(seen) != 2 || !isHedgeMD(seen[0]) || isHedgeMD(seen[1]) {
			t.Errorf("marks seen: %v, want the first call's primary marked and the second's not", seen)
		}
	})
}

func TestNonFatalStatusSendsHedgeAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		unavailablePrimary := func(ctx context.Context, b *backend, _ string) (*typepb.Field, error) {
			if !IsHedge(ctx) {
				return nil, status.Error(codes.Unavailable, "shedding")
			}
			return b.answer(), nil
		}
		n.add("a:1", unavailablePrimary)
		n.add("b:1", unavailablePrimary)
		var got hedge.Receipt
		c := mustClient(t, Config{Policy: hedge.Policy{Delay: time.Second}, Methods: []string{getMethod}})
		cc := n.conn([]string{"a:1", "b:1"}, interceptor(c))
		start := time.Now()
		out, err := get(context.Background(), cc, "k", OnReceipt(func(r hedge.Receipt) { got = r }))
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("call took %v, want no wait for the 1s delay", d)
		}
		if !whole(out) {
			t.Errorf("reply %v is not one server's", out)
		}
		synctest.Wait()
		if len(got.Attempts) != 2 || got.Attempts[1].Trigger != hedge.TriggerFailure || got.WinnerAttempt != 1 {
			t.Errorf("receipt %+v: want the hedge sent on failure to win", got)
		}
	})
}

func TestFatalStatusEndsCall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nonFatal []codes.Code
		code     codes.Code
	}{
		{"NotFound by default", nil, codes.NotFound},
		{"Unavailable when every status is fatal", []codes.Code{}, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newNetwork(t)
				hedgeCancelled := make(chan bool, 1)
				h := func(ctx context.Context, b *backend, _ string) (*typepb.Field, error) {
					if IsHedge(ctx) {
						select {
						case <-time.After(time.Second):
							hedgeCancelled <- false
						case <-ctx.Done():
							hedgeCancelled <- true
						}
						return b.answer(), nil
					}
					if err := sleep(ctx, 20*time.Millisecond); err != nil {
						return nil, err
					}
					return nil, status.Error(tc.code, "the answer")
				}
				n.add("a:1", h)
				n.add("b:1", h)
				c := mustClient(t, Config{Policy: hedge.Policy{Delay: 10 * time.Millisecond}, Methods: []string{getMethod}, NonFatalCodes: tc.nonFatal})
				cc := n.conn([]string{"a:1", "b:1"}, interceptor(c))
				start := time.Now()
				_, err := get(context.Background(), cc, "k")
				if status.Code(err) != tc.code || status.Convert(err).Message() != "the answer" {
					t.Fatalf("error %v, want the primary's status %v as it is", err, tc.code)
				}
				if d := time.Since(start); d != 20*time.Millisecond {
					t.Errorf("call took %v, want 20ms: the fatal status ends it", d)
				}
				if !<-hedgeCancelled {
					t.Error("the hedge was not cancelled")
				}
			})
		})
	}
}

func TestLastStatusWhenNoAttemptWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		h := func(ctx context.Context, b *backend, _ string) (*typepb.Field, error) {
			return nil, status.Error(codes.Unavailable, b.name+" down")
		}
		n.add("a:1", h)
		n.add("b:1", h)
		c := mustClient(t, Config{Policy: hedge.Policy{Delay: time.Second, MaxAttempts: 3}, Methods: []string{getMethod}})
		cc := n.conn([]string{"a:1", "b:1"}, interceptor(c))
		_, err := get(context.Background(), cc, "k")
		if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.HasSuffix(st.Message(), " down") {
			t.Errorf("error %v, want the last attempt's status as it is", err)
		}
	})
}

func TestCallerContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		hang := func(ctx context.Context, b *backend, _ string) (*typepb.Field, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		n.add("a:1", hang)
		c := mustClient(t, Config{Policy: hedge.Policy{Delay: 10 * time.Millisecond}, Methods: []string{getMethod}})
		cc := n.conn([]string{"a:1"}, interceptor(c))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		if _, err := get(ctx, cc, "k"); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("after the deadline: %v, want DeadlineExceeded", err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(5*time.Millisecond, cancel)
		if _, err := get(ctx, cc, "k"); status.Code(err) != codes.Canceled {
			t.Errorf("cancelled: %v, want Canceled", err)
		}
	})
}

// Deadlines are gRPC's own: each attempt carries the time left (the
// server sees it), and no hedge is sent that could not finish in it.
func TestDeadlineSuppressesHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		var left []time.Duration
		var mu sync.Mutex
		h := func(ctx context.Context, b *backend, _ string) (*typepb.Field, error) {
			if dl, ok := ctx.Deadline(); ok {
				mu.Lock()
				left = append(left, time.Until(dl))
				mu.Unlock()
			}
			if IsHedge(ctx) {
				// Hedges fail at once, so that only the primaries'
				// 30ms teach the Hedger how long an attempt takes.
				return nil, status.Error(codes.Unavailable, "no")
			}
			if err := sleep(ctx, 30*time.Millisecond); err != nil {
				return nil, err
			}
			return b.answer(), nil
		}
		n.add("a:1", h)
		c := mustClient(t, Config{Policy: hedge.Policy{Delay: 10 * time.Millisecond, Gate: hedge.Gate{Disabled: true}}, Methods: []string{getMethod}})
		cc := n.conn([]string{"a:1"}, interceptor(c))
		// Teach the Hedger that attempts take 30ms.
		for range 3 {
			if _, err := get(context.Background(), cc, "k"); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second) // past the engine's refresh of the expected latency
		var got hedge.Receipt
		ctx, cancel := context.WithTimeout(context.Background(), 35*time.Millisecond)
		defer cancel()
		if _, err := get(ctx, cc, "k", OnReceipt(func(r hedge.Receipt) { got = r })); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got.HedgesSuppressed.Deadline != 1 || got.AttemptsLaunched != 1 {
			t.Errorf("receipt %+v: want the hedge suppressed for the deadline (25ms left, 30ms expected)", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if n := len(left); n == 0 || left[n-1] <= 0 || left[n-1] > 35*time.Millisecond {
			t.Errorf("the server saw deadlines %v, want the last within 35ms", left)
		}
	})
}

// Header, trailer and peer options get the winner's; OnFinish runs once.
func TestCallOptionsGetTheWinners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		h := func(ctx context.Context, b *backend, key string) (*typepb.Field, error) {
			grpc.SetHeader(ctx, metadata.Pairs("who", b.name))
			grpc.SetTrailer(ctx, metadata.Pairs("who-t", b.name))
			return slowPrimary(ctx, b, key)
		}
		n.add("a:1", h)
		n.add("b:1", h)
		c := mustClient(t, Config{Policy: hedge.Policy{Delay: 10 * time.Millisecond}, Methods: []string{getMethod}})
		cc := n.conn([]string{"a:1", "b:1"}, interceptor(c))
		var header, trailer metadata.MD
		var p peer.Peer
		var finished []error
		out, err := get(context.Background(), cc, "k", grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p),
			grpc.OnFinish(func(err error) { finished = append(finished, err) }))
		if err != nil {
			t.Fatal(err)
		}
		if w := header.Get("who"); len(w) != 1 || w[0] != out.Name {
			t.Errorf("header who=%q, want the winner's %q", w, out.Name)
		}
		if w := trailer.Get("who-t"); len(w) != 1 || w[0] != out.Name {
			t.Errorf("trailer who-t=%q, want the winner's %q", w, out.Name)
		}
		if p.Addr == nil {
			t.Error("peer not set")
		}
		synctest.Wait()
		if len(finished) != 1 || finished[0] != nil {
			t.Errorf("OnFinish called with %v, want once with nil", finished)
		}
	})
}

// Methods not named, and streams, pass through: one attempt, unmarked.
func TestPassThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		a := n.add("a:1", slowPrimary)
		receipts := 0
		c := mustClient(t, Config{
			Policy:    hedge.Policy{Delay: 10 * time.Millisecond},
			Methods:   []string{getMethod},
			OnReceipt: func(string, hedge.Receipt) { receipts++ },
		})
		cc := n.conn([]string{"a:1"}, interceptor(c))
		start := time.Now()
		if err := cc.Invoke(context.Background(), putMethod, wrapperspb.String("k"), new(typepb.Field)); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("Put took %v, want 50ms: not hedged", d)
		}
		s, err := cc.NewStream(context.Background(), &echoService.Streams[0], watchMethod)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMsg(wrapperspb.String("k")); err != nil {
			t.Fatal(err)
		}
		s.CloseSend()
		got := 0
		for {
			if err := s.RecvMsg(new(typepb.Field)); err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				break
			}
			got++
		}
		if got != 3 {
			t.Errorf("stream got %d messages, want 3", got)
		}
		synctest.Wait()
		if a.calls.Load() != 1 || a.streams.Load() != 1 || receipts != 0 {
			t.Errorf("%d unary calls, %d streams, %d receipts; want 1, 1, 0", a.calls.Load(), a.streams.Load(), receipts)
		}
		for _, md := range a.metadata() {
			if isHedgeMD(md) || len(md.Get(previousAttemptsKey)) > 0 {
				t.Errorf("a call passed through carries hedge metadata: %v", md)
			}
		}
	})
}

func TestHedgeablePredicate(t *testing.T) {
	c := mustClient(t, Config{Hedgeable: func(m string) bool { return strings.HasSuffix(m, "/Get") }})
	if c.hedgerFor(getMethod) == nil || c.hedgerFor(putMethod) != nil {
		t.Error("Hedgeable not followed")
	}
	if c.Hedger(getMethod) != c.hedgerFor(getMethod) {
		t.Error("a method's Hedger is not kept")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Methods is empty"},
		{Config{Methods: []string{"Get"}}, `"Get" is not a full method name`},
		{Config{Methods: []string{"/svc/"}}, `"/svc/" is not a full method name`},
		{Config{Methods: []string{getMethod, getMethod}}, "listed twice"},
		{Config{Methods: []string{getMethod}, NonFatalCodes: []codes.Code{codes.OK}}, "NonFatalCodes: OK"},
		{Config{Methods: []string{getMethod}, Policy: hedge.Policy{MaxAttempts: 9}}, "Policy"},
	} {
		_, err := NewClient(tc.cfg)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewClient(%+v) = %v, want an ErrInvalid naming %q", tc.cfg, err, tc.want)
		}
	}
}
