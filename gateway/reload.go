package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/partition"
	"github.com/tailgate-dev/tailgate/replica"
)

// This file: the gateway's configuration in force, and Reload, which
// replaces it while requests are served.
//
// A configuration is an immutable view: the Config, its pools (each a
// replica set of its backends) and routes (each the engine's Transport
// over its pool, under its classes), and what each read needs of them,
// indexed alike. Reload builds the next view and swaps it in with one
// atomic store; each read loads the view once, as it arrives, and uses it
// to the end, so that its picks, the target each index names, its breaker
// tickets and its counters agree, and nothing on the request path takes a
// lock. A read that began before a reload ends under the view it began
// with: a replica the reload removed finishes the attempts it has (and may
// still get a hedge of such a read), and gets no new read. That is the
// drain.
//
// What outlives views (see lasting): each route's classes (latency
// windows, delays and, when their settings stay, overload gates), each
// pool's budget credits and replicas (breakers, latency and probation:
// replica.Set.Next), the limits (atomic maxima), the backend transport
// with its connection pools, the metrics.

// view is one generation of the gateway's configuration.
type view struct {
	cfg    Config           // defaults filled in
	def    *route           // the top-level settings': reads no route matches
	routes []*route         // the Routes, in the order written
	pools  map[string]*pool // by name; "default" is the top-level Backends'
	// shadowValue is the Tailgate-Timeout header of a shadow.
	shadowValue []string
}

// routeOf returns the route that takes r: the first Route whose match and
// methods take it, else the default route.
func (v *view) routeOf(r *http.Request) *route {
	for _, rt := range v.routes {
		if takes(rt.methods, r.Method) && rt.match.matches(r.Host, r.URL.EscapedPath()) && (rt.grpc == nil || isGRPC(r)) {
			return rt
		}
	}
	return v.def
}

// defaultPool is the top-level Backends' pool.
func (v *view) defaultPool() *pool { return v.def.pool }

// ReloadResult says what a Reload changed in the backends.
type ReloadResult struct {
	// Added and Removed are the backends that joined and left, as
	// configured, in the order of the new and the old Backends.
	Added, Removed []string
}

// Reload replaces the gateway's configuration with cfg, as New would build
// it, while requests are served: none is dropped, and each ends under the
// configuration it began with. The state learnt so far is kept where cfg
// allows:
//
//   - Backends: replicas kept keep their breakers, latency and probation;
//     new ones start cold (no latency, so picks try them soon); removed
//     ones drain: the requests that hold them finish, and no request
//     arriving after Reload returns goes to them. Their series in
//     tailgate_replica_attempts_total go at once (an attempt still out
//     when they go is not counted).
//   - Policy: the engine's classes are kept and updated
//     (hedge.Classes.Update): their latency windows and budget credits stay; the budget takes the
//     new fraction and burst (Budget.SetRates, on the gateway's Budget:
//     cfg.Policy.Budget's rates are read, not the Budget itself); the
//     overload gate stays unless its settings change. The Observer and,
//     unless cfg's is set, Gate.Load stay those of New. Adaptive.Window
//     must not change.
//   - The limits (MaxInFlightRequests, MaxInFlightAttempts,
//     MaxInFlightShadows), Timeout, ShadowTimeout, MaxResponseBytes,
//     TrustedHop, Replica and DisableProbation, TiedDelay: from the next
//     request. A lower limit refuses new requests until enough of those in
//     flight have ended.
//   - BackendTLS: a different one (another pointer) is used for the
//     backend connections dialled from then on; those open keep theirs
//     (see Config.BackendTLS).
//
// Tied, BackendProtocol and MaxResponseHeaderBytes shape what New built
// (the backend transport, the series): a cfg that changes them is refused.
// So is one that turns affinity mode on or off or changes its Partitions
// or RebalanceEvery; its Key changes from the next request, and the
// partition table follows the backends (partition.Table.SetReplicas: about
// 1/N of the partitions move for a replica added).
// Base, Logger, AccessLog, AccessLogSample and TracerProvider stay those
// of New: cfg's are not used. The backend connection pool keeps the size New gave it
// (MaxInFlightAttempts idle connections per replica).
//
// The log goes on across reloads: changes of breakers and probation name
// the replica by its backend, whatever index a reload gives it; a replica
// that Reload takes off probation (removed, or probation turned off) is
// logged coming off; a change of readiness that the new backends make is
// logged at once.
//
// Reload fails with an error wrapping ErrInvalid, and changes nothing,
// when cfg is invalid. Calls are serialised, with SetBackends's.
func (g *Gateway) Reload(cfg Config) (ReloadResult, error) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	return g.reload(cfg)
}

