package gateway

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tailgate-dev/tailgate/hedge"
	"github.com/tailgate-dev/tailgate/internal/target"
	"github.com/tailgate-dev/tailgate/tied"
)

// Route gives the reads it matches settings of their own: a pool of
// backends, a hedge delay, attempts, a timeout, a budget, tied or affinity
// mode, and a name for metrics. A real API mixes kinds of read (a point
// read in a millisecond, a search in twenty): each is learnt as its own
// class anyway (see hedge.Classes), and a route says what an operator
// knows of them, such as a fixed delay or a service of its own. Fields
// left zero take the top-level Config's.
type Route struct {
	// Name names the route in metrics (the route label), logs, the access
	// log and /debug/routes: letters, digits, '.', '_' and '-', at most 64,
	// unique; "default" is the top-level settings'. Required.
	Name string

	// Match says which reads the route takes, with net/http's ServeMux
	// pattern syntax, without a method: "[host]/path". "/search" matches
	// that path alone, "/api/" that path and everything under it,
	// "/items/{id}" one segment, "/files/{path...}" the rest, "/api/{$}"
	// "/api/" alone; a host ("api.example.com/") matches its Host only.
	// Unlike ServeMux, the first route written that matches wins: write
	// the most specific first. Reads no route matches take the top-level
	// settings. Required.
	Match string

	// Methods are the methods the route takes as reads, in upper case.
	// Default GET and HEAD. A read of another method goes on to the next
	// route. A method other than GET and HEAD (POST for a search, say) is
	// the operator's promise that the route's requests of that method only
	// read, so that sending one twice is harmless: their bodies are read
	// whole (within Config.MaxRequestBodyBytes) before the first attempt,
	// and every attempt sends the same bytes. CONNECT is never a read.
	Methods []string

	// GRPC, when set, makes the route a gRPC route, and names the unary
	// methods under Match that are reads: by name ("GetProduct") within
	// the service Match names ("/pkg.Service/"), or in full
	// ("/pkg.Service/GetProduct"). A gRPC route takes the gRPC calls
	// (POST with a Content-Type of application/grpc) that Match matches,
	// and no other request. Each call of a listed method is hedged, each
	// method a class of its own, its request message buffered as a body
	// is and replayed to every attempt; grpc-status decides which answer
	// wins (see docs/gateway.md). Every other call under Match (a stream,
	// a write) is proxied once, unhedged. Match must name a service or one
	// method, without wildcards; Methods must be empty, and Tied unset or
	// false. Listing a method is the operator's promise that it is unary
	// and only reads.
	GRPC []string

	// Backends, when set, are the route's own pool of replicas (a service
	// of its own behind the gateway), with breakers, latency and probation
	// of their own, and a budget of its own (HedgeFraction of the route's
	// reads, the top-level burst). Empty: the top-level Backends, and
	// their budget.
	Backends []string

	// Delay is a fixed hedge delay for the route's reads; Quantile an
	// adaptive delay at that quantile, in (0, 1). Both zero: the top-level
	// Policy's.
	Delay    time.Duration
	Quantile float64

	// MaxAttempts caps attempts per read, the primary included, within
	// [1, 5]. Zero: the top-level Policy's.
	MaxAttempts int

	// Timeout bounds each read of the route, hedges included. Zero: the
	// top-level Timeout.
	Timeout time.Duration

	// HedgeFraction is the budget of the route's own pool (see Backends):
	// hedges it may send per read, in [0, 1]. Zero: the top-level
	// Policy's budget fraction. A route without backends of its own may
	// not set it: a pool's budget bounds the work the pool takes.
	HedgeFraction float64

	// Tied, when non-nil, sends the route's reads as tied requests (true)
	// or hedges them (false), whatever the top-level Tied says (see
	// Config.Tied). A tied route needs at least two backends in its pool.
	Tied *bool

	// AffinityKey, when set, turns on affinity mode for the route's reads,
	// with this key (see Affinity.Key); "none" turns it off for them.
	// Empty: the top-level Affinity's. Affinity's partitions and rebalance
	// interval are the top-level Config's.
	AffinityKey string

	// Class, when set, makes every read of the route one class of the
	// engine's (one latency window, delay and gate). Empty: each read's
	// class is its method and path template (see hedge.DefaultClass).
	Class string
}

// maxRouteName bounds a route's name, which is a metric label.
const maxRouteName = 64

// DefaultRoute is the route name of the reads no route matches: the
// top-level settings'.
const DefaultRoute = "default"

