package main

import (
	"bytes"
	"flag"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func defaultTier() tierFlags {
	var t tierFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	t.register(fs)
	return t
}

// drive against two replicas, one of them the target: the row counts the
// target's reads and both replicas' counters.
func TestDriveOneRow(t *testing.T) {
	tier := defaultTier()
	tier.hit, tier.miss = time.Millisecond, 5*time.Millisecond
	fixtures, err := startReplicas([]string{"127.0.0.1:0", "127.0.0.1:0"}, tier)
	defer func() {
		for _, f := range fixtures {
			f.Close()
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	urls := fixtures[0].URL() + "," + fixtures[1].URL()
	var out, errb bytes.Buffer
	code := command([]string{"drive", "-name", "direct", "-target", strings.TrimPrefix(fixtures[0].URL(), "http://"), "-replicas", urls,
		"-hit", "1ms", "-miss", "5ms", "-load", "0.2", "-warmup", "200ms", "-duration", "1s", "-header"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[3], "direct") {
		t.Fatalf("output:\n%s", out.String())
	}
	f := strings.Fields(lines[3])
	// name, hit ratio, load max/mean, p50, p99, failed, attempts/read, moves, hot keys, homes differ
	// Every read goes to the target: the other replica gets none. The
	// attempts per read count every read sent and every arrival, the run
	// over: a direct read is one attempt, exactly, however busy the
	// machine (over the measured span alone, reads sent late fell out).
	if len(f) != 10 || f[1] == "—" || f[2] != "2.00" || f[5] != "0" || f[6] != "1.00" || f[7] != "—" {
		t.Errorf("row %q", lines[3])
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestRefusesOtherHosts(t *testing.T) {
	for _, args := range [][]string{
		{"probe", "http://example.com/"},
		{"drive", "-target", "10.0.0.1:80", "-replicas", "http://127.0.0.1:1"},
		{"drive", "-target", "127.0.0.1:1", "-replicas", "http://192.168.0.1:1"},
		{"drive", "-target", "127.0.0.1:1", "-replicas", "http://127.0.0.1:1", "-duration", "10ms"},
		{"replicas", "-addrs", "10.1.1.1:0"},
		{"nope"},
	} {
		var out, errb bytes.Buffer
		if code := command(args, &out, &errb); code == 0 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// The homes of three gateways' assignments are compared partition by
// partition.
func TestHomesDiffer(t *testing.T) {
	a := []string{"r1", "r2", "r3"}
	if n := homesDiffer([][]string{a, a, a}); n != 0 {
		t.Errorf("the same homes: %d differ", n)
	}
	if n := homesDiffer([][]string{a, {"r1", "r3", "r3"}, {"r1", "r2", "r1"}}); n != 2 {
		t.Errorf("%d differ, want 2", n)
	}
}