// SetBackends replaces the backends with backends, as Reload does with the
// configuration in force and these Backends: whatever else that
// configuration holds (the last Reload's or New's) stays. Discovery calls
// it when a DNS name's records change (see tailgate serve's -backends).
// It fails as Reload does, changing nothing.
func (g *Gateway) SetBackends(backends []string) (ReloadResult, error) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	cfg := g.view.Load().cfg
	cfg.Backends = slices.Clone(backends)
	return g.reload(cfg)
}

// reload is Reload, with reloadMu held.
func (g *Gateway) reload(cfg Config) (ReloadResult, error) {
	var res ReloadResult
	cfg, err := cfg.withDefaults()
	if err != nil {
		return res, err
	}
	old := g.view.Load()
	if err := fixedSince(old.cfg, cfg); err != nil {
		return res, err
	}
	cfg.Base, cfg.Logger = old.cfg.Base, old.cfg.Logger
	cfg.AccessLog, cfg.AccessLogSample = old.cfg.AccessLog, old.cfg.AccessLogSample
	cfg.TracerProvider = old.cfg.TracerProvider
	// Validated in full before anything changes, so that nothing fails
	// once a replica set's next generation, which cannot be undone, is
	// made.
	windows, err := checkRoutes(cfg)
	if err != nil {
		return res, err
	}
	for _, s := range cfg.settings() {
		if k := g.keep.routes[s.Name]; k != nil && k.tied == s.tied && k.window != windows[s.Name] {
			return res, fmt.Errorf("%w: route %s: the adaptive delay's window cannot change on a running gateway", ErrInvalid, s.Name)
		}
	}
	v, keep, err := g.newView(cfg, g.keep, windows)
	if err != nil {
		return res, err // unreachable: everything was checked
	}

	// From here on nothing fails.
	g.keep = keep
	g.requests.max.Store(int64(cfg.MaxInFlightRequests))
	g.attempts.max.Store(int64(cfg.MaxInFlightAttempts))
	g.shadows.slots.max.Store(int64(cfg.MaxInFlightShadows))
	if g.tls != nil {
		g.tls.set(cfg.BackendTLS) // for the connections dialled from now on
	}
	g.metrics.viewChanged(old, v) // before the view: a first tied route's series are there when it counts
	g.view.Store(v)
	g.proveBackends(v)
	for name, p := range v.pools {
		if k := keep.pools[name]; k.table != nil {
			if o := old.pools[name]; o != nil && !slices.Equal(o.backends, p.backends) {
				// Validated with the backends: cannot fail.
				if err := k.table.SetReplicas(p.backends); err != nil {
					g.log.Error("reload: partition table refused the backends", "pool", name, "err", err) // unreachable
				}
			}
		}
	}
	g.affinity.follow(v)
	oldAll, all := old.backends(), v.backends()
	warnMixed(g.log, all, oldAll)
	for _, b := range all {
		if !slices.Contains(oldAll, b) {
			res.Added = append(res.Added, b)
		}
	}
	for _, b := range oldAll {
		if !slices.Contains(all, b) {
			res.Removed = append(res.Removed, b)
			g.metrics.forgetReplica(b)
		}
	}
	g.states.forget(res.Removed)
	for _, p := range old.pools {
		g.leaving.add(p.set, res.Removed, all)
	}
	// Other replicas may make the gateway ready, or unready: a change is
	// logged now rather than when /readyz is next asked.
	g.observeReady(time.Now())
	return res, nil
}

// backends returns every pool's backends, the default pool's first.
func (v *view) backends() []string {
	all := slices.Clone(v.defaultPool().backends)
	for _, rt := range v.routes {
		if rt.pool != v.defaultPool() {
			all = append(all, rt.pool.backends...)
		}
	}
	return all
}