// routeMatch is a Route's Match, compiled.
type routeMatch struct {
	host   string     // "" for any
	segs   []matchSeg // the path's segments
	prefix bool       // the pattern ends in "/": what follows is matched too
	exact  bool       // it ends in "{$}": the path ends with its "/"
}

type matchSeg struct {
	lit  string // the segment, unescaped, when not a wildcard
	wild bool   // {name}: any one segment
	rest bool   // {name...}: the rest of the path
}

// compileMatch parses a Route's Match.
func compileMatch(pattern string) (routeMatch, error) {
	var m routeMatch
	if pattern == "" {
		return m, fmt.Errorf("empty match")
	}
	if strings.ContainsAny(pattern, " \t") {
		return m, fmt.Errorf("match %q: a pattern without a method and without spaces (the route's Methods name its methods)", pattern)
	}
	slash := strings.IndexByte(pattern, '/')
	if slash < 0 {
		return m, fmt.Errorf("match %q: no path (a host alone is written %q)", pattern, pattern+"/")
	}
	m.host, pattern = strings.ToLower(pattern[:slash]), pattern[slash:]
	if m.host != "" && strings.ContainsAny(m.host, "{}") {
		return m, fmt.Errorf("match %q: a host cannot hold a wildcard", m.host+pattern)
	}
	parts := strings.Split(pattern[1:], "/")
	for i, p := range parts {
		last := i == len(parts)-1
		switch {
		case last && p == "":
			m.prefix = true
		case p == "{$}":
			if !last {
				return m, fmt.Errorf("match %q: {$} must end the pattern", pattern)
			}
			m.exact = true
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "...}"):
			if !last {
				return m, fmt.Errorf("match %q: %s must end the pattern", pattern, p)
			}
			if !validWildcard(p[1 : len(p)-4]) {
				return m, fmt.Errorf("match %q: bad wildcard %s", pattern, p)
			}
			m.segs = append(m.segs, matchSeg{rest: true})
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}"):
			if !validWildcard(p[1 : len(p)-1]) {
				return m, fmt.Errorf("match %q: bad wildcard %s", pattern, p)
			}
			m.segs = append(m.segs, matchSeg{wild: true})
		case strings.ContainsAny(p, "{}"):
			return m, fmt.Errorf("match %q: a wildcard must be a whole segment: %s", pattern, p)
		case p == "":
			return m, fmt.Errorf("match %q: an empty segment", pattern)
		default:
			lit, err := url.PathUnescape(p)
			if err != nil {
				return m, fmt.Errorf("match %q: %w", pattern, err)
			}
			m.segs = append(m.segs, matchSeg{lit: lit})
		}
	}
	return m, nil
}

func validWildcard(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// matches reports whether the read of host and escaped path (as sent) is
// the routeMatch's, without allocating. Each segment of the path is
// unescaped on its own, so that "%2F" stays within its segment, as
// ServeMux reads it.
func (m *routeMatch) matches(host, path string) bool {
	if m.host != "" && !strings.EqualFold(stripPort(host), m.host) {
		return false
	}
	if !strings.HasPrefix(path, "/") {
		return false
	}
	rest := path[1:] // what follows the segments matched so far, and their "/"
	for i, s := range m.segs {
		if s.rest {
			return true
		}
		seg, after, more := strings.Cut(rest, "/")
		switch {
		case s.wild && seg == "":
			return false
		case !s.wild && !segmentIs(seg, s.lit):
			return false
		}
		if !more {
			// The path ends with this segment, no slash after it.
			return i == len(m.segs)-1 && !m.prefix && !m.exact
		}
		rest = after
	}
	switch {
	case m.exact:
		return rest == ""
	case m.prefix:
		return true
	}
	return false
}

// segmentIs reports whether the escaped segment seg unescapes to lit,
// without allocating when it holds no escape.
func segmentIs(seg, lit string) bool {
	if !strings.Contains(seg, "%") {
		return seg == lit
	}
	u, err := url.PathUnescape(seg)
	return err == nil && u == lit
}

// stripPort returns host without its port.
func stripPort(host string) string {
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		return host[:i]
	}
	return host
}

// takes reports whether r's method is one of methods (nil: GET and HEAD).
func takes(methods []string, method string) bool {
	if methods == nil {
		return method == http.MethodGet || method == http.MethodHead
	}
	for _, m := range methods {
		if m == method {
			return true
		}
	}
	return false
}

