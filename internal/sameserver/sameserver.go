// Package sameserver finds backends that name one server twice, under
// different spellings, for a warning at start.
package sameserver

import (
	"context"
	"net"
	"net/netip"
	"strconv"

	"github.com/tailgate-dev/tailgate/internal/target"
)

// Pair is two backends that name one server: A and B as
// configured, and Addr, the address (ip:port) both reach.
type Pair struct {
	A, B string
	Addr string
}

// Find finds the backends that name one server twice under
// different spellings, such as http://localhost:8081 and
// http://127.0.0.1:8081: the pairs whose hosts resolve to a common
// address, on the same port. gateway.New refuses duplicates only as spelled,
// since telling these apart takes name lookups, which a constructor
// should not make. They are worth a warning (serve logs one per pair at
// start): a hedge between them lands on the server that was slow, and
// each breaker and latency estimate sees half of the same server.
//
// Names are resolved with r (nil: net.DefaultResolver) until ctx ends; a
// name that does not resolve by then is left out, since this is a
// warning, not a check. Backends that New would refuse are skipped.
func Find(ctx context.Context, r *net.Resolver, backends []string) []Pair {
	if r == nil {
		r = net.DefaultResolver
	}
	type server struct {
		backend string
		port    uint16
		addrs   []netip.Addr
	}
	servers := make([]server, 0, len(backends))
	for _, b := range backends {
		u, err := target.Parse(b)
		if err != nil {
			continue
		}
		port, err := strconv.ParseUint(u.Port(), 10, 16)
		if u.Port() == "" {
			port, err = 80, nil
			if u.Scheme == "https" {
				port = 443
			}
		}
		if err != nil {
			continue
		}
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(u.Hostname()); err == nil {
			addrs = []netip.Addr{a.Unmap()}
		} else if found, err := r.LookupNetIP(ctx, "ip", u.Hostname()); err == nil {
			for _, a := range found {
				addrs = append(addrs, a.Unmap())
			}
		}
		servers = append(servers, server{b, uint16(port), addrs})
	}
	var pairs []Pair
	for i, a := range servers {
		for _, b := range servers[i+1:] {
			if a.port != b.port {
				continue
			}
			if addr, ok := common(a.addrs, b.addrs); ok {
				pairs = append(pairs, Pair{A: a.backend, B: b.backend, Addr: netip.AddrPortFrom(addr, a.port).String()})
			}
		}
	}
	return pairs
}

// common returns an address in both a and b.
func common(a, b []netip.Addr) (netip.Addr, bool) {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return x, true
			}
		}
	}
	return netip.Addr{}, false
}
