package discovery

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
	}{
		{"http://127.0.0.1:8081", Spec{Raw: "http://127.0.0.1:8081", Kind: Static}},
		{"dns+http://Replicas.NS.svc:8080", Spec{Kind: Host, Scheme: "http", Name: "replicas.ns.svc", Port: "8080"}},
		{"dns+https://replicas.ns.svc", Spec{Kind: Host, Scheme: "https", Name: "replicas.ns.svc"}},
		{"dns+http://replicas.test.:80/", Spec{Kind: Host, Scheme: "http", Name: "replicas.test.", Port: "80"}},
		{"dnssrv+http://_http._tcp.replicas.ns.svc", Spec{Kind: SRV, Scheme: "http", Name: "_http._tcp.replicas.ns.svc"}},
		{"DNSSRV+https://_https._tcp.r", Spec{Kind: SRV, Scheme: "https", Name: "_https._tcp.r"}},
	} {
		got, err := Parse(tc.in)
		if tc.want.Raw == "" {
			tc.want.Raw = tc.in
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for in, want := range map[string]string{
		"dns+ftp://a:1":                   "want dns+http://name:port",
		"dns+a:1":                         "want dns+http://name:port",
		"dns+http://:8080":                "no name",
		"dns+http://a:0":                  "out of range",
		"dns+http://a:99999":              "out of range",
		"dns+http://u:s3cret@a:1":         "user information",
		"dns+http://a:1/prefix":           "path",
		"dns+http://a:1?x=1":              "query",
		"dnssrv+http://_http._tcp.a:8080": "no port with dnssrv+",
		"dnssrv+http://_http._tcp.a:":     "no port with dnssrv+",
		"dnssrv+http://127.0.0.1":         "not an address",
		"dnssrv+tcp://_http._tcp.a":       "want dnssrv+http://",
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q) = %v; want an error with %q", in, err, want)
		}
	}
}

func TestSpecURL(t *testing.T) {
	for _, tc := range []struct {
		s    Spec
		addr string
		port string
		want string
	}{
		{Spec{Scheme: "http", Port: "8080"}, "127.0.0.2", "", "http://127.0.0.2:8080"},
		{Spec{Scheme: "http"}, "127.0.0.2", "", "http://127.0.0.2"},
		{Spec{Scheme: "http", Port: "80"}, "127.0.0.2", "", "http://127.0.0.2"},
		{Spec{Scheme: "https"}, "::1", "443", "https://[::1]"},
		{Spec{Scheme: "https"}, "::1", "8443", "https://[::1]:8443"},
		{Spec{Scheme: "http"}, "::ffff:127.0.0.1", "81", "http://127.0.0.1:81"},
	} {
		if got := tc.s.url(netip.MustParseAddr(tc.addr), tc.port); got != tc.want {
			t.Errorf("%+v url(%s, %q) = %q, want %q", tc.s, tc.addr, tc.port, got, tc.want)
		}
	}
}

// pack builds a DNS answer to name with rrs, by miekg/dns: the parser is
// checked against another implementation's bytes, compression included.
func pack(t *testing.T, rcode int, rrs ...string) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion("replicas.test.", dns.TypeA)
	m.Response, m.Rcode, m.Compress = true, rcode, true
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		m.Answer = append(m.Answer, rr)
	}
	m.Ns = append(m.Ns, &dns.SOA{Hdr: dns.RR_Header{Name: "test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 1},
		Ns: "ns.test.", Mbox: "h.test.", Minttl: 1})
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMinTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  []byte
		want uint32
		ok   bool
	}{
		{"A records", pack(t, 0, "replicas.test. 30 IN A 127.0.0.1", "replicas.test. 7 IN A 127.0.0.2"), 7, true},
		{"CNAME then A", pack(t, 0, "replicas.test. 5 IN CNAME r.test.", "r.test. 60 IN A 127.0.0.1"), 5, true},
		{"SRV", pack(t, 0, "_h._tcp.test. 9 IN SRV 10 10 8081 r1.test."), 9, true},
		{"TXT only", pack(t, 0, "replicas.test. 3 IN TXT x"), 0, false},
		{"TTL 0 is a TTL", pack(t, 0, "replicas.test. 0 IN A 127.0.0.1"), 0, true},
		{"top bit set reads as 0", pack(t, 0, "replicas.test. 2147483648 IN A 127.0.0.1"), 0, true},
		{"NODATA (the SOA's TTL is not the records')", pack(t, 0), 0, false},
		{"SERVFAIL", pack(t, dns.RcodeServerFailure, "replicas.test. 3 IN A 127.0.0.1"), 0, false},
		{"too short", []byte{0, 1, 0x80}, 0, false},
	} {
		got, ok := minTTL(tc.msg)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	// A query is not an answer; every truncation of an answer is refused
	// or read within bounds (no panic).
	q := pack(t, 0, "replicas.test. 30 IN A 127.0.0.1")
	q[2] &^= 0x80
	if _, ok := minTTL(q); ok {
		t.Error("a query read as an answer")
	}
	m := new(dns.Msg)
	m.SetQuestion("replicas.test.", dns.TypeA)
	m.Response = true
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "replicas.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: []byte{127, 0, 0, 1}}}
	full, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if ttl, ok := minTTL(full); ttl != 30 || !ok {
		t.Fatalf("whole answer: %d, %v", ttl, ok)
	}
	for n := range len(full) {
		if _, ok := minTTL(full[:n]); ok {
			t.Errorf("answer cut to %d of %d bytes read as whole", n, len(full))
		}
	}
}

func FuzzMinTTL(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 'a', 0, 0, 1, 0, 1, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, b []byte) { minTTL(b) })
}
