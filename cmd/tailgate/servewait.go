package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/internal/discovery"
)

// This file: a start before the DNS names of -backends have records (the
// gateway's pods of a Deployment started before the replicas', a Service
// with no endpoint ready yet). Exiting would make the pods crash-loop
// until a replica is ready; instead serve binds its listeners, answers
// 503 on both (/healthz 200: the process is alive; /readyz 503 saying
// which name gives nothing and why; /metrics the process's and the
// tailgate_discovery_* series), and resolves the names every -dns-refresh
// until one gives a replica. Then the gateway is built and takes over the
// same listeners, without closing them: a client never finds the port
// closed. SIGHUP while it waits re-reads the configuration, as a reload
// does (a file that would not start is refused; the settings that need a
// restart keep their start values), and resolves the new names at once.

// errHandedOver ends a waiting server's Serve: its listener goes on to the
// gateway's.
var errHandedOver = errors.New("listener handed over to the gateway")

// handoff is a listener that one server serves for a while and then gives
// up without closing it, for another to serve: pause makes Accept return
// errHandedOver (which ends http.Server.Serve) by a deadline in the past,
// so that no connection is taken from the backlog and lost; Close does
// nothing (Serve and Shutdown call it).
type handoff struct {
	*net.TCPListener
	mu     sync.Mutex
	paused bool
}

func (h *handoff) Accept() (net.Conn, error) {
	c, err := h.TCPListener.Accept()
	h.mu.Lock()
	paused := h.paused
	h.mu.Unlock()
	if err != nil && paused {
		return nil, errHandedOver
	}
	return c, err
}

func (h *handoff) Close() error { return nil }

// pause stops the Accept under way, and those to come, without closing
// the socket.
func (h *handoff) pause() {
	h.mu.Lock()
	h.paused = true
	h.mu.Unlock()
	h.TCPListener.SetDeadline(time.Unix(1, 0))
}

// resume returns the socket, for the gateway's server, its deadline
// cleared.
func (h *handoff) resume() net.Listener {
	h.TCPListener.SetDeadline(time.Time{})
	return h.TCPListener
}

// waiting is serve while no replica is known: its servers and listeners.
type waiting struct {
	servers []*http.Server
	lns     []*handoff
	errs    chan error
}

// listenWaiting binds the listeners of f and serves the waiting answers
// on them until handOver.
func listenWaiting(f *serveFlags, r *reloader, logger *slog.Logger) (*waiting, error) {
	wt := &waiting{errs: make(chan error, 2)}
	handlers := []http.Handler{waitingClients(), waitingAdmin(r.disc, f.dnsRefresh)}
	for i, addr := range []string{f.listen, f.admin} {
		if addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			wt.close()
			return nil, err
		}
		h := &handoff{TCPListener: ln.(*net.TCPListener)}
		srv := &http.Server{Handler: handlers[i], ReadHeaderTimeout: 5 * time.Second,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		srv.SetKeepAlivesEnabled(false) // each answer closes: nothing to hand over but the socket
		wt.servers, wt.lns = append(wt.servers, srv), append(wt.lns, h)
		if i == 0 && r.certs != nil {
			// Clients over TLS, as the gateway will serve them.
			srv.TLSConfig = &tls.Config{GetCertificate: r.certs.GetCertificate}
			go func() { wt.errs <- srv.ServeTLS(h, "", "") }()
			continue
		}
		go func() { wt.errs <- srv.Serve(h) }()
	}
	return wt, nil
}

// handOver stops the waiting servers and returns their listeners, still
// open: the client one, and the admin one or nil.
func (wt *waiting) handOver() (client, admin net.Listener) {
	for _, h := range wt.lns {
		h.pause()
	}
	wt.shutdown()
	client = wt.lns[0].resume()
	if len(wt.lns) > 1 {
		admin = wt.lns[1].resume()
	}
	return client, admin
}

// close stops the waiting servers and closes their listeners.
func (wt *waiting) close() {
	for _, h := range wt.lns {
		h.pause()
	}
	wt.shutdown()
	for _, h := range wt.lns {
		h.TCPListener.Close()
	}
}

// shutdown waits for the waiting servers' Serve to return, and for their
// answers under way (a 503 each) to end.
func (wt *waiting) shutdown() {
	for range wt.servers {
		<-wt.errs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range wt.servers {
		if s.Shutdown(ctx) != nil {
			s.Close()
		}
	}
}

// waitingClients answers every client request while no replica is known.
func waitingClients() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "no replica available yet", http.StatusServiceUnavailable)
	})
}

