package gateway

import (
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailgate-dev/tailgate/partition"
	"github.com/tailgate-dev/tailgate/replica"
)

// This file: affinity mode (Config.Affinity). Each read's key (its path,
// a query parameter or a header) maps to a micro-partition and its owners
// (package partition); the primary goes to the partition's home, its
// first owner, whenever the home admits one (replica.RouteHome), so that
// the key is warm in one cache; a hedge goes to another owner, and a hot
// key's reads spread over more replicas by the replica set's usual power
// of two choices, as do the reads of a partition too hot for one home
// (shared over its owners). A read goes elsewhere only when none of its replicas
// admits an attempt (breaker open, on probation, already used): a cold
// answer beats none. A round of rebalancing runs on a goroutine of its
// own, off the request path, and moves homes off replicas above the load
// bound.

// DefaultRebalanceEvery is how often affinity mode's rebalancing round
// runs by default.
const DefaultRebalanceEvery = time.Second

// Affinity configures affinity mode.
type Affinity struct {
	// Key says where a read's key is: "path" (the URL path, decoded),
	// "query:NAME" (the first value of query parameter NAME, decoded) or
	// "header:NAME" (the first value of header NAME). A read without one
	// (the parameter or header absent or empty) is routed as without
	// affinity, and counted in tailgate_affinity_keyless_total. Required;
	// Reload may change it.
	Key string

	// Partitions configures the partition table (package partition): by
	// default 20 partitions per backend New is given, 2 owners each, a
	// load bound of 1.25 × the mean, at most 2 moves a round 5 s apart,
	// and up to 16 hot keys read over 4 replicas. Fixed for the gateway's
	// life: Reload refuses a change.
	Partitions partition.Config

	// RebalanceEvery is how often a rebalancing round runs. Default 1s;
	// negative is an error. Fixed for the gateway's life.
	RebalanceEvery time.Duration
}

// Where a key is.
const (
	keyPath = iota
	keyQuery
	keyHeader
)

// keySource finds a read's key.
type keySource struct {
	kind int
	name string // the query parameter, or the header in canonical form
}

// parseAffinityKey parses Affinity.Key.
func parseAffinityKey(s string) (keySource, error) {
	kind, name, _ := strings.Cut(s, ":")
	switch {
	case s == "path":
		return keySource{kind: keyPath}, nil
	case kind == "query" && name != "" && !strings.ContainsAny(name, "&=#? \t"):
		return keySource{kind: keyQuery, name: name}, nil
	case kind == "header" && validHeaderName(name):
		return keySource{kind: keyHeader, name: textproto.CanonicalMIMEHeaderKey(name)}, nil
	}
	return keySource{}, fmt.Errorf("%w: affinity key %q: want path, query:NAME or header:NAME (NAME a query parameter or header name)", ErrInvalid, s)
}

// CheckAffinityKey returns the error New returns for Affinity.Key key, or
// nil when key is well formed.
func CheckAffinityKey(key string) error {
	_, err := parseAffinityKey(key)
	return err
}

// validHeaderName reports whether s is a header field name (an RFC 9110
// token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// of returns r's key, or "" when it has none.
func (k keySource) of(r *http.Request) string {
	switch k.kind {
	case keyPath:
		return r.URL.Path
	case keyQuery:
		return queryValue(r.URL.RawQuery, k.name)
	}
	if v := r.Header[k.name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// queryValue returns the first value of parameter name in the raw query
// q, decoded, or "" when there is none (or it does not decode). Unlike
// url.ParseQuery it builds no map, and allocates only to decode a value
// that needs it.
func queryValue(q, name string) string {
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "%+") {
			var err error
			if k, err = url.QueryUnescape(k); err != nil {
				continue
			}
		}
		if k != name {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			u, err := url.QueryUnescape(v)
			if err != nil {
				return ""
			}
			return u
		}
		return v
	}
	return ""
}

// String returns the key's source as configured.
func (k keySource) String() string {
	switch k.kind {
	case keyQuery:
		return "query:" + k.name
	case keyHeader:
		return "header:" + k.name
	}
	return "path"
}

// affinityRounds runs the rebalancing rounds of the pools read by key,
// on a goroutine of its own started by the first view that has one (see
// follow), every RebalanceEvery, over the tables of the view in force.
type affinityRounds struct {
	g     *Gateway
	every time.Duration

	keyless   prometheus.Counter // reads without a key
	fallbacks prometheus.Counter // attempts sent outside their key's replicas
	spills    prometheus.Counter // cold keys' primaries sent past a busy home

	mu       sync.Mutex
	started  bool // the rounds' goroutine was started
	closed   bool
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func (a *affinityRounds) init(g *Gateway, cfg Config) {
	a.g = g
	a.every = DefaultRebalanceEvery
	if cfg.Affinity != nil {
		a.every = cfg.Affinity.RebalanceEvery
	}
	a.keyless = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tailgate_affinity_keyless_total",
		Help: "Reads in affinity mode without a key (the query parameter or header absent or empty), routed as without affinity.",
	})
	a.fallbacks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tailgate_affinity_fallbacks_total",
		Help: "Attempts (primaries, hedges, retries) in affinity mode sent outside their key's replicas because none of those admitted one (breaker open, on probation, or already tried).",
	})
	a.spills = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tailgate_affinity_spills_total",
		Help: "Primaries in affinity mode of keys their home was not likely to hold (unread for 15-30 s) sent to another owner because the home was busy; the key's next reads follow them there.",
	})
	a.stop, a.done = make(chan struct{}), make(chan struct{})
}

