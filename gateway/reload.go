package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/target"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
)

// This file: the gateway's configuration in force, and Reload, which
// replaces it while requests are served.
//
// A configuration is an immutable view: the Config, the replica set of
// its backends, the engine's Transport over them, and what each request
// needs of them, indexed alike. Reload builds the next view and swaps it
// in with one atomic store; each request loads the view once, as it
// arrives, and uses it to the end, so that its picks, the target each
// index names, its breaker tickets and its counters agree, and nothing on
// the request path takes a lock. A request that began before a reload
// ends under the view it began with: a replica the reload removed finishes
// the attempts it has (and may still get a hedge of such a request), and
// gets no new request. That is the drain.
//
// What outlives views: the Hedger (its latency window, budget credits and,
// when its settings stay, the overload gate), the replicas kept (their
// breakers, latency and probation: replica.Set.Next), the limits (atomic
// maxima), the backend transport with its connection pools, the metrics.

// view is one generation of the gateway's configuration.
type view struct {
	cfg       Config // defaults filled in
	set       *replica.Set
	transport *hedge.Transport
	// targets are the backends' base URLs, by replica index (shadows);
	// origins the same as scheme://host (tied mode's peer headers).
	targets []*url.URL
	origins []string
	// counts are tailgate_replica_attempts_total's children, by replica
	// index, role and outcome.
	counts []attemptCounters

	// timeout bounds each request (the engine's); timeoutValue is the
	// primary's Tailgate-Timeout for requests without a shorter deadline
	// (see stamp), formatted once.
	timeout      time.Duration
	timeoutValue []string
	// checkExpected is false when the Policy ignores deadlines.
	checkExpected bool
	// tiedDelay is the engine's delay in tied mode: TiedDelay, at least
	// 1ns.
	tiedDelay time.Duration
	// shadowValue is the Tailgate-Timeout header of a shadow.
	shadowValue []string
	// Affinity mode only: where a read's key is, and each backend's
	// index, by name (the partition table's replica names).
	affinityKey keySource
	index       map[string]int
}

