package discovery

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/tailgate-dev/tailgate/internal/redact"
)

// Kind says how a backend entry is turned into replicas.
type Kind int

const (
	// Static is a replica URL, used as given.
	Static Kind = iota
	// Host is dns+http(s)://name[:port]: every A and AAAA record of name
	// is a replica on port.
	Host
	// SRV is dnssrv+http(s)://name: every SRV record of name is a target
	// and a port; each of the target's A and AAAA records is a replica on
	// that port.
	SRV
)

// Prefixes of the entries that are DNS names, as Thanos and Prometheus
// spell them.
const (
	prefixHost = "dns+"
	prefixSRV  = "dnssrv+"
)

// Spec is one backend entry.
type Spec struct {
	// Raw is the entry as given: the name logs, metrics and State use.
	Raw  string
	Kind Kind
	// Scheme (http or https), Name (looked up) and Port (Host only; ""
	// for the scheme's default) shape the replicas' URLs. Unset for
	// Static.
	Scheme, Name, Port string
}

// IsDNS reports whether s is resolved rather than used as given.
func IsDNS(raw string) bool {
	l := strings.ToLower(raw)
	return strings.HasPrefix(l, prefixHost) || strings.HasPrefix(l, prefixSRV)
}

// Parse reads one backend entry. A static entry is returned as it is: the
// gateway checks it. A DNS entry must have a scheme of http or https and a
// name; a port with dns+ (none: the scheme's default), none with dnssrv+
// (the records give them); no user information, path, query or fragment.
func Parse(raw string) (Spec, error) {
	s := Spec{Raw: raw}
	if !IsDNS(raw) {
		return s, nil
	}
	rest := raw[len(prefixHost):]
	s.Kind = Host
	if strings.HasPrefix(strings.ToLower(raw), prefixSRV) {
		rest, s.Kind = raw[len(prefixSRV):], SRV
	}
	bad := func(problem string) (Spec, error) {
		return s, fmt.Errorf("discovery: backend %q: %s", redact.URL(raw), problem)
	}
	if redact.URL(rest) != rest {
		return bad("must not carry user information")
	}
	u, err := url.Parse(rest)
	if err != nil {
		return bad("want " + example(s.Kind))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("want " + example(s.Kind))
	case u.Hostname() == "":
		return bad("no name to look up")
	case u.User != nil:
		return bad("must not carry user information")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return bad("must not have a path, query or fragment")
	}
	s.Scheme, s.Name, s.Port = u.Scheme, strings.ToLower(u.Hostname()), u.Port()
	if s.Kind == SRV {
		if s.Port != "" || strings.HasSuffix(u.Host, ":") {
			return bad("no port with dnssrv+: the SRV records give them")
		}
		if _, err := netip.ParseAddr(s.Name); err == nil {
			return bad("an SRV name, not an address")
		}
		return s, nil
	}
	if s.Port != "" {
		if n, err := strconv.Atoi(s.Port); err != nil || n < 1 || n > 65535 {
			return bad("port " + s.Port + " out of range: want 1 to 65535")
		}
	}
	return s, nil
}

func example(k Kind) string {
	if k == SRV {
		return "dnssrv+http://_service._tcp.name or dnssrv+https://..."
	}
	return "dns+http://name:port or dns+https://name:port"
}

// url returns the replica URL of address a on port (a's spec's own port
// when port is ""), in target.Parse's spelling: the scheme's default port
// left out, an IPv6 address in brackets.
func (s Spec) url(a netip.Addr, port string) string {
	if port == "" {
		port = s.Port
	}
	host := a.Unmap().String()
	if port == "" || (s.Scheme == "http" && port == "80") || (s.Scheme == "https" && port == "443") {
		if a.Unmap().Is6() {
			host = "[" + host + "]"
		}
		return s.Scheme + "://" + host
	}
	return s.Scheme + "://" + net.JoinHostPort(host, port)
}
