package gateway

import (
	"context"
	"net"
	"reflect"
	"testing"
	"time"
)

// localhost and 127.0.0.1 on one port are one server; another port, or
// another loopback address, is not.
func TestSameServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := SameServer(ctx, nil, []string{"http://localhost:8081", "http://127.0.0.1:8081", "http://127.0.0.1:8082", "http://127.0.0.2:8081"})
	want := []SameServerPair{{A: "http://localhost:8081", B: "http://127.0.0.1:8081", Addr: "127.0.0.1:8081"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// The scheme's default port counts as spelled out; an IPv4-mapped
	// IPv6 literal is its IPv4 address.
	got = SameServer(ctx, nil, []string{"http://127.0.0.1", "http://127.0.0.1:80/", "http://[::ffff:127.0.0.1]:80"})
	if len(got) != 3 {
		t.Errorf("default port and mapped address: %+v, want all 3 pairs", got)
	}
}

// A name that cannot be resolved in time is left out, not waited for, and
// literal addresses are still compared; backends New refuses are skipped.
// The name is one no hosts file has, asked of a DNS server that never
// answers: a cancelled lookup of localhost could still be answered from
// /etc/hosts (the resolver races the answer against the context).
func TestSameServerWithoutLookups(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	silent := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	got := SameServer(ctx, silent, []string{"http://replica.invalid:1", "http://127.0.0.1:1", "127.0.0.1:1", "http://127.0.0.1:99999", "http://[::1]:1", "http://[0:0:0:0:0:0:0:1]:1"})
	want := []SameServerPair{{A: "http://[::1]:1", B: "http://[0:0:0:0:0:0:0:1]:1", Addr: "[::1]:1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
