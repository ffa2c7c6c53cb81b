package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/tailgate-dev/tailgate/deadline"
	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/target"
	"github.com/tailgate-dev/tailgate/partition"
	"github.com/tailgate-dev/tailgate/replica"
	"github.com/tailgate-dev/tailgate/tied"
)

// This file: pools and routes in force. A pool is a set of backends (the
// top-level Backends, "default", or a route's own); a route is the
// settings a class of reads takes (the top-level ones, "default", or a
// Route's). Each view holds both, built from the Config by newView. What
// outlives views is kept by name in the Gateway (see lasting): a pool's
// replica set lineage, budget and partition table; a route's classes (its
// Hedgers: latency windows, delays, gates) and, when it has one of its
// own, its budget.

// pool is a set of backends in a view.
type pool struct {
	name     string
	backends []string // as configured
	set      *replica.Set
	// targets are the backends' base URLs, by replica index (shadows);
	// origins the same as scheme://host (tied mode's peer headers);
	// index each backend's replica index (affinity mode's owners).
	targets []*url.URL
	origins []string
	index   map[string]int
	// counts are tailgate_replica_attempts_total's children, by replica
	// index, role and outcome.
	counts []attemptCounters
	keep   *poolKeep
}

// route is a class of reads' settings in a view.
type route struct {
	name    string
	match   routeMatch // zero for the default route
	methods []string   // nil: GET and HEAD
	pool    *pool
	keep    *routeKeep
	class   string // every read one class; "": each read's template
	// transport is the engine over the pool's set, under the route's
	// classes.
	transport *hedge.Transport
	// timeout bounds each read (the engine's); timeoutValue is the
	// primary's Tailgate-Timeout for reads without a shorter deadline
	// (see stamp), formatted once.
	timeout      time.Duration
	timeoutValue []string
	// checkExpected is false when the policy ignores deadlines.
	checkExpected bool
	// fixed is the route's fixed hedge delay (0: adaptive), which a class
	// whose median is above it cannot be helped by.
	fixed time.Duration
	// Tied mode: on, and the engine's delay (TiedDelay, at least 1ns).
	tied      bool
	tiedDelay time.Duration
	// Affinity mode: on when the pool has a table and the route a key.
	affinity    *partition.Table
	affinityKey keySource
	keyOn       bool
	m           *routeMetrics
	// gRPC routes only (grpcproxy.go): the methods that are reads.
	grpc *grpcRoute
	// deadlineHeader carries the time left to the replicas:
	// Tailgate-Timeout, or a gRPC route's Grpc-Timeout.
	deadlineHeader string
	// base sends the route's attempts (the engine's Base), and a gRPC
	// route's calls that pass through: it writes deadlineHeader.
	base http.RoundTripper
}

// poolKeep is what outlives views of a pool: the newest generation of its
// replica set (the next view's is its Next), its budget, and its partition
// table in affinity mode.
type poolKeep struct {
	set    *replica.Set
	budget *hedge.Budget
	table  *partition.Table // nil unless a route of the pool reads by key
}

// routeKeep is what outlives views of a route: its classes, and the budget
// they share (the pool's, or its own in tied mode).
type routeKeep struct {
	classes *hedge.Classes
	budget  *hedge.Budget
	own     bool   // the budget is the route's, not its pool's
	tied    bool   // made for tied reads: a change of mode makes new classes
	window  string // the adaptive window made with, which Update cannot change
}

// lasting is the state kept across views, by pool and route name. It is
// read and written only by New and Reload (under reloadMu); a view holds
// what it needs of it.
type lasting struct {
	pools  map[string]*poolKeep
	routes map[string]*routeKeep
}

// routeSettings are a route's settings with the top-level ones filled in.
type routeSettings struct {
	Route
	backends []string     // its pool's: its own, or the top-level ones
	policy   hedge.Policy // the engine's, before tied mode's changes
	tied     bool
	key      string // affinity key, "" when off
}

// keyed reports whether the route reads by key (affinity mode).
func (r *route) keyed() bool { return r.keyOn }

// settings returns every route's settings, the default route first, with
// what a Route leaves zero taken from c.
func (c Config) settings() []routeSettings {
	key := ""
	if c.Affinity != nil {
		key = c.Affinity.Key
	}
	def := routeSettings{Route: Route{Name: DefaultRoute, Timeout: c.Timeout}, backends: c.Backends, policy: c.Policy, tied: c.Tied, key: key}
	out := []routeSettings{def}
	for _, r := range c.Routes {
		s := routeSettings{Route: r, backends: r.Backends, policy: c.Policy, tied: c.Tied, key: key}
		if len(r.Backends) == 0 {
			s.backends = c.Backends
		}
		if r.Delay > 0 || r.Quantile > 0 {
			s.policy.Delay, s.policy.Adaptive.Quantile = r.Delay, r.Quantile
		}
		if r.MaxAttempts > 0 {
			s.policy.MaxAttempts = r.MaxAttempts
		}
		if r.Timeout == 0 {
			s.Timeout = c.Timeout
		}
		if r.Tied != nil {
			s.tied = *r.Tied
		}
		switch r.AffinityKey {
		case "":
		case "none":
			s.key = ""
		default:
			s.key = r.AffinityKey
		}
		out = append(out, s)
	}
	return out
}