// newView builds the view of cfg (defaults filled in), under policy p (as
// the engine has it) and over set, whose members are cfg.Backends.
func (g *Gateway) newView(cfg Config, p hedge.Policy, set *replica.Set) (*view, error) {
	v := &view{
		cfg: cfg, set: set,
		timeout: p.Timeout, timeoutValue: stamp(p.Timeout), checkExpected: !p.IgnoreDeadline,
		tiedDelay:   max(cfg.TiedDelay, time.Nanosecond), // the engine's smallest fixed delay: at once, in effect
		shadowValue: []string{deadline.Format(cfg.ShadowTimeout)},
		counts:      g.metrics.replicaAttempts.counters(cfg.Backends),
	}
	if cfg.Affinity != nil {
		v.affinityKey, _ = parseAffinityKey(cfg.Affinity.Key) // checked in withDefaults
		v.index = make(map[string]int, len(cfg.Backends))
		for i, b := range cfg.Backends {
			v.index[b] = i
		}
	}
	for _, b := range cfg.Backends {
		u, err := target.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("%w: backend %w", ErrInvalid, err) // checked in withDefaults: unreachable
		}
		v.targets = append(v.targets, u)
		v.origins = append(v.origins, u.Scheme+"://"+u.Host)
	}
	// Each attempt tells its replica how long it has left, as of when it
	// is sent: a hedge launched later claims less than the primary. serve
	// writes the primary's value, stampSlack short of the time left, as
	// it builds the request, so only a request sent more than stampSlack
	// later is copied to be rewritten.
	var accept func(*http.Response) error // nil: hedge.DefaultAccept, a final status below 500
	if cfg.Tied {
		accept = tied.Accept(nil) // and never an answer dropped for its twin
	}
	var err error
	v.transport, err = hedge.NewTransport(hedge.TransportConfig{
		Base:          &deadline.Transport{Base: g.base, Slack: stampSlack},
		Hedger:        g.hedger,
		Targets:       cfg.Backends,
		MaxBodyBytes:  cfg.MaxResponseBytes,
		Accept:        accept,
		InlinePrimary: true, // Base returns at once on cancellation (see Config.Base)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return v, nil
}

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
//   - Policy: the engine's Hedger is kept and updated (hedge.Hedger.Update):
//     its latency window and budget credits stay; the budget takes the
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
	p, err := g.policy(cfg)
	if err != nil {
		return res, err
	}
	fraction, burst := hedge.DefaultBudgetFraction, float64(hedge.DefaultBudgetBurst)
	if p.Budget != nil {
		fraction, burst = p.Budget.Fraction(), p.Budget.Burst()
	}
	// Validated in full before anything changes: a throwaway Hedger (a
	// reload is rare; it costs a latency window) checks the policy as
	// Update would, so that Update cannot fail once the replica set's next
	// generation, which cannot be undone, is made.
	p.Budget, p.Observer = nil, nil
	check, err := hedge.New(p)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if check.Policy().Adaptive.Window != g.hedger.Policy().Adaptive.Window {
		return res, fmt.Errorf("%w: the adaptive delay's window cannot change on a running gateway", ErrInvalid)
	}
	// Through replicaConfig, as New: the next generation reports its
	// changes of state to the gateway's log too.
	set, err := old.set.Next(cfg.Backends, g.replicaConfig(cfg.Replica))
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	v, err := g.newView(cfg, p, set)
	if err != nil {
		return res, err // unreachable: the backends and limits are checked
	}

	// From here on nothing fails.
	g.budget.SetRates(fraction, burst)
	if err := g.hedger.Update(p); err != nil {
		g.log.Error("reload: policy refused after validation", "err", err) // unreachable
	}
	g.requests.max.Store(int64(cfg.MaxInFlightRequests))
	g.attempts.max.Store(int64(cfg.MaxInFlightAttempts))
	g.shadows.slots.max.Store(int64(cfg.MaxInFlightShadows))
	if g.tls != nil {
		g.tls.set(cfg.BackendTLS) // for the connections dialled from now on
	}
	g.view.Store(v)
	if g.aff != nil && !slices.Equal(cfg.Backends, old.cfg.Backends) {
		// Validated with the backends: cannot fail.
		if err := g.aff.table.SetReplicas(cfg.Backends); err != nil {
			g.log.Error("reload: partition table refused the backends", "err", err) // unreachable
		}
	}
	g.metrics.budgetChanged(g.budget)
	warnMixed(g.log, cfg.Backends, old.cfg.Backends)
	for _, b := range cfg.Backends {
		if !slices.Contains(old.cfg.Backends, b) {
			res.Added = append(res.Added, b)
		}
	}
	for _, b := range old.cfg.Backends {
		if !slices.Contains(cfg.Backends, b) {
			res.Removed = append(res.Removed, b)
			g.metrics.replicaAttempts.forget(b)
		}
	}
	g.states.forget(res.Removed)
	g.leaving.add(old.set, res.Removed, cfg.Backends)
	// Other replicas may make the gateway ready, or unready: a change is
	// logged now rather than when /readyz is next asked.
	g.observeReady(time.Now())
	return res, nil
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
	case cfg.Tied != old.Tied:
		return fmt.Errorf("%w: tied mode cannot change on a running gateway", ErrInvalid)
	case cfg.BackendProtocol != old.BackendProtocol:
		return fmt.Errorf("%w: the backend protocol cannot change on a running gateway", ErrInvalid)
	case cfg.MaxResponseHeaderBytes != old.MaxResponseHeaderBytes:
		return fmt.Errorf("%w: the response header limit cannot change on a running gateway", ErrInvalid)
	case (cfg.Affinity == nil) != (old.Affinity == nil):
		return fmt.Errorf("%w: affinity mode cannot be turned on or off on a running gateway", ErrInvalid)
	case cfg.Affinity != nil && (cfg.Affinity.Partitions != old.Affinity.Partitions || cfg.Affinity.RebalanceEvery != old.Affinity.RebalanceEvery):
		return fmt.Errorf("%w: affinity mode's partitions and rebalance interval cannot change on a running gateway (its key can)", ErrInvalid)
	}
	return nil
}

// StartDrain marks the gateway as draining, for good: /readyz answers 503
// from now on, so that load balancers stop sending it requests before its
// listener closes. Nothing else changes: requests are served as before
// until the server is shut down. The caller logs it (tailgate serve does,
// with its drain delay).
func (g *Gateway) StartDrain() { g.draining.Store(true) }
