package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/hedge"
	"gopkg.in/yaml.v3"
)

// This file: the routes of a -config file, which only a file gives (a
// flag has no room for a list of settings):
//
//	routes:
//	  - name: search               # metrics' route label; required
//	    match: /search              # ServeMux pattern syntax, no method; the first route that matches wins
//	    methods: [GET]              # default GET and HEAD
//	    backends: [http://127.0.0.1:8083, http://127.0.0.1:8084]   # a pool of its own
//	    hedge-delay: 30ms           # or auto, or p90
//	    attempts-per-request: 2
//	    timeout: 2s
//	    hedge-fraction: 0.05        # its pool's budget: needs its own backends
//	    tied: false
//	    affinity-key: query:key     # or none
//	    class: search               # every read of the route one class
//
// Keys are spelt as the flags that set the same thing for the reads no
// route takes. A reload applies the routes with everything else, at once
// or not at all (gateway.Reload).

// routeKeys are the keys a route may have, for error messages.
var routeKeys = []string{"name", "match", "methods", "backends", "hedge-delay", "attempts-per-request", "timeout", "hedge-fraction", "tied", "affinity-key", "class"}

// parseRoutes reads the routes list v of the file at path into fc.
func parseRoutes(path string, v *yaml.Node, fc *fileConfig) error {
	if v.Kind != yaml.SequenceNode {
		return fmt.Errorf("%s:%d: routes: want a list of routes, each a mapping with a name and a match", path, v.Line)
	}
	first := map[string]int{} // name -> the line of its first route
	for i, item := range v.Content {
		at := fmt.Sprintf("%s:%d", path, item.Line)
		if item.Kind != yaml.MappingNode {
			return fmt.Errorf("%s: routes: item %d: want a mapping such as {name: search, match: /search}", at, i+1)
		}
		r, err := parseRoute(path, item)
		if err != nil {
			return err
		}
		if r.Name == "" {
			return fmt.Errorf("%s: routes: item %d has no name", at, i+1)
		}
		if line, dup := first[r.Name]; dup {
			return fmt.Errorf("%s: routes: %q given twice (first on line %d)", at, r.Name, line)
		}
		first[r.Name] = item.Line
		fc.routes = append(fc.routes, r)
		fc.routeLines[r.Name] = at
	}
	return nil
}

// parseRoute reads one route's mapping.
func parseRoute(path string, m *yaml.Node) (gateway.Route, error) {
	var r gateway.Route
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		at := fmt.Sprintf("%s:%d", path, v.Line)
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s: routes: %s: %s", at, k.Value, fmt.Sprintf(format, args...))
		}
		if seen[k.Value] {
			return r, fmt.Errorf("%s:%d: routes: %q given twice", path, k.Line, k.Value)
		}
		seen[k.Value] = true
		value, err := flagValue(v)
		if err != nil {
			return r, bad("%v", err)
		}
		switch k.Value {
		case "name":
			r.Name = value
		case "match":
			r.Match = value
		case "methods":
			r.Methods = splitList(value)
		case "backends":
			r.Backends = splitList(value)
			for _, b := range r.Backends {
				if strings.HasPrefix(b, "dns") {
					return r, bad("%q: a route's backends are addresses (DNS discovery applies to -backends)", b)
				}
			}
		case "hedge-delay":
			fixed, q, err := hedge.ParseDelay(value)
			if err != nil {
				return r, bad("%v", err)
			}
			r.Delay, r.Quantile = fixed, q
		case "attempts-per-request":
			n, err := strconv.Atoi(value)
			if err != nil {
				return r, bad("invalid value %q: want a whole number", value)
			}
			r.MaxAttempts = n
		case "timeout":
			d, err := time.ParseDuration(value)
			if err != nil {
				return r, bad("invalid value %q: want a duration such as 5s or 250ms", value)
			}
			r.Timeout = d
		case "hedge-fraction":
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return r, bad("invalid value %q: want a number within [0, 1]", value)
			}
			r.HedgeFraction = f
		case "tied":
			b, err := strconv.ParseBool(value)
			if err != nil {
				return r, bad("invalid value %q: want true or false", value)
			}
			r.Tied = &b
		case "affinity-key":
			r.AffinityKey = value
		case "class":
			r.Class = value
		default:
			return r, fmt.Errorf("%s:%d: routes: unknown key %q (a route takes %s)", path, k.Line, k.Value, strings.Join(routeKeys, ", "))
		}
	}
	return r, nil
}
