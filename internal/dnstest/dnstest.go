// Package dnstest is an authoritative DNS server on 127.0.0.1 for tests,
// over UDP and TCP on one port, built with github.com/miekg/dns: a real
// server speaking the wire protocol, whose records a test changes between
// steps (add, remove, a short TTL, SERVFAIL, an empty answer, a truncated
// UDP answer that sends the client to TCP). Only tests import it, so the
// gateway's binary does not link miekg/dns.
package dnstest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// SRV is one SRV record's target and port.
type SRV struct {
	Target string
	Port   uint16
}

// zone is one name's answer.
type zone struct {
	ttl      uint32
	addrs    []netip.Addr
	srvs     []SRV
	rcode    int  // dns.RcodeSuccess unless failing
	truncate bool // UDP answers carry no records and TC, as a large answer would
}

// Server is a running server. Its methods are safe for concurrent use,
// with each other and with the queries it answers.
type Server struct {
	// Addr is the server's address, host:port, for UDP and TCP alike.
	Addr string

	mu      sync.Mutex
	zones   map[string]*zone // by fully qualified lower-case name
	queries map[string]int   // by name and type: "name. A"

	udp, tcp *dns.Server
	done     chan error
}

// Start starts a server with no records (every name: NXDOMAIN). Close
// stops it.
func Start() (*Server, error) {
	s := &Server{zones: map[string]*zone{}, queries: map[string]int{}, done: make(chan error, 2)}
	// One port for both: the client retries a truncated answer over TCP
	// on the address it asked over UDP.
	var pc net.PacketConn
	var ln net.Listener
	var err error
	for range 20 {
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return nil, err
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close() // that port is taken for TCP: another one
	}
	if err != nil {
		return nil, fmt.Errorf("dnstest: no port free for UDP and TCP: %w", err)
	}
	s.Addr = pc.LocalAddr().String()
	h := dns.HandlerFunc(s.serve)
	var started sync.WaitGroup
	started.Add(2)
	s.udp = &dns.Server{PacketConn: pc, Handler: h, NotifyStartedFunc: started.Done}
	s.tcp = &dns.Server{Listener: ln, Handler: h, NotifyStartedFunc: started.Done}
	go func() { s.done <- s.udp.ActivateAndServe() }()
	go func() { s.done <- s.tcp.ActivateAndServe() }()
	started.Wait() // Shutdown refuses a server not yet started
	return s, nil
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.udp.ShutdownContext(ctx)
	if e := s.tcp.ShutdownContext(ctx); err == nil {
		err = e
	}
	<-s.done
	<-s.done
	return err
}

func (s *Server) set(name string, f func(z *zone)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := dns.CanonicalName(name)
	z := s.zones[n]
	if z == nil {
		z = &zone{ttl: 60}
		s.zones[n] = z
	}
	f(z)
}

// SetA makes name's A and AAAA records addrs (IPv4 and IPv6 addresses),
// with ttl, and its answers successful: an empty addrs is an empty answer
// (NOERROR, no records: NODATA).
func (s *Server) SetA(name string, ttl uint32, addrs ...string) {
	as := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		as[i] = netip.MustParseAddr(a)
	}
	s.set(name, func(z *zone) { z.ttl, z.addrs, z.rcode = ttl, as, dns.RcodeSuccess })
}

// SetSRV makes name's SRV records srvs, with ttl (priority 10, weight 10
// each), and its answers successful: none is an empty answer.
func (s *Server) SetSRV(name string, ttl uint32, srvs ...SRV) {
	s.set(name, func(z *zone) { z.ttl, z.srvs, z.rcode = ttl, srvs, dns.RcodeSuccess })
}

// Fail makes every answer about name carry rcode (dns.RcodeServerFailure,
// ...) until SetA or SetSRV is called again; its records are kept.
func (s *Server) Fail(name string, rcode int) {
	s.set(name, func(z *zone) { z.rcode = rcode })
}

// Truncate makes UDP answers about name empty with the TC bit set, so
// that clients ask again over TCP, which gets the records.
func (s *Server) Truncate(name string, on bool) {
	s.set(name, func(z *zone) { z.truncate = on })
}

// Remove forgets name: NXDOMAIN from now on.
func (s *Server) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.zones, dns.CanonicalName(name))
}

// Queries returns how many queries of type qtype ("A", "AAAA", "SRV")
// about name the server has answered, over UDP and TCP.
func (s *Server) Queries(name, qtype string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[dns.CanonicalName(name)+" "+qtype]
}

func (s *Server) serve(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	_, udp := w.RemoteAddr().(*net.UDPAddr)
	s.mu.Lock()
	s.queries[name+" "+dns.TypeToString[q.Qtype]]++
	z := s.zones[name]
	switch {
	case z == nil:
		m.Rcode = dns.RcodeNameError
	case z.rcode != dns.RcodeSuccess:
		m.Rcode = z.rcode
	case z.truncate && udp:
		m.Truncated = true
	default:
		hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: z.ttl, Rrtype: q.Qtype}
		switch q.Qtype {
		case dns.TypeA, dns.TypeAAAA:
			for _, a := range z.addrs {
				switch {
				case a.Is4() && q.Qtype == dns.TypeA:
					m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
				case a.Is6() && q.Qtype == dns.TypeAAAA:
					m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
				}
			}
		case dns.TypeSRV:
			for _, r := range z.srvs {
				m.Answer = append(m.Answer, &dns.SRV{Hdr: hdr, Priority: 10, Weight: 10, Port: r.Port, Target: dns.Fqdn(r.Target)})
			}
		}
		if len(m.Answer) == 0 {
			// NODATA: the name exists, with nothing of that type. The SOA
			// tells resolvers how long to cache that, as a real zone does.
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: z.ttl, Rrtype: dns.TypeSOA},
				Ns: "ns.test.", Mbox: "hostmaster.test.", Serial: 1, Refresh: 60, Retry: 60, Expire: 60, Minttl: z.ttl}}
		}
	}
	s.mu.Unlock()
	w.WriteMsg(m)
}