// checkRoutes checks what newView could still refuse in cfg (defaults
// filled in): each route's engine policy and budget, as New and Update
// would check them, with throwaway Hedgers (a reload is rare; each costs
// a latency window). It returns each route's adaptive window, which a
// running route's cannot change.
func checkRoutes(cfg Config) (map[string]string, error) {
	windows := map[string]string{}
	for _, s := range cfg.settings() {
		p := s.policy
		p.Timeout = s.Timeout
		p.Budget, p.Observer, p.Gate.Load = nil, nil, nil
		if s.tied {
			tiedPolicy(cfg, &p)
		}
		h, err := hedge.New(p)
		if err != nil {
			return nil, fmt.Errorf("%w: route %s: %w", ErrInvalid, s.Name, err)
		}
		windows[s.Name] = h.Policy().Adaptive.Window.String()
		fraction, burst := budgetRates(cfg.Policy)
		if s.HedgeFraction > 0 {
			fraction = s.HedgeFraction
		}
		if _, err := hedge.NewBudget(fraction, burst); err != nil {
			return nil, fmt.Errorf("%w: route %s: %w", ErrInvalid, s.Name, err)
		}
		if s.key != "" {
			if _, err := partition.New(s.backends, affinityPartitions(cfg)); err != nil {
				return nil, fmt.Errorf("%w: route %s: affinity: %w", ErrInvalid, s.Name, err)
			}
		}
	}
	return windows, nil
}

// leaving tracks the replicas a Reload removed while their attempts are
// still out, for /debug/replicas to show them draining: without it a
// removed replica would vanish from the admin view at once, while reads
// still wait on it. Each is read through the generation it was removed
// from, which still holds it (replica.Set.Next: a replica left out is
// not stopped), and leaves the list once nothing is in flight on it.
type leaving struct {
	mu   sync.Mutex
	reps []leavingReplica
}

type leavingReplica struct {
	set *replica.Set // the generation it was removed from
	i   int          // its index there
}

// add records the replicas named in removed, members of set; one in
// backends (back in the new set) is no longer leaving.
func (l *leaving) add(set *replica.Set, removed, backends []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reps = slices.DeleteFunc(l.reps, func(r leavingReplica) bool {
		return slices.Contains(backends, r.set.Name(r.i))
	})
	for _, name := range removed {
		if i, ok := set.Index(name); ok {
			l.reps = append(l.reps, leavingReplica{set, i})
		}
	}
}

// draining returns the state at now of the removed replicas that still
// have attempts in flight, and forgets those that have none.
func (l *leaving) draining(now time.Time) []replica.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []replica.State
	kept := l.reps[:0]
	for _, r := range l.reps {
		st := r.set.Snapshot(now)[r.i]
		if st.InFlight > 0 {
			out = append(out, st)
			kept = append(kept, r)
		}
	}
	clear(l.reps[len(kept):]) // let the generations go
	l.reps = kept
	return out
}

// fixedSince returns an error naming what cfg changes of old that cannot
// change on a running gateway, or nil.
func fixedSince(old, cfg Config) error {
	switch {
	case cfg.BackendProtocol != old.BackendProtocol:
		return fmt.Errorf("%w: the backend protocol cannot change on a running gateway", ErrInvalid)
	case cfg.MaxResponseHeaderBytes != old.MaxResponseHeaderBytes:
		return fmt.Errorf("%w: the response header limit cannot change on a running gateway", ErrInvalid)
	case cfg.Affinity != nil && old.Affinity != nil && (cfg.Affinity.Partitions != old.Affinity.Partitions || cfg.Affinity.RebalanceEvery != old.Affinity.RebalanceEvery):
		return fmt.Errorf("%w: affinity mode's partitions and rebalance interval cannot change on a running gateway (its keys can)", ErrInvalid)
	}
	return nil
}

// StartDrain marks the gateway as draining, for good: /readyz answers 503
// from now on, so that load balancers stop sending it requests before its
// listener closes. Nothing else changes: requests are served as before
// until the server is shut down. The caller logs it (tailgate serve does,
// with its drain delay).
func (g *Gateway) StartDrain() { g.draining.Store(true) }