// poolName is the name of the pool a route's reads go to: the route's
// own when it has backends of its own.
func (s routeSettings) poolName() string {
	if len(s.Backends) > 0 {
		return s.Name
	}
	return DefaultRoute
}

// newView builds the view of cfg (defaults filled in) from keep, and
// returns the state that outlives it: keep's where cfg allows, new
// otherwise. It changes nothing of keep, so that a refused reload leaves
// the gateway as it was, except that a kept set's next generation cannot
// be undone: it is made last, once nothing else can fail.
func (g *Gateway) newView(cfg Config, keep lasting, windows map[string]string) (*view, lasting, error) {
	v := &view{cfg: cfg, shadowValue: []string{deadline.Format(cfg.ShadowTimeout)}, pools: map[string]*pool{}}
	next := lasting{pools: map[string]*poolKeep{}, routes: map[string]*routeKeep{}}
	settings := cfg.settings()
	// Pools first: their budgets, which routes share.
	for _, s := range settings {
		name := s.poolName()
		if v.pools[name] != nil {
			continue
		}
		p, k, err := g.newPool(cfg, name, s.backends, keep.pools[name], s)
		if err != nil {
			return nil, keep, err
		}
		v.pools[name], next.pools[name] = p, k
	}
	for _, s := range settings {
		p := v.pools[s.poolName()]
		r, k, err := g.newRoute(cfg, s, p, keep.routes[s.Name], windows[s.Name])
		if err != nil {
			return nil, keep, err
		}
		next.routes[s.Name] = k
		if s.Name == DefaultRoute {
			v.def = r
		} else {
			v.routes = append(v.routes, r)
		}
	}
	// Tables for the pools read by key, kept or made.
	for _, r := range append([]*route{v.def}, v.routes...) {
		if !r.keyed() {
			continue
		}
		k := next.pools[r.pool.name]
		if k.table == nil {
			if old := keep.pools[r.pool.name]; old != nil && old.table != nil {
				k.table = old.table
			} else {
				var err error
				if k.table, err = partition.New(r.pool.backends, affinityPartitions(cfg)); err != nil {
					return nil, keep, fmt.Errorf("%w: affinity: %w", ErrInvalid, err)
				}
			}
		}
		r.affinity = k.table
	}
	return v, next, nil
}

// affinityPartitions returns the partition table's settings.
func affinityPartitions(cfg Config) partition.Config {
	if cfg.Affinity != nil {
		return cfg.Affinity.Partitions
	}
	return partition.Config{}
}

// newPool builds pool name of backends from what was kept of it (nil: a
// new pool), with a budget at the settings of s, the first route to use
// it.
func (g *Gateway) newPool(cfg Config, name string, backends []string, kept *poolKeep, s routeSettings) (*pool, *poolKeep, error) {
	p := &pool{name: name, backends: backends, index: make(map[string]int, len(backends))}
	for i, b := range backends {
		u, err := target.Parse(b)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: backend %w", ErrInvalid, err) // checked in withDefaults: unreachable
		}
		p.targets = append(p.targets, u)
		p.origins = append(p.origins, u.Scheme+"://"+u.Host)
		p.index[b] = i
	}
	fraction, burst := budgetRates(cfg.Policy)
	if name != DefaultRoute && s.HedgeFraction > 0 {
		fraction = s.HedgeFraction
	}
	k := &poolKeep{}
	if kept != nil {
		k.budget = kept.budget
		if err := k.budget.SetRates(fraction, burst); err != nil {
			return nil, nil, fmt.Errorf("%w: route %s: %w", ErrInvalid, s.Name, err)
		}
	} else {
		b, err := hedge.NewBudget(fraction, burst)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: route %s: %w", ErrInvalid, s.Name, err)
		}
		k.budget = b
	}
	var err error
	rc := g.replicaConfig(cfg.Replica)
	if kept != nil {
		// The set's next generation cannot be undone: a reload validates
		// everything before (see reload), and this is the last thing a
		// pool's build can fail on.
		p.set, err = kept.set.Next(backends, rc)
	} else {
		p.set, err = replica.New(backends, rc)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	k.set = p.set
	p.counts = g.metrics.replicaAttempts.counters(backends)
	p.keep = k
	return p, k, nil
}

// budgetRates returns the rates of p's budget, the defaults when it has
// none: a reload reads the rates of the Budget it is given, never the
// Budget itself, which belongs to the gateway's pools.
func budgetRates(p hedge.Policy) (fraction, burst float64) {
	if p.Budget != nil {
		return p.Budget.Fraction(), p.Budget.Burst()
	}
	return hedge.DefaultBudgetFraction, hedge.DefaultBudgetBurst
}

