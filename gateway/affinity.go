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
)

// This file: affinity mode (Config.Affinity). Each read's key (its path,
// a query parameter or a header) maps to a micro-partition and its owners
// (package partition); the primary is picked among the owners by the
// replica set's usual power of two choices, a hedge among the other
// owners, and a hot key's reads spread over more replicas. A read goes
// elsewhere only when none of its replicas admits an attempt (breaker
// open, on probation, already used): a cold answer beats none. A round of
// rebalancing runs on a goroutine of its own, off the request path.

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

// affinity is affinity mode's state, for the gateway's life.
type affinity struct {
	table *partition.Table
	every time.Duration

	keyless   prometheus.Counter // reads without a key
	fallbacks prometheus.Counter // attempts sent outside their key's replicas

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// newAffinity builds affinity mode's table over backends. The rounds
// start with start.
func newAffinity(a *Affinity, backends []string) (*affinity, error) {
	t, err := partition.New(backends, a.Partitions)
	if err != nil {
		return nil, fmt.Errorf("%w: affinity: %w", ErrInvalid, err)
	}
	return &affinity{
		table: t,
		every: a.RebalanceEvery,
		keyless: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tailgate_affinity_keyless_total",
			Help: "Reads in affinity mode without a key (the query parameter or header absent or empty), routed as without affinity.",
		}),
		fallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tailgate_affinity_fallbacks_total",
			Help: "Attempts (primaries, hedges, retries) in affinity mode sent outside their key's replicas because none of those admitted one (breaker open, on probation, or already tried).",
		}),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}, nil
}

// start runs a rebalancing round every a.every until close.
func (a *affinity) start() {
	go func() {
		defer close(a.done)
		tick := time.NewTicker(a.every)
		defer tick.Stop()
		for {
			select {
			case <-a.stop:
				return
			case now := <-tick.C:
				a.table.RebalanceAt(now)
			}
		}
	}()
}

// close stops the rounds and waits for the goroutine to end.
func (a *affinity) close() {
	a.stopOnce.Do(func() { close(a.stop) })
	<-a.done
}

// affinityRead is one read's affinity: its key, the indices, in the
// read's view, of the replicas its reads go to, and how many of its
// attempts went elsewhere (none of those admitted one).
type affinityRead struct {
	key       string
	among     []int
	fallbacks int
}

// route looks up r's key and its replicas for exchange x, at now (the
// read's arrival). Without a key, x routes as without affinity.
func (a *affinity) route(x *exchange, r *http.Request, now time.Time) {
	key := x.v.affinityKey.of(r)
	if key == "" {
		a.keyless.Inc()
		return
	}
	o := a.table.OwnersAt(key, now)
	ar := &affinityRead{key: key, among: make([]int, 0, len(o.Replicas))}
	for _, name := range o.Replicas {
		// A name the view does not know is a replica a reload is adding
		// or removing as the read arrives: skipped.
		if i, ok := x.v.index[name]; ok {
			ar.among = append(ar.among, i)
		}
	}
	x.aff = ar
}

// record counts x's read, which arrived at now, for its key's partition,
// its replica and the hot-key sketch, once it is decided, and the
// attempts that left the key's replicas.
func (a *affinity) record(x *exchange, now time.Time) {
	if x.aff == nil || !x.started {
		return
	}
	a.fallbacks.Add(float64(x.aff.fallbacks))
	name := ""
	if w := int(x.tally.winner); x.tally.decided && w >= 0 {
		name = x.v.cfg.Backends[x.tally.replica[w]]
	}
	a.table.RecordAt(x.aff.key, name, now)
}

// Partitions returns affinity mode's partition table, or nil when the
// gateway is not in affinity mode. Its membership follows the backends
// (Reload, SetBackends): do not call its SetReplicas.
func (g *Gateway) Partitions() *partition.Table {
	if g.aff == nil {
		return nil
	}
	return g.aff.table
}
