package dnstest

import (
	"context"
	"net"
	"slices"
	"testing"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func exchange(t *testing.T, s *Server, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	m, _, err := c.ExchangeContext(context.Background(), q, s.Addr)
	if err != nil {
		t.Fatalf("%s %s: %v", network, name, err)
	}
	return m
}

// Each step's records are what the server answers, over UDP and TCP.
func TestServerSteps(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	if m := exchange(t, s, "udp", "a.test", dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Errorf("unknown name: rcode %d, want NXDOMAIN", m.Rcode)
	}
	s.SetA("a.test", 7, "127.0.0.1", "127.0.0.2", "::1")
	m := exchange(t, s, "udp", "a.test", dns.TypeA)
	var got []string
	for _, rr := range m.Answer {
		got = append(got, rr.(*dns.A).A.String())
		if rr.Header().Ttl != 7 {
			t.Errorf("ttl %d, want 7", rr.Header().Ttl)
		}
	}
	if !slices.Equal(got, []string{"127.0.0.1", "127.0.0.2"}) {
		t.Errorf("A: %v", got)
	}
	if m := exchange(t, s, "tcp", "a.test", dns.TypeAAAA); len(m.Answer) != 1 || !m.Answer[0].(*dns.AAAA).AAAA.Equal(net.ParseIP("::1")) {
		t.Errorf("AAAA over TCP: %v", m.Answer)
	}
	s.Fail("a.test", dns.RcodeServerFailure)
	if m := exchange(t, s, "udp", "a.test", dns.TypeA); m.Rcode != dns.RcodeServerFailure || len(m.Answer) != 0 {
		t.Errorf("failing: %v", m)
	}
	s.SetA("a.test", 7)
	if m := exchange(t, s, "udp", "a.test", dns.TypeA); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
		t.Errorf("empty: want NODATA with an SOA, got %v", m)
	}
	s.SetSRV("_http._tcp.a.test", 3, SRV{"r1.test", 8081})
	s.Truncate("_http._tcp.a.test", true)
	if m := exchange(t, s, "udp", "_http._tcp.a.test", dns.TypeSRV); !m.Truncated || len(m.Answer) != 0 {
		t.Errorf("truncated over UDP: %v", m)
	}
	if m := exchange(t, s, "tcp", "_http._tcp.a.test", dns.TypeSRV); len(m.Answer) != 1 || m.Answer[0].(*dns.SRV).Port != 8081 {
		t.Errorf("SRV over TCP: %v", m.Answer)
	}
	s.Remove("a.test")
	if m := exchange(t, s, "udp", "a.test", dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Errorf("removed: rcode %d", m.Rcode)
	}
	if n := s.Queries("a.test", "A"); n != 5 {
		t.Errorf("A queries %d, want 5", n)
	}
}
