package gateway

import (
	"fmt"
	"io"
	"time"

	"github.com/tailgate-dev/tailgate/internal/discovery"
)

// This file: discovery's side of the gateway. The gateway resolves no
// names: whoever does (tailgate serve's DNS discovery, internal/discovery)
// changes the backends with SetBackends and reports each name's state
// through SetDiscovery, which /readyz, /debug/replicas and the
// tailgate_discovery_* series show.

// SetDiscovery makes state (a discovery Watcher's State) the source of the
// discovered names' state, called as /readyz, /debug/replicas and /metrics
// are served; nil (the default) means no name is discovered. state must be
// safe for concurrent use.
func (g *Gateway) SetDiscovery(state func() []discovery.State) {
	g.discovery.Store(&state)
}

// discovered returns the names' state, or nil.
func (g *Gateway) discovered() []discovery.State {
	if f := g.discovery.Load(); f != nil && *f != nil {
		return (*f)()
	}
	return nil
}

// discoveryView is one discovered name as /debug/replicas shows it.
type discoveryView struct {
	// Name is the name as configured (dns+http://replicas.ns.svc:8080).
	Name string `json:"name"`
	// Backends is its last good set of replicas.
	Backends []string `json:"backends"`
	// Resolved is when it last resolved to replicas; zero: never.
	Resolved time.Time `json:"resolved,omitzero"`
	// Next is when it is resolved again.
	Next time.Time `json:"next,omitzero"`
	// Stale says that its last resolution failed or came back empty:
	// Backends is kept, and may be out of date. Problem says why, Since
	// since when.
	Stale   bool      `json:"stale"`
	Problem string    `json:"problem,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	// Errors counts its failed and empty resolutions.
	Errors uint64 `json:"errors"`
}

func discoveryViews(states []discovery.State) []discoveryView {
	var out []discoveryView
	for _, s := range states {
		out = append(out, discoveryView{Name: s.Name, Backends: s.Backends, Resolved: s.Resolved, Next: s.Next,
			Stale: s.Stale, Problem: s.Problem, Since: s.Since, Errors: s.Errors})
	}
	return out
}

// writeStale writes a line to w for each stale name of states: /readyz's
// body says that the replicas it reports ready with are a set kept from
// before, and why. Readiness itself does not change: the kept replicas
// still serve, and a gateway that turned unready on a DNS outage would
// take a whole fleet out at once.
func writeStale(w io.Writer, states []discovery.State) {
	for _, d := range states {
		if d.Stale {
			fmt.Fprintf(w, "discovery stale: %s: %s (since %s; keeping %d replicas)\n",
				d.Name, d.Problem, d.Since.UTC().Format(time.RFC3339), len(d.Backends))
		}
	}
}