// checkRouteFields checks each Route's fields, as withDefaults checks the
// top-level ones; backends are the top-level backends, by normalised URL.
// A route's own backends must not be another pool's: a replica belongs to
// one pool, with one breaker and one latency.
func (c *Config) checkRouteFields(backends map[string]bool) error {
	names := map[string]bool{DefaultRoute: true}
	owner := map[string]string{}
	for b := range backends {
		owner[b] = DefaultRoute
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: route %s: %s", ErrInvalid, r.Name, fmt.Sprintf(format, args...))
		}
		switch {
		case r.Name == "":
			return fmt.Errorf("%w: route %d has no name", ErrInvalid, i+1)
		case len(r.Name) > maxRouteName || !validRouteName(r.Name):
			return fmt.Errorf("%w: route name %q: letters, digits, '.', '_' and '-', at most %d", ErrInvalid, r.Name, maxRouteName)
		case names[r.Name]:
			return fmt.Errorf("%w: route name %q used twice (%q is the top-level settings')", ErrInvalid, r.Name, DefaultRoute)
		}
		names[r.Name] = true
		if _, err := compileMatch(r.Match); err != nil {
			return bad("%v", err)
		}
		for _, m := range r.Methods {
			if m == "" || strings.ToUpper(m) != m || strings.ContainsAny(m, " \t\r\n/") {
				return bad("method %q: an upper-case HTTP method", m)
			}
			if m == http.MethodConnect {
				return bad("method CONNECT: a tunnel is never a read")
			}
		}
		if len(r.GRPC) > 0 {
			if err := checkGRPCRoute(c, r); err != nil {
				return bad("%v", err)
			}
		}
		for _, b := range r.Backends {
			u, err := target.Parse(b)
			if err != nil {
				return bad("backend %v", err)
			}
			if u.Path != "" {
				return bad("backend %q: must not have a path", b)
			}
			if o, ok := owner[u.String()]; ok {
				return bad("backend %q is already in pool %s: a replica belongs to one pool", b, o)
			}
			owner[u.String()] = r.Name
		}
		switch {
		case r.Delay < 0:
			return bad("negative delay %v", r.Delay)
		case r.Delay > 0 && r.Quantile > 0:
			return bad("both a fixed delay and an adaptive quantile")
		case math.IsNaN(r.Quantile) || r.Quantile < 0 || r.Quantile >= 1:
			return bad("adaptive quantile %v outside (0, 1)", r.Quantile)
		case r.MaxAttempts < 0 || r.MaxAttempts > hedge.MaxAttemptsCap:
			return bad("attempts per request %d outside [1, %d]", r.MaxAttempts, hedge.MaxAttemptsCap)
		case r.Timeout < 0:
			return bad("negative timeout %v", r.Timeout)
		case math.IsNaN(r.HedgeFraction) || r.HedgeFraction < 0 || r.HedgeFraction > 1:
			return bad("hedge fraction %v outside [0, 1]", r.HedgeFraction)
		case r.HedgeFraction > 0 && len(r.Backends) == 0:
			return bad("a hedge fraction needs backends of the route's own: a pool's budget bounds the work the pool takes")
		case len(r.Class) > 128:
			return bad("class longer than 128 bytes")
		}
		pool := len(c.Backends)
		if len(r.Backends) > 0 {
			pool = len(r.Backends)
		}
		tiedRoute := c.Tied
		if r.Tied != nil {
			tiedRoute = *r.Tied
		}
		if tiedRoute {
			switch {
			case pool < 2:
				return bad("tied requests need at least two backends in the route's pool, have %d", pool)
			case r.Delay != 0 || r.Quantile != 0:
				return bad("a hedge delay with tied requests: the second copy goes after TiedDelay")
			case r.MaxAttempts != 0 && r.MaxAttempts != 2:
				return bad("attempts per request %d with tied requests: a tied request is two copies", r.MaxAttempts)
			}
		}
		if r.AffinityKey != "" && r.AffinityKey != "none" {
			if _, err := parseAffinityKey(r.AffinityKey); err != nil {
				return bad("%v", err)
			}
		}
	}
	if c.Tied && len(c.Routes) > 0 && c.TiedDelay == 0 {
		c.TiedDelay = tied.DefaultDelay
	}
	for _, r := range c.Routes {
		if r.Tied != nil && *r.Tied && c.TiedDelay == 0 {
			c.TiedDelay = tied.DefaultDelay
		}
	}
	return nil
}

// validRouteName reports whether s is made of letters, digits, '.', '_'
// and '-'.
func validRouteName(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
