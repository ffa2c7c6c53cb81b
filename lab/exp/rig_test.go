package exp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/lab/fixture"
)

// listening says whether something accepts connections at base's host.
func listening(t *testing.T, base string) bool {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func TestRigClosesInReverseOrder(t *testing.T) {
	var rig Rig
	var order []string
	var f *fixture.Fixture
	var front string
	// mark records, when Close comes to it, that it was closed and whether
	// the fixture and the gateway were still serving then.
	mark := func(name string) {
		rig.Defer(func() error {
			order = append(order, name)
			if f != nil && listening(t, f.URL()) {
				order = append(order, "fixture up")
			}
			if front != "" && listening(t, front) {
				order = append(order, "gateway up")
			}
			return nil
		})
	}
	mark("first")
	f, err := rig.Start(fixture.Config{Name: "r", Model: fixture.Constant(0)})
	if err != nil {
		t.Fatal(err)
	}
	mark("after fixture")
	if _, front, err = rig.Gateway(gateway.Config{Backends: []string{f.URL()}}); err != nil {
		t.Fatal(err)
	}
	client := rig.GatewayClient(10 * time.Second)
	mark("last")
	if err := Read(context.Background(), client, front+"/item?id=1"); err != nil {
		t.Fatal(err)
	}
	if err := rig.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"last", "fixture up", "gateway up", "after fixture", "fixture up", "first"}
	if !slices.Equal(order, want) {
		t.Errorf("closed in the order %q, want %q", order, want)
	}
}

func TestRigReleasesIdleConnections(t *testing.T) {
	var rig Rig
	var open atomic.Int64
	srv := &http.Server{Handler: valueHandler, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}}
	base, err := serveLoopback(srv)
	if err != nil {
		t.Fatal(err)
	}
	rig.Defer(srv.Close)
	// Close comes here once the clients' transports are done with: the
	// server sees their connections close, soon (not at once).
	released := false
	rig.Defer(func() error {
		deadline := time.Now().Add(5 * time.Second)
		for open.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		released = open.Load() == 0
		return nil
	})
	for _, c := range []*http.Client{{Transport: rig.Transport()}, rig.GatewayClient(10 * time.Second)} {
		if err := Read(context.Background(), c, base+"/item?id=1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := open.Load(); n != 2 {
		t.Fatalf("%d connections open, want one a client", n)
	}
	rig.Close()
	if !released {
		t.Errorf("%d client connections still open after Close", open.Load())
	}
}

var valueHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"value":"x"}`)) })

func TestRigClosesWhatStartedBeforeAFailedStart(t *testing.T) {
	var rig Rig
	f, err := rig.Start(fixture.Config{Name: "r", Model: fixture.Constant(0)})
	if err != nil {
		t.Fatal(err)
	}
	rig.Transport()
	if _, _, err := rig.Gateway(gateway.Config{}); !errors.Is(err, gateway.ErrInvalid) {
		t.Errorf("gateway without backends: %v", err)
	}
	if _, err := rig.Start(fixture.Config{Name: "bad", Addr: "0.0.0.0:0"}); err == nil {
		t.Error("fixture on a public address started")
	}
	if _, _, err := rig.StartShards(2, 2, fixture.Constant(-1), 1); err == nil {
		t.Error("shards with a negative latency started")
	}
	if !listening(t, f.URL()) {
		t.Fatal("fixture stopped before Close")
	}
	if err := rig.Close(); err != nil {
		t.Fatal(err)
	}
	if listening(t, f.URL()) {
		t.Error("fixture still serving after Close")
	}
}

func TestRigStartsFixturesAndServes(t *testing.T) {
	var rig Rig
	pair, err := rig.StartPair(fixture.Constant(0), 1)
	if err != nil {
		t.Fatal(err)
	}
	urls, shards, err := rig.StartShards(2, 1, fixture.Constant(0), 1)
	if err != nil {
		t.Fatal(err)
	}
	front, err := rig.Serve(valueHandler)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: rig.Transport()}
	all := []string{front, urls[0][0], urls[1][0]}
	for _, f := range append(pair, shards...) {
		all = append(all, f.URL())
	}
	for _, u := range all {
		if err := Read(context.Background(), client, u+"/item?id=1"); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	rig.Close()
	for _, u := range all {
		if listening(t, u) {
			t.Errorf("%s still serving after Close", u)
		}
	}
}

func TestRigCloseReturnsFirstErrorOnce(t *testing.T) {
	var rig Rig
	errEarly, errLate := errors.New("early"), errors.New("late")
	calls := 0
	rig.Defer(func() error { calls++; return errEarly })
	rig.Defer(func() error { calls++; return errLate })
	rig.Defer(func() error { calls++; return nil })
	if err := rig.Close(); err != errLate {
		t.Errorf("Close: %v, want the first error it met, %v", err, errLate)
	}
	if err := rig.Close(); err != nil || calls != 3 {
		t.Errorf("second Close: %v after %d calls, want nil after 3", err, calls)
	}
}
