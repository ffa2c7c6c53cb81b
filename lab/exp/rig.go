package exp

import (
	"net"
	"net/http"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/lab/fixture"
)

// Rig owns what a run starts on loopback (fixtures, transports, clients,
// gateways and the servers in front of them), so that a run's opening is
// a list of starts and one deferred Close: Close stops them in the reverse
// order they started, however far the opening got, and a start that fails
// needs no undoing of its own. Its zero value is ready to use; a step may
// open one of its own for what lives only as long as the step.
type Rig struct {
	closers []func() error
}

// Defer has Close call f, before anything started so far: for what a run
// starts by other means (a cluster of its own).
func (r *Rig) Defer(f func() error) { r.closers = append(r.closers, f) }

// deferFunc is Defer for an f that cannot fail.
func (r *Rig) deferFunc(f func()) { r.Defer(func() error { f(); return nil }) }

// Close stops everything the rig started, the latest first, and returns
// the first error it meets; it goes on past one, so that a fixture that
// fails to settle does not keep the others serving. The rig is empty
// afterwards: a second Close does nothing.
func (r *Rig) Close() error {
	var err error
	for i := len(r.closers) - 1; i >= 0; i-- {
		if cerr := r.closers[i](); err == nil {
			err = cerr
		}
	}
	r.closers = nil
	return err
}

// Start starts a fixture (fixture.Start).
func (r *Rig) Start(cfg fixture.Config) (*fixture.Fixture, error) {
	f, err := fixture.Start(cfg)
	if err != nil {
		return nil, err
	}
	r.Defer(f.Close)
	return f, nil
}

// StartPair starts two fixtures as fixture.StartPair does.
func (r *Rig) StartPair(m fixture.Model, seed uint64) ([]*fixture.Fixture, error) {
	fs, err := fixture.StartPair(m, seed)
	r.own(fs)
	return fs, err
}

// StartShards starts shards × replicas fixtures as fixture.StartShards
// does.
func (r *Rig) StartShards(shards, replicas int, m fixture.Model, seed uint64) ([][]string, []*fixture.Fixture, error) {
	urls, fs, err := fixture.StartShards(shards, replicas, m, seed)
	r.own(fs) // those that started, also when one failed
	return urls, fs, err
}

func (r *Rig) own(fs []*fixture.Fixture) {
	for _, f := range fs {
		r.Defer(f.Close)
	}
}

// Transport returns a new hedging engine's base transport
// (hedge.NewBaseTransport), whose idle connections Close releases. The
// caller may tune it before its first use.
func (r *Rig) Transport() *http.Transport {
	t := hedge.NewBaseTransport()
	r.deferFunc(t.CloseIdleConnections)
	return t
}

// GatewayClient returns a client that reads through a gateway
// (GatewayClient), whose idle connections Close releases.
func (r *Rig) GatewayClient(timeout time.Duration) *http.Client {
	c := GatewayClient(timeout)
	r.deferFunc(c.CloseIdleConnections)
	return c
}

// Gateway starts the real gateway with cfg and serves it on loopback as
// ServeGateway does; it returns the gateway and its base URL. Close stops
// serving, then closes the gateway.
func (r *Rig) Gateway(cfg gateway.Config) (*gateway.Gateway, string, error) {
	g, err := gateway.New(cfg)
	if err != nil {
		return nil, "", err
	}
	r.deferFunc(g.Close)
	url, stop, err := ServeGateway(g)
	if err != nil {
		return nil, "", err
	}
	r.deferFunc(stop)
	// A gateway proves each replica as it starts, a new connection
	// waiting for bytes nobody asked for (docs/gateway.md, "bytes nobody
	// asked for"), and reads that come meanwhile wait with it. A gateway
	// in service gets its traffic once it is ready; the experiments
	// measure it from then on, not its first 50ms.
	time.Sleep(gatewaySettle)
	return g, url, nil
}

// gatewaySettle is how long Gateway waits before it returns: internal/h1's
// settleTimeout, and a little more.
const gatewaySettle = 60 * time.Millisecond

// Serve serves h on a loopback listener and returns its base URL: for a
// server an experiment writes itself, such as a proxy to compare the
// gateway with.
func (r *Rig) Serve(h http.Handler) (string, error) {
	srv := &http.Server{Handler: h}
	url, err := serveLoopback(srv)
	if err != nil {
		return "", err
	}
	r.Defer(srv.Close)
	return url, nil
}

// serveLoopback has srv serve a new loopback listener, and returns its base
// URL.
func serveLoopback(srv interface{ Serve(net.Listener) error }) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), nil
}