// newRoute builds the route of settings s over pool p from what was kept
// of it (nil: a new route); window is its adaptive window, as
// checkRoutes found it.
func (g *Gateway) newRoute(cfg Config, s routeSettings, p *pool, kept *routeKeep, window string) (*route, *routeKeep, error) {
	r := &route{name: s.Name, methods: s.Methods, pool: p, class: s.Class, tied: s.tied, deadlineHeader: deadline.Header}
	base := g.base
	if len(s.GRPC) > 0 {
		r.grpc = newGRPCRoute(s.Match, s.GRPC)
		r.methods = grpcMethods
		r.deadlineHeader = grpcTimeout
		base = g.h2cBase // gRPC is HTTP/2's alone
	}
	if s.Name != DefaultRoute {
		m, err := compileMatch(s.Match)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: route %s: %w", ErrInvalid, s.Name, err) // checked in withDefaults: unreachable
		}
		r.match = m
	}
	if s.key != "" {
		r.affinityKey, _ = parseAffinityKey(s.key) // checked in withDefaults
		r.keyOn = true
	}
	pol := s.policy
	pol.Timeout = s.Timeout // the engine's own deadline: no extra context per read
	pol.Observer = nil
	k := &routeKeep{budget: p.keep.budget, tied: s.tied}
	if s.tied {
		tiedPolicy(cfg, &pol)
		r.tiedDelay = max(cfg.TiedDelay, time.Nanosecond) // the engine's smallest fixed delay: at once, in effect
		k.own = true
		// Unless Policy.Budget says otherwise, one credit per read, so
		// that every read may be tied, and room to bank the credit of
		// every read in flight: a read earns its credit as it starts and
		// spends it a delay later, and with the default burst a burst of
		// reads would lose theirs to the cap.
		fraction, burst := 1.0, float64(max(hedge.DefaultBudgetBurst, cfg.MaxInFlightRequests))
		if cfg.Policy.Budget != nil {
			fraction, burst = budgetRates(cfg.Policy)
		}
		if kept != nil && kept.tied && kept.own {
			k.budget = kept.budget
			if err := k.budget.SetRates(fraction, burst); err != nil {
				return nil, nil, fmt.Errorf("%w: route %s: %w", ErrInvalid, s.Name, err)
			}
		} else {
			b, err := hedge.NewBudget(fraction, burst)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: route %s: %w", ErrInvalid, s.Name, err)
			}
			k.budget = b
		}
	}
	pol.Budget = k.budget
	k.window = window
	switch {
	case kept != nil && kept.tied == s.tied && kept.budget == k.budget && kept.window == k.window:
		// The classes learnt so far stay: Update keeps their gates'
		// evidence unless the gate's settings change (a nil Gate.Load
		// keeps the pool's), and their latency windows. Checked before
		// any change (see checkRoutes): cannot fail here.
		if err := kept.classes.Update(pol); err != nil {
			return nil, nil, fmt.Errorf("%w: route %s: %w", ErrInvalid, s.Name, err)
		}
		k.classes = kept.classes
	default:
		if pol.Gate.Load == nil {
			pol.Gate.Load = g.poolLoad(p.name) // the limits and breakers: overload the engine cannot see
		}
		pol.Observer = g.metrics.route(s.Name)
		if cfg.Policy.Observer != nil {
			pol.Observer = chainObservers(pol.Observer, cfg.Policy.Observer)
		}
		var err error
		if k.classes, err = hedge.NewClasses(pol); err != nil {
			return nil, nil, fmt.Errorf("%w: route %s: %w", ErrInvalid, s.Name, err)
		}
	}
	p2 := k.classes.Policy()
	r.timeout, r.timeoutValue, r.checkExpected = p2.Timeout, stamp(p2.Timeout), !p2.IgnoreDeadline
	if !s.tied {
		r.fixed = p2.Delay
	}
	var accept func(*http.Response) error // nil: hedge.DefaultAccept, a final status below 500
	if s.tied {
		accept = tied.Accept(nil) // and never an answer dropped for its twin
	}
	if r.grpc != nil {
		accept = grpcAccept // grpc-status decides
	}
	// Each attempt tells its replica how long it has left, as of when it
	// is sent: a hedge launched later claims less than the primary. serve
	// writes the primary's value, stampSlack short of the time left, as it
	// builds the request, so only a request sent more than stampSlack
	// later is copied to be rewritten.
	r.base = &deadline.Transport{Base: base, Slack: stampSlack, Header: r.deadlineHeader}
	var err error
	r.transport, err = hedge.NewTransport(hedge.TransportConfig{
		Base:         r.base,
		Classes:      k.classes,
		Replicas:     p.set,
		MaxBodyBytes: cfg.MaxResponseBytes,
		Accept:       accept,
		SafeMethods:  bodyMethods(r.methods), // the route's promise (see Route.Methods)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	r.keep = k
	r.m = g.metrics.route(s.Name)
	return r, k, nil
}

// bodyMethods returns methods less GET and HEAD: those a route declares
// reads although they carry a body, which the engine is told are safe to
// send twice (nil when none).
func bodyMethods(methods []string) []string {
	var out []string
	for _, m := range methods {
		if m != http.MethodGet && m != http.MethodHead && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}
