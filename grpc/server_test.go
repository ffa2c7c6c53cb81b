package hedgegrpc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/tiedwire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/typepb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// blocking answers at once, except that a call with key "block" holds its
// worker until release is closed, and one with key "5ms" takes 5ms.
func blocking(release chan struct{}) handler {
	return func(ctx context.Context, b *backend, key string) (*typepb.Field, error) {
		switch key {
		case "block":
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case "5ms":
			if err := sleep(ctx, 5*time.Millisecond); err != nil {
				return nil, err
			}
		}
		return b.answer(), nil
	}
}

// queued starts a call of key on cc in the background; its error arrives
// on the channel.
func queued(ctx context.Context, cc grpc.ClientConnInterface, key string) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := get(ctx, cc, key)
		done <- err
	}()
	return done
}

func hedgeCtx() context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), hedgeKey, "1")
}

func newTestServer(t testing.TB, cfg ServerConfig) *Server {
	t.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Calls marked as hedges wait behind first copies that arrived after them.
func TestServerHedgePriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		s := newTestServer(t, ServerConfig{Workers: 1})
		release := make(chan struct{})
		a := n.addServer("a:1", blocking(release), s)
		cc := n.direct("a:1")
		block := queued(context.Background(), cc, "block")
		synctest.Wait()
		h := queued(hedgeCtx(), cc, "hedge")
		synctest.Wait()
		f := queued(context.Background(), cc, "first")
		synctest.Wait()
		if st := s.Stats(); st.Queued != 2 || st.Running != 1 {
			t.Fatalf("queued %d, running %d; want 2 and 1", st.Queued, st.Running)
		}
		close(release)
		for _, c := range []chan error{block, h, f} {
			if err := <-c; err != nil {
				t.Fatal(err)
			}
		}
		if got := a.ran(); !slices.Equal(got, []string{"block", "first", "hedge"}) {
			t.Errorf("ran %v, want the first copy before the hedge that queued before it", got)
		}
	})
}

func TestServerRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		s := newTestServer(t, ServerConfig{Workers: 1, QueueLimit: 1})
		release := make(chan struct{})
		a := n.addServer("a:1", blocking(release), s)
		cc := n.direct("a:1")
		block := queued(context.Background(), cc, "block")
		synctest.Wait()
		// A first copy takes the queued hedge's place.
		h := queued(hedgeCtx(), cc, "hedge")
		synctest.Wait()
		f := queued(context.Background(), cc, "first")
		synctest.Wait()
		if err := <-h; status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "queue full") {
			t.Errorf("displaced hedge: %v, want Unavailable, queue full", err)
		}
		// The queue is full of first copies.
		if _, err := get(context.Background(), cc, "late"); status.Code(err) != codes.Unavailable {
			t.Errorf("call at a full queue: %v, want Unavailable", err)
		}
		// A queued call whose deadline passes is not run.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		s2 := newTestServer(t, ServerConfig{Workers: 1})
		release2 := make(chan struct{})
		b := n.addServer("b:1", blocking(release2), s2)
		cb := n.direct("b:1")
		block2 := queued(context.Background(), cb, "block")
		synctest.Wait()
		if _, err := get(ctx, cb, "expires"); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("call whose deadline passed in the queue: %v, want DeadlineExceeded", err)
		}
		// The server's deadline, from grpc-timeout, may be a hair after
		// the client's: let it pass too before the worker is freed.
		time.Sleep(time.Millisecond)
		close(release)
		close(release2)
		for _, c := range []chan error{block, f, block2} {
			if err := <-c; err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if got := a.ran(); !slices.Equal(got, []string{"block", "first"}) {
			t.Errorf("a ran %v", got)
		}
		if got := b.ran(); !slices.Equal(got, []string{"block"}) {
			t.Errorf("b ran %v: the expired call ran", got)
		}
		if st := s.Stats(); st.QueueFull != 1 || st.Displaced != 1 {
			t.Errorf("stats %+v: want 1 refused at a full queue, 1 displaced", st)
		}
	})
}

// Streams are not queued: one is served while the only worker is busy.
func TestServerStreamsPassThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		s := newTestServer(t, ServerConfig{Workers: 1})
		release := make(chan struct{})
		a := n.addServer("a:1", blocking(release), s)
		cc := n.direct("a:1")
		block := queued(context.Background(), cc, "block")
		synctest.Wait()
		st, err := cc.NewStream(context.Background(), &echoService.Streams[0], watchMethod)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(wrapperspb.String("k")); err != nil {
			t.Fatal(err)
		}
		st.CloseSend()
		if err := st.RecvMsg(new(typepb.Field)); err != nil {
			t.Fatalf("stream while the worker is busy: %v", err)
		}
		for st.RecvMsg(new(typepb.Field)) == nil {
		}
		close(release)
		if err := <-block; err != nil {
			t.Fatal(err)
		}
		if a.streams.Load() != 1 {
			t.Error("stream not served")
		}
	})
}

// tiedPair starts two backends that are each other's tied peers, both
// workers held by a "block" call until their release channel is closed.
func tiedPair(t *testing.T, n *network, token string) (servers [2]*Server, backends [2]*backend, releases [2]chan struct{}, blocks [2]chan error) {
	names := [2]string{"127.0.0.1:1", "127.0.0.1:2"}
	for i, name := range names {
		servers[i] = newTestServer(t, ServerConfig{
			Workers: 1, Peers: []string{names[1-i]}, PeerDialOptions: n.dialOptions(), CancelToken: token,
		})
		releases[i] = make(chan struct{})
		backends[i] = n.addServer(name, blocking(releases[i]), servers[i])
	}
	for i, name := range names {
		blocks[i] = queued(context.Background(), n.direct(name), "block")
	}
	synctest.Wait()
	return
}

