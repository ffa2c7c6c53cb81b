package discovery

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// This file: the records' TTL, read from the answers Go's resolver gets.
//
// net.Resolver returns addresses, never TTLs. Rather than a DNS client of
// our own beside it (which would drop /etc/resolv.conf's search list,
// ndots, rotation and /etc/hosts), the resolver's Dial hands it
// connections that read each answer's TTLs as the resolver reads the
// answer, into a box the lookup's context carries (the resolver passes
// that context, values kept, to Dial). What this cannot see it does not
// guess: when Go's resolver is not the one used (the cgo resolver, which
// the platform may choose when no -dns-server is set), or an answer comes
// from /etc/hosts, the TTL is unknown and the refresh interval alone
// applies.

// ttlBox collects the shortest TTL of the answer records (A, AAAA, CNAME,
// SRV) that one resolution's lookups read.
type ttlBox struct {
	mu   sync.Mutex
	min  uint32
	seen bool
}

type ttlKey struct{}

// withTTL returns a context whose lookups record TTLs into a new box.
func withTTL(ctx context.Context) (context.Context, *ttlBox) {
	b := &ttlBox{}
	return context.WithValue(ctx, ttlKey{}, b), b
}

// ttl returns the shortest TTL seen, and whether any was.
func (b *ttlBox) ttl() (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Duration(b.min) * time.Second, b.seen
}

func (b *ttlBox) message(msg []byte) {
	ttl, ok := minTTL(msg)
	if !ok {
		return
	}
	b.mu.Lock()
	if !b.seen || ttl < b.min {
		b.min, b.seen = ttl, true
	}
	b.mu.Unlock()
}

// observe wraps c, a connection Go's resolver dialled to a DNS server, so
// that the answers read through it reach ctx's box; c as it is when ctx
// has none. A UDP connection must stay a net.PacketConn: the resolver
// frames its messages by that.
func observe(ctx context.Context, c net.Conn) net.Conn {
	b, _ := ctx.Value(ttlKey{}).(*ttlBox)
	if b == nil {
		return c
	}
	if u, ok := c.(*net.UDPConn); ok {
		return &packetConn{UDPConn: u, box: b}
	}
	if _, ok := c.(net.PacketConn); ok {
		return c // a packet conn we cannot wrap and keep one: no TTL
	}
	return &streamConn{Conn: c, box: b}
}

// packetConn reads one DNS message per Read, as the resolver does.
type packetConn struct {
	*net.UDPConn
	box *ttlBox
}

func (c *packetConn) Read(p []byte) (int, error) {
	n, err := c.UDPConn.Read(p)
	if n > 0 {
		c.box.message(p[:n])
	}
	return n, err
}

// streamConn reads DNS messages over TCP: each is two bytes of length,
// then the message, arriving in reads of any size.
type streamConn struct {
	net.Conn
	box *ttlBox
	buf []byte
}

func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.buf = append(c.buf, p[:n]...)
	for len(c.buf) >= 2 {
		l := 2 + int(binary.BigEndian.Uint16(c.buf))
		if len(c.buf) < l {
			break
		}
		c.box.message(c.buf[2:l])
		c.buf = c.buf[l:]
	}
	return n, err
}

// DNS record types whose TTL bounds how long an answer holds.
const (
	typeA     = 1
	typeCNAME = 5
	typeAAAA  = 28
	typeSRV   = 33
)

// minTTL returns the shortest TTL of msg's answer records of the types
// above, and false when msg is not a successful answer with one (a
// failure, NXDOMAIN, NODATA, or bytes that do not parse). It reads only
// what it needs: the header, the questions to skip, the answers' fixed
// fields.
func minTTL(msg []byte) (uint32, bool) {
	if len(msg) < 12 || msg[2]&0x80 == 0 || msg[3]&0x0f != 0 {
		return 0, false // short, a query, or an error rcode
	}
	qd, an := int(binary.BigEndian.Uint16(msg[4:])), int(binary.BigEndian.Uint16(msg[6:]))
	off := 12
	for range qd {
		if off = skipName(msg, off); off < 0 || off+4 > len(msg) {
			return 0, false
		}
		off += 4 // type, class
	}
	var ttl uint32
	seen := false
	for range an {
		if off = skipName(msg, off); off < 0 || off+10 > len(msg) {
			return 0, false
		}
		typ := binary.BigEndian.Uint16(msg[off:])
		t := binary.BigEndian.Uint32(msg[off+4:])
		rdlen := int(binary.BigEndian.Uint16(msg[off+8:]))
		off += 10 + rdlen
		if off > len(msg) {
			return 0, false
		}
		switch typ {
		case typeA, typeAAAA, typeCNAME, typeSRV:
			// RFC 2181 8: a TTL with the top bit set is read as zero.
			if t > 1<<31-1 {
				t = 0
			}
			if !seen || t < ttl {
				ttl, seen = t, true
			}
		}
	}
	return ttl, seen
}

// skipName returns the offset after the name at off in msg, or -1 when
// it runs past msg or is malformed. A compression pointer ends a name
// where it stands: what it points to need not be read.
func skipName(msg []byte, off int) int {
	for {
		if off >= len(msg) {
			return -1
		}
		l := int(msg[off])
		switch {
		case l == 0:
			return off + 1
		case l&0xc0 == 0xc0:
			if off+2 > len(msg) {
				return -1
			}
			return off + 2
		case l&0xc0 != 0:
			return -1 // reserved label types
		}
		off += 1 + l
	}
}
