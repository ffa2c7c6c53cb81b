package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrEmpty is a resolution's error when the name has no records to give
// (no such name, or none of the type asked): the answer, not a failure to
// get one. The Watcher keeps the last set on it as on a failure.
var ErrEmpty = errors.New("discovery: no records")

// Answer is a resolution's result.
type Answer struct {
	// URLs are the replicas, sorted, without duplicates; never empty.
	URLs []string
	// TTL is the shortest TTL of the records the answer came from, when
	// HasTTL: how long it holds. A TTL of 0 is a real one ("do not
	// cache").
	TTL    time.Duration
	HasTTL bool
}

// Resolver resolves a DNS entry (Kind Host or SRV). An answer with no
// replica is an error wrapping ErrEmpty.
type Resolver interface {
	Resolve(ctx context.Context, s Spec) (Answer, error)
}

// NetResolver resolves through Go's resolver (net.Resolver), so that
// /etc/resolv.conf (servers, search list, ndots, timeouts), /etc/hosts
// and the platform's choice of resolver apply.
type NetResolver struct {
	r      *net.Resolver
	server string // -dns-server, or ""
}

// NewNetResolver returns a NetResolver. With server ("host:port") every
// query goes to that server instead of those of /etc/resolv.conf, through
// Go's own resolver (the rest of resolv.conf still applies); "" leaves the
// choice to the platform.
func NewNetResolver(server string) *NetResolver {
	d := &net.Dialer{}
	r := &net.Resolver{
		// Used whenever Go's resolver is, which on Linux is the rule:
		// the TTLs are read on the way in (see observe).
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			if server != "" {
				address = server
			}
			c, err := d.DialContext(ctx, network, address)
			if err != nil {
				return nil, err
			}
			return observe(ctx, c), nil
		},
	}
	if server != "" {
		r.PreferGo = true // the cgo resolver would ignore Dial, and the server
	}
	return &NetResolver{r: r, server: server}
}

// Resolve looks s up: its A and AAAA records (Host), or its SRV records
// and their targets' A and AAAA records (SRV). A target that has no
// address is left out; one whose lookup fails fails the whole resolution,
// so that a server's hiccup cannot drop a replica.
func (n *NetResolver) Resolve(ctx context.Context, s Spec) (Answer, error) {
	ctx, box := withTTL(ctx)
	var urls []string
	switch s.Kind {
	case Host:
		addrs, err := n.lookup(ctx, s.Name)
		if err != nil {
			return Answer{}, err
		}
		for _, a := range addrs {
			urls = append(urls, s.url(a, ""))
		}
	case SRV:
		_, srvs, err := n.r.LookupSRV(ctx, "", "", s.Name)
		if len(srvs) == 0 {
			return Answer{}, n.lookupErr(s.Name, err)
		}
		// Go returns the records it could parse with an error about the
		// others: the ones we have are still the server's answer.
		for _, srv := range srvs {
			if srv.Target == "." || srv.Target == "" {
				continue // RFC 2782: the service is not offered at this name
			}
			// As returned, rooted ("r1.example."): the search list does
			// not apply to a target.
			addrs, err := n.lookup(ctx, srv.Target)
			if errors.Is(err, ErrEmpty) {
				continue
			}
			if err != nil {
				return Answer{}, fmt.Errorf("SRV target %s: %w", strings.TrimSuffix(srv.Target, "."), err)
			}
			for _, a := range addrs {
				urls = append(urls, s.url(a, strconv.Itoa(int(srv.Port))))
			}
		}
	default:
		return Answer{}, fmt.Errorf("discovery: %q is not a DNS name", s.Raw)
	}
	slices.Sort(urls)
	urls = slices.Compact(urls)
	if len(urls) == 0 {
		return Answer{}, fmt.Errorf("%w: %s", ErrEmpty, s.Name)
	}
	ttl, ok := box.ttl()
	return Answer{URLs: urls, TTL: ttl, HasTTL: ok}, nil
}

// lookup returns name's addresses, without zoned ones (link-local: not a
// replica's).
func (n *NetResolver) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	found, err := n.r.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, n.lookupErr(name, err)
	}
	addrs := found[:0]
	for _, a := range found {
		if a.Zone() == "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrEmpty, name)
	}
	return addrs, nil
}

// lookupErr is err, or ErrEmpty when it says that name has no records.
func (n *NetResolver) lookupErr(name string, err error) error {
	if err == nil || isNotFound(err) {
		return fmt.Errorf("%w: %s", ErrEmpty, name)
	}
	var de *net.DNSError
	if n.server != "" && errors.As(err, &de) {
		// Go names the server of /etc/resolv.conf it meant to ask, not
		// the one Dial asked instead.
		c := *de
		c.Server = n.server
		return &c
	}
	return err
}

func isNotFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}
