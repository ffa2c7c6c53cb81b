package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/internal/discovery"
)

// This file: backends from DNS. -backends may name DNS entries
// (dns+http://name:port, dnssrv+http://_svc._tcp.name) beside static
// URLs; a discovery.Watcher resolves them at start, on each reload (which
// re-reads the entries, and resolves them all afresh), and every
// -dns-refresh between, and a change of the replicas they give reaches the
// gateway as a reload of its backends alone (gateway.SetBackends): kept
// replicas keep their state, new ones start cold, removed ones drain, and
// the budget and the overload gate are untouched. The watcher takes its
// turns: a reload and a refresh never interleave.

const dnsFlagsHelp = `; DNS entries are re-resolved every -dns-refresh: dns+http://name:port (each A/AAAA record a replica on that port), dnssrv+http://_service._tcp.name (each SRV record's target addresses, on its port); dns+https and dnssrv+https for https replicas`

// registerDNS defines the discovery flags on fs.
func (f *serveFlags) registerDNS(fs *flag.FlagSet) {
	fs.DurationVar(&f.dnsRefresh, "dns-refresh", discovery.DefaultRefresh, "how often the DNS entries of -backends are resolved again; sooner when their records' TTL is shorter (at least 1s apart), when the TTL can be read (Go's resolver: always with -dns-server, and as a rule on Linux)")
	fs.StringVar(&f.dnsServer, "dns-server", "", `DNS server (host:port) for the DNS entries of -backends, instead of those of /etc/resolv.conf ("": the system's resolver)`)
}

// checkDNS checks the discovery flags and the DNS entries of backends.
func (f *serveFlags) checkDNS(backends []string) error {
	if f.dnsRefresh <= 0 {
		return fmt.Errorf("-dns-refresh %v must be positive", f.dnsRefresh)
	}
	if f.dnsServer != "" {
		if _, _, err := net.SplitHostPort(f.dnsServer); err != nil {
			return fmt.Errorf("-dns-server %q: want host:port, such as 127.0.0.1:53", f.dnsServer)
		}
	}
	if _, err := discovery.ParseAll(backends); err != nil {
		return fmt.Errorf("-backends: %w", err)
	}
	return nil
}

// newWatcher returns the watcher of f's DNS settings.
func newWatcher(f *serveFlags, logger *slog.Logger) *discovery.Watcher {
	return discovery.New(discovery.Config{
		Resolver: discovery.NewNetResolver(f.dnsServer),
		Refresh:  f.dnsRefresh,
		Logger:   logger,
	})
}

// newGateway builds the gateway of cfg, whose Backends may hold DNS
// entries, with w resolving them: the gateway starts with the replicas
// they give now, and reports w's state (/readyz, /debug/replicas, the
// tailgate_discovery_* series). A name that does not resolve yet gives
// none, and is logged; no replica at all is an error (wrapping
// discovery.ErrNoBackends): the gateway needs one, and serve waits for it
// (servewait.go).
func newGateway(ctx context.Context, w *discovery.Watcher, cfg gateway.Config) (*gateway.Gateway, gateway.Config, error) {
	var g *gateway.Gateway
	if err := w.Set(ctx, cfg.Backends, buildGateway(&cfg, &g)); err != nil {
		return nil, cfg, err
	}
	reportDiscovery(g, w)
	return g, cfg, nil
}

// reportDiscovery makes w's names the gateway's to report (/readyz,
// /debug/replicas, the tailgate_discovery_* series).
func reportDiscovery(g *gateway.Gateway, w *discovery.Watcher) {
	g.SetDiscovery(func() []gateway.DiscoveryStatus { return discoveryStatus(w) })
}

func discoveryStatus(w *discovery.Watcher) []gateway.DiscoveryStatus {
	st := w.State()
	out := make([]gateway.DiscoveryStatus, len(st))
	for i, s := range st {
		out[i] = gateway.DiscoveryStatus{Name: s.Name, Backends: s.Backends, Resolved: s.Resolved, Next: s.Next,
			Stale: s.Stale, Problem: s.Problem, Since: s.Since, Errors: s.Errors}
	}
	return out
}

// reloadBackends applies cfg, whose Backends may hold DNS entries, to the
// gateway: through the watcher when there is one (the entries resolved
// afresh), as it is otherwise.
func (r *reloader) reloadBackends(cfg gateway.Config) (gateway.ReloadResult, error) {
	if r.disc == nil {
		return r.g.Reload(cfg)
	}
	var res gateway.ReloadResult
	ctx, cancel := context.WithTimeout(context.Background(), discovery.DefaultTimeout+time.Second)
	defer cancel()
	err := r.disc.Set(ctx, cfg.Backends, func(backends []string) error {
		c := cfg
		c.Backends = backends
		var err error
		res, err = r.g.Reload(c)
		return err
	})
	if errors.Is(err, discovery.ErrNoBackends) {
		err = fmt.Errorf("%w: %w", errBadConfig, err)
	}
	return res, err
}

// runDiscovery re-resolves the DNS entries until ctx ends, applying each
// change of the replicas to the gateway.
func (r *reloader) runDiscovery(ctx context.Context) {
	r.disc.Run(ctx, func(backends []string) error {
		res, err := r.g.SetBackends(backends)
		if err == nil && len(res.Added) > 0 {
			// As at start and on a reload (the watcher has logged the
			// change itself).
			warnSameServer(ctx, r.log, backends, res.Added)
		}
		return err
	})
}