// follow starts the rounds once v has a table.
func (a *affinityRounds) follow(v *view) {
	if len(v.tables()) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started || a.closed {
		return
	}
	a.started = true
	// Affinity mode's series appear with it.
	a.g.metrics.registry.MustRegister(a.keyless, a.fallbacks, a.spills, partitionCollector{a.g})
	go func() {
		defer close(a.done)
		tick := time.NewTicker(a.every)
		defer tick.Stop()
		for {
			select {
			case <-a.stop:
				return
			case now := <-tick.C:
				for _, t := range a.g.view.Load().tables() {
					t.RebalanceAt(now)
				}
			}
		}
	}()
}

// close stops the rounds and waits for the goroutine to end.
func (a *affinityRounds) close() {
	a.mu.Lock()
	started := a.started
	a.closed = true // none from now on
	a.mu.Unlock()
	a.stopOnce.Do(func() { close(a.stop) })
	if started {
		<-a.done
	}
}

// tables returns the partition tables of v's pools read by key, by pool.
func (v *view) tables() map[string]*partition.Table {
	var ts map[string]*partition.Table
	for _, rt := range append([]*route{v.def}, v.routes...) {
		if rt.affinity != nil {
			if ts == nil {
				ts = map[string]*partition.Table{}
			}
			ts[rt.pool.name] = rt.affinity
		}
	}
	return ts
}

// affinityRead is one read's affinity: its key, the indices, in the
// read's view, of the replicas its reads go to, and how many of its
// attempts went elsewhere (none of those admitted one).
type affinityRead struct {
	key       string
	owners    []string // the key's owners (partition.Owners.Replicas), shared
	among     []int
	fallbacks int
}

// routeByKey looks up r's key and its replicas, at now (the read's
// arrival), and returns them for the read's route (nil: without a key,
// the read routes as without affinity); home says the first is the key's
// home (a key that is not hot, of a partition not shared, whose home the
// view knows), or the owner a recent read of it spilled to
// (partition.Owners.Spilled), and cold that the home is not likely to
// hold it (partition.Owners.Cold).
func (x *exchange) routeByKey(r *http.Request, now time.Time) (among []int, home, cold bool) {
	key := x.rt.affinityKey.of(r)
	if key == "" {
		x.g.affinity.keyless.Inc()
		return nil, false, false
	}
	o := x.rt.affinity.OwnersAt(key, now)
	ar := &affinityRead{key: key, owners: o.Replicas, among: make([]int, 0, len(o.Replicas))}
	homed := !o.Hot && !o.Shared
	for pos := range o.Replicas {
		// The owner a recent read spilled to goes first: its cache holds
		// the key.
		k := pos
		switch {
		case o.Spilled > 0 && k == 0:
			k = o.Spilled
		case o.Spilled > 0 && k == o.Spilled:
			k = 0
		}
		// A name the view does not know is a replica a reload is adding
		// or removing as the read arrives: skipped.
		if i, ok := x.rt.pool.index[o.Replicas[k]]; ok {
			home = home || pos == 0 && homed
			ar.among = append(ar.among, i)
		}
	}
	x.aff = ar
	if len(ar.among) == 0 {
		return nil, false, false
	}
	return ar.among, home, home && o.Cold
}

// keyedRoute returns the Route of a read whose key's replicas are among
// (nil: none), the first its home when home, which spills when busy if
// cold.
func (p *pool) keyedRoute(among []int, home, cold, tied bool) replica.Route {
	switch {
	case cold:
		return p.set.RouteCold(among, tied)
	case home:
		return p.set.RouteHome(among, tied)
	}
	return p.set.Route(among, tied)
}

// recordKey counts x's read, which arrived at now, for its key's
// partition, its replica and the hot-key sketch, once it is decided, and
// the attempts that left the key's replicas.
func (x *exchange) recordKey(now time.Time) {
	if x.aff == nil || !x.started {
		return
	}
	x.g.affinity.fallbacks.Add(float64(x.aff.fallbacks))
	if x.Route.Spilled() {
		x.g.affinity.spills.Inc()
		spilledTo := x.rt.pool.backends[x.Route.Replica(0)]
		for k, name := range x.aff.owners {
			if name == spilledTo {
				x.rt.affinity.SpilledAt(x.aff.key, k, now)
			}
		}
	}
	name := ""
	if w := int(x.tally.winner); x.tally.decided && w >= 0 {
		name = x.rt.pool.backends[x.tally.replica[w]]
	}
	x.rt.affinity.RecordAt(x.aff.key, name, now)
}

// Partitions returns the partition table of the top-level Backends'
// pool, or nil when no read of that pool is read by key. Its membership
// follows the backends (Reload, SetBackends): do not call its
// SetReplicas.
func (g *Gateway) Partitions() *partition.Table {
	return g.view.Load().def.affinity
}