// A tied call queues a copy on each server; the copy that starts first
// has its twin dropped from the other server's queue, over CancelMethod.
// The client gets the running copy's answer, never the dropped one's.
func TestTiedCallDropsQueuedTwin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		servers, backends, releases, blocks := tiedPair(t, n, "secret")
		r := newReplicas(t, n, ReplicasConfig{Tied: true}, "127.0.0.1:1", "127.0.0.1:2")
		var got hedge.Receipt
		done := make(chan error, 1)
		var out *typepb.Field
		go func() {
			var err error
			// It takes 5ms: the cancel arrives first.
			out, err = get(context.Background(), r, "5ms", OnReceipt(func(x hedge.Receipt) { got = x }))
			done <- err
		}()
		time.Sleep(2 * time.Millisecond) // past the 1ms before the second copy
		synctest.Wait()
		if q := servers[0].Stats().Queued + servers[1].Stats().Queued; q != 2 {
			t.Fatalf("%d copies queued, want 2", q)
		}
		close(releases[0]) // the copy on the first server starts
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if out.Name != "127.0.0.1:1" {
			t.Errorf("answer from %s, want the copy that ran", out.Name)
		}
		synctest.Wait()
		close(releases[1])
		for _, b := range blocks {
			if err := <-b; err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if ran := backends[1].ran(); !slices.Equal(ran, []string{"block"}) {
			t.Errorf("the second server ran %v: the dropped copy ran", ran)
		}
		a, b := servers[0].Stats(), servers[1].Stats()
		if a.CancelsSent != 1 || b.CancelsReceived != 1 || b.DroppedByTwin != 1 {
			t.Errorf("stats: first %+v, second %+v; want one cancel sent, received and dropping the twin", a, b)
		}
		if got.AttemptsLaunched != 2 || got.WinnerTargetName != "127.0.0.1:1" {
			t.Errorf("receipt %+v", got)
		}
		for _, at := range got.Attempts {
			if at.TargetName == "127.0.0.1:2" && (at.Fate != hedge.FateFailed || !errors.Is(errDropped, hedge.ErrNotAnAnswer) || !strings.Contains(at.Error, "not an answer")) {
				t.Errorf("the dropped copy's record: %+v, want failed as not an answer", at)
			}
		}
		for _, md := range backends[0].metadata()[1:] {
			if len(md.Get(tieKey))+len(md.Get(tiePeerKey)) > 0 {
				t.Errorf("the handler saw tie metadata %v", md)
			}
		}
	})
}

func TestCancelMethodRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		s := newTestServer(t, ServerConfig{CancelToken: "secret"})
		n.addServer("a:1", fast, s)
		cc := n.direct("a:1")
		out := new(wrapperspb.StringValue)
		if err := cc.Invoke(context.Background(), CancelMethod, wrapperspb.String("T1"), out); status.Code(err) != codes.PermissionDenied {
			t.Errorf("cancel without the token: %v, want PermissionDenied", err)
		}
		ctx := metadata.AppendToOutgoingContext(context.Background(), tieTokenKey, "secret")
		if err := cc.Invoke(ctx, CancelMethod, wrapperspb.String("bad tie&x=1"), out); status.Code(err) != codes.InvalidArgument {
			t.Errorf("cancel of a malformed tie: %v, want InvalidArgument", err)
		}
		if err := cc.Invoke(ctx, CancelMethod, wrapperspb.String("T1"), out); err != nil || out.Value != tiedwire.CancelRemembered {
			t.Errorf("cancel: %v %q, want %q", err, out.Value, tiedwire.CancelRemembered)
		}
		// The tie remembered, its copy is dropped on arrival.
		tctx := metadata.AppendToOutgoingContext(context.Background(), tieKey, "T1", tiePeerKey, "127.0.0.1:9")
		s2 := newTestServer(t, ServerConfig{Peers: []string{"127.0.0.1:9"}, PeerDialOptions: n.dialOptions()})
		b2 := n.addServer("b:1", fast, s2)
		c2 := n.direct("b:1")
		if err := c2.Invoke(ctx, CancelMethod, wrapperspb.String("T1"), out); err != nil {
			t.Fatal(err)
		}
		_, err := get(tctx, c2, "k")
		if !Dropped(err) {
			t.Errorf("copy whose cancel came first: %v, want a dropped answer", err)
		}
		if Dropped(status.Error(codes.Unavailable, "x")) || Dropped(nil) {
			t.Error("Dropped is true of other errors")
		}
		if len(b2.ran()) != 0 {
			t.Error("the dropped copy ran")
		}
	})
}

func TestServerConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{Peers: []string{"nohost"}}, `Peers[0]: "nohost" is not a host:port`},
		{ServerConfig{Peers: []string{"h:1", "H:1"}, PeerDialOptions: nil}, "no transport security"},
		{ServerConfig{Peers: []string{"h:0"}}, "Peers[0]"},
		{ServerConfig{Workers: -1}, "negative workers"},
	} {
		_, err := NewServer(tc.cfg)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewServer(%+v) = %v, want an ErrInvalid naming %q", tc.cfg, err, tc.want)
		}
	}
}