// waitingAdmin is the admin handler while no replica is known.
func waitingAdmin(w *discovery.Watcher, refresh time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(rw, "ok\n") // alive: a liveness probe must not restart a process that waits
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(rw, "no replica yet: waiting for the DNS names of -backends (resolved every %v)\n", refresh)
		for _, s := range w.State() {
			if len(s.Backends) == 0 {
				fmt.Fprintf(rw, "discovery waiting: %s: %s (since %s; %d tries)\n",
					s.Name, s.Problem, s.Since.UTC().Format(time.RFC3339), s.Errors)
			}
		}
	})
	status := func() []gateway.DiscoveryStatus { return discoveryStatus(w) }
	mux.Handle("GET /metrics", promhttp.HandlerFor(processRegistry(gateway.NewDiscoveryCollector(status)), promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(rw http.ResponseWriter, _ *http.Request) {
		http.Error(rw, "starting: no replica yet (see /readyz)", http.StatusServiceUnavailable)
	})
	return mux
}

// awaitBackends serves the waiting answers while the DNS names of cfg's
// Backends give no replica (see the top of this file), and returns the
// gateway once they do, its listeners in r.pre. A nil gateway and error:
// ctx ended first (SIGINT, SIGTERM), and serve ends.
func (r *reloader) awaitBackends(ctx context.Context, cfg gateway.Config, hup chan os.Signal) (*gateway.Gateway, gateway.Config, error) {
	f, logger := r.current(), r.log
	wt, err := listenWaiting(f, r, logger)
	if err != nil {
		return nil, cfg, err
	}
	attrs := []any{"addr", wt.lns[0].Addr().String()}
	if len(wt.lns) > 1 {
		attrs = append(attrs, "admin", wt.lns[1].Addr().String())
	}
	logger.Warn("no replica yet: serving 503, /readyz saying why, until the DNS names of -backends give one",
		append(attrs, "backends", f.backends, "retry", f.dnsRefresh)...)
	// What a reload may not change: the process's, as at start.
	base := cfg
	for {
		var g *gateway.Gateway
		wctx, cancel := context.WithCancel(ctx)
		hupped := make(chan bool, 1)
		go func() {
			select {
			case <-hup:
				cancel()
				hupped <- true
			case <-wctx.Done():
				hupped <- false
			}
		}()
		err := r.disc.Await(wctx, cfg.Backends, buildGateway(&cfg, &g))
		cancel()
		reload := <-hupped
		switch {
		case err == nil:
			if reload {
				select {
				case hup <- syscall.SIGHUP: // for serve's loop, which reloads once serving
				default: // one is there already
				}
			}
			r.pre.client, r.pre.admin = wt.handOver()
			logger.Info("replicas found: serving", "replicas", len(g.Replicas().Snapshot(time.Now())))
			return g, cfg, nil
		case ctx.Err() != nil:
			wt.close()
			logger.Info("stopped before any replica was found")
			return nil, cfg, nil
		case !reload:
			wt.close()
			return nil, cfg, err
		}
		p, err := r.prepare()
		if err != nil {
			logger.Error("reload failed; the running configuration is kept", "trigger", "SIGHUP", "err", err)
			continue
		}
		r.running.Store(p.next)
		r.logRestart("SIGHUP", p.restart)
		cfg = p.cfg
		cfg.Logger, cfg.AccessLog, cfg.AccessLogSample, cfg.TracerProvider = base.Logger, base.AccessLog, base.AccessLogSample, base.TracerProvider
		logger.Info("configuration reloaded while waiting for a replica", "trigger", "SIGHUP", "backends", p.next.backends)
	}
}

// buildGateway returns a watcher's apply that builds the gateway of *cfg
// with the backends given, into *g, and leaves in *cfg the configuration
// it was built with (the backends resolved).
func buildGateway(cfg *gateway.Config, g **gateway.Gateway) func([]string) error {
	return func(backends []string) error {
		c := *cfg
		c.Backends = backends
		var err error
		if *g, err = gateway.New(c); err == nil {
			*cfg = c
		}
		return err
	}
}

// bound are listeners bound before serving started (see awaitBackends),
// for serveReloading to serve rather than bind its own.
type bound struct {
	client, admin net.Listener
}

// listen returns *ln, taking it (it is served once), or else a new
// listener on addr.
func listen(ln *net.Listener, addr string) (net.Listener, error) {
	if l := *ln; l != nil {
		*ln = nil
		return l, nil
	}
	return net.Listen("tcp", addr)
}
