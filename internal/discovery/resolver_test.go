package discovery

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/tailgate-dev/tailgate/internal/dnstest"
)

func startDNS(t *testing.T) *dnstest.Server {
	t.Helper()
	s, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustParse(t *testing.T, raw string) Spec {
	t.Helper()
	s, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func resolve(t *testing.T, r Resolver, raw string) (Answer, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.Resolve(ctx, mustParse(t, raw))
}

// Through Go's resolver, pointed at a real server: every A and AAAA
// record on the entry's port, sorted, with the records' TTL.
func TestResolveHost(t *testing.T) {
	s := startDNS(t)
	r := NewNetResolver(s.Addr)
	s.SetA("replicas.test", 7, "127.0.0.3", "127.0.0.1", "::1")
	a, err := resolve(t, r, "dns+http://replicas.test:8080")
	want := []string{"http://127.0.0.1:8080", "http://127.0.0.3:8080", "http://[::1]:8080"}
	if err != nil || !slices.Equal(a.URLs, want) || a.TTL != 7*time.Second || !a.HasTTL {
		t.Fatalf("got %+v, %v; want %v with TTL 7s", a, err, want)
	}
	if s.Queries("replicas.test", "A") == 0 || s.Queries("replicas.test", "AAAA") == 0 {
		t.Error("the resolver did not ask the server given")
	}
	a, err = resolve(t, r, "dns+https://replicas.test")
	if err != nil || a.URLs[0] != "https://127.0.0.1" {
		t.Errorf("https, default port: %+v, %v", a, err)
	}
}

// SRV: each target's addresses on the record's port; the shortest TTL of
// all the records read; a target without address left out.
func TestResolveSRV(t *testing.T) {
	s := startDNS(t)
	r := NewNetResolver(s.Addr)
	s.SetSRV("_http._tcp.replicas.test", 30, dnstest.SRV{Target: "r1.test", Port: 8081},
		dnstest.SRV{Target: "r2.test", Port: 8082}, dnstest.SRV{Target: "gone.test", Port: 8083})
	s.SetA("r1.test", 60, "127.0.0.1")
	s.SetA("r2.test", 4, "127.0.0.1")
	a, err := resolve(t, r, "dnssrv+http://_http._tcp.replicas.test")
	want := []string{"http://127.0.0.1:8081", "http://127.0.0.1:8082"}
	if err != nil || !slices.Equal(a.URLs, want) || a.TTL != 4*time.Second {
		t.Fatalf("got %+v, %v; want %v with TTL 4s", a, err, want)
	}

	// A truncated UDP answer: the resolver asks again over TCP, and the
	// TTL is read from the stream.
	s.Truncate("_http._tcp.replicas.test", true)
	s.SetA("r2.test", 60, "127.0.0.1")
	s.SetSRV("_http._tcp.replicas.test", 2, dnstest.SRV{Target: "r1.test", Port: 8081}, dnstest.SRV{Target: "r2.test", Port: 8082})
	a, err = resolve(t, r, "dnssrv+http://_http._tcp.replicas.test")
	if err != nil || !slices.Equal(a.URLs, want) || a.TTL != 2*time.Second || !a.HasTTL {
		t.Fatalf("over TCP: %+v, %v; want %v with TTL 2s", a, err, want)
	}

	// A target whose lookup fails fails the resolution: a server's
	// hiccup must not drop a replica.
	s.Fail("r2.test", dns.RcodeServerFailure)
	if a, err := resolve(t, r, "dnssrv+http://_http._tcp.replicas.test"); err == nil || errors.Is(err, ErrEmpty) {
		t.Errorf("target failing: %+v, %v; want a failure, not empty", a, err)
	}
}

// Empty answers (NODATA, NXDOMAIN, SRV targets without addresses) are
// ErrEmpty; SERVFAIL is a failure.
func TestResolveEmptyAndFailed(t *testing.T) {
	s := startDNS(t)
	r := NewNetResolver(s.Addr)
	s.SetA("nodata.test", 5)
	s.SetSRV("_http._tcp.nowhere.test", 5, dnstest.SRV{Target: "none.test", Port: 1})
	s.SetSRV("_http._tcp.dot.test", 5, dnstest.SRV{Target: ".", Port: 1})
	for _, raw := range []string{"dns+http://nodata.test:1", "dns+http://nxdomain.test:1", "dnssrv+http://_http._tcp.nowhere.test",
		"dnssrv+http://_http._tcp.dot.test", "dnssrv+http://_http._tcp.nxdomain.test"} {
		if a, err := resolve(t, r, raw); !errors.Is(err, ErrEmpty) {
			t.Errorf("%s: %+v, %v; want ErrEmpty", raw, a, err)
		}
	}
	s.SetA("fail.test", 5, "127.0.0.1")
	s.Fail("fail.test", dns.RcodeServerFailure)
	if a, err := resolve(t, r, "dns+http://fail.test:1"); err == nil || errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), " on "+s.Addr) {
		t.Errorf("SERVFAIL: %+v, %v; want a failure, not empty, naming the server asked, %s", a, err, s.Addr)
	}
	s.SetSRV("_http._tcp.fail.test", 5, dnstest.SRV{Target: "fail.test", Port: 1})
	s.Fail("_http._tcp.fail.test", dns.RcodeServerFailure)
	if a, err := resolve(t, r, "dnssrv+http://_http._tcp.fail.test"); err == nil || errors.Is(err, ErrEmpty) {
		t.Errorf("SRV SERVFAIL: %+v, %v; want a failure, not empty", a, err)
	}
}

// Without a box in the context (a lookup not Resolve's), the connection is
// the dialler's own.
func TestObserveWithoutBox(t *testing.T) {
	if c := observe(context.Background(), nil); c != nil {
		t.Errorf("observe wrapped a connection with no box: %T", c)
	}
}
