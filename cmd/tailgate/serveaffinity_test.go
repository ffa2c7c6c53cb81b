package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"github.com/tailgate-dev/tailgate/partition"
)

// parseServe parses serve's flags and returns the gateway configuration
// they make.
func parseServe(args ...string) (gateway.Config, error) {
	var f serveFlags
	fs := newFlags("serve", "", io.Discard)
	f.register(fs)
	if err := fs.Parse(append([]string{"-backends", "http://127.0.0.1:1,http://127.0.0.1:2"}, args...)); err != nil {
		return gateway.Config{}, err
	}
	cfg, _, err := f.config(io.Discard)
	return cfg, err
}

func TestServeAffinityFlags(t *testing.T) {
	cfg, err := parseServe()
	if err != nil || cfg.Affinity != nil {
		t.Fatalf("without -affinity-key: %v, affinity %+v", err, cfg.Affinity)
	}
	cfg, err = parseServe("-affinity-key", "header:X-Tenant")
	if err != nil {
		t.Fatal(err)
	}
	want := partition.Config{PartitionsPerReplica: 20, Owners: 2, LoadBound: 1.25, MovesPerRound: 2, HotKeys: 16, HotReplicas: 4}
	if a := cfg.Affinity; a == nil || a.Key != "header:X-Tenant" || a.Partitions != want {
		t.Fatalf("defaults: %+v, want key header:X-Tenant and %+v", a, want)
	}
	cfg, err = parseServe("-affinity-key", "query:id", "-partitions-per-replica", "50", "-partition-owners", "3",
		"-load-bound", "1.5", "-partition-moves", "0", "-hot-keys", "0", "-hot-replicas", "6")
	if err != nil {
		t.Fatal(err)
	}
	want = partition.Config{PartitionsPerReplica: 50, Owners: 3, LoadBound: 1.5, MovesPerRound: -1, HotKeys: -1, HotReplicas: 6}
	if a := cfg.Affinity; a.Key != "query:id" || a.Partitions != want {
		t.Errorf("given: %+v, want %+v (0 turning moves and hot keys off)", a.Partitions, want)
	}
	// The gateway accepts what the flags make.
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if p := g.Partitions(); p == nil || p.Partitions() != 100 {
		t.Errorf("partition table %v", p)
	}
}

func TestServeAffinityFlagsRefused(t *testing.T) {
	ok := "http://127.0.0.1:1"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-affinity-key", "cookie:x"}, `-affinity-key "cookie:x": want path, query:NAME or header:NAME`},
		{[]string{"-affinity-key", "query:"}, `-affinity-key "query:"`},
		{[]string{"-affinity-key", "header:a b"}, `-affinity-key "header:a b"`},
		{[]string{"-affinity-key", "Path"}, `-affinity-key "Path"`},
		{[]string{"-partition-owners", "3"}, "-partition-owners applies only with -affinity-key"},
		{[]string{"-hot-keys", "4"}, "-hot-keys applies only with -affinity-key"},
		{[]string{"-affinity-key", "path", "-partitions-per-replica", "0"}, "-partitions-per-replica 0 must be within"},
		{[]string{"-affinity-key", "path", "-partition-owners", "17"}, "-partition-owners 17 must be within [1, 16]"},
		{[]string{"-affinity-key", "path", "-load-bound", "1"}, "-load-bound 1 must be a number above 1"},
		{[]string{"-affinity-key", "path", "-load-bound", "NaN"}, "-load-bound NaN"},
		{[]string{"-affinity-key", "path", "-partition-moves", "-1"}, "-partition-moves -1 must not be negative"},
		{[]string{"-affinity-key", "path", "-hot-keys", "2000"}, "-hot-keys 2000 must be within [0, 1024]"},
		{[]string{"-affinity-key", "path", "-hot-replicas", "0"}, "-hot-replicas 0 must be within [1, 64]"},
		{[]string{"-affinity-key", "path", "-partitions-per-replica", "2000000"}, "-partitions-per-replica 2000000 must be within [1, 1048576]"},
		// Within the flag's bounds, but too many times the backends.
		{[]string{"-affinity-key", "path", "-partitions-per-replica", "600000"}, "1200000 partitions (PartitionsPerReplica 600000 × 2 replicas) above the limit"},
	} {
		// As serve checks them, without serving: the flags, then the
		// gateway's own checks.
		cfg, err := parseServe(c.args...)
		if err == nil {
			var g *gateway.Gateway
			if g, err = gateway.New(cfg); err == nil {
				g.Close()
			}
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve %v: %v, want an error with %q", c.args, err, c.want)
		}
	}
	// serve exits 2 with the message.
	code, _, stderr := runCmd("serve", "-backends", ok, "-listen", "127.0.0.1:0", "-admin", "", "-affinity-key", "cookie:x")
	if code != exitUsage || !strings.Contains(stderr, `-affinity-key "cookie:x": want path, query:NAME or header:NAME`) {
		t.Errorf("serve -affinity-key cookie:x: exit %d, stderr %q", code, stderr)
	}
	// The same from a config file: its key is the flag's name.
	path := writeTestFile(t, "tailgate.yaml", "backends: ["+ok+"]\nlisten: 127.0.0.1:0\nadmin: ''\naffinity-key: 'cookie:x'\n")
	if code, _, stderr := runCmd("serve", "-config", path); code != exitUsage || !strings.Contains(stderr, `-affinity-key "cookie:x"`) {
		t.Errorf("from a file: exit %d, stderr %q", code, stderr)
	}
	f, err := parseWithFile(t, "backends: ["+ok+"]\naffinity-key: query:id\npartition-owners: 3\n")
	if err != nil || f.affinityKey != "query:id" || f.owners != 3 {
		t.Errorf("file settings: %v, key %q, owners %d", err, f.affinityKey, f.owners)
	}
}

// Served on loopback: the reads of a key land on its owners; the admin
// listener shows /debug/partitions, and /metrics passes promtool. A
// reload changes the key, refuses turning the mode off, and keeps the
// partition knobs (they need a restart).
func TestServeAffinityEndToEnd(t *testing.T) {
	rs := newReplicas(t, 4)
	backends := fmt.Sprintf("backends: [%s, %s, %s, %s]\n", rs.url(0), rs.url(1), rs.url(2), rs.url(3))
	s := startServed(t, loopback+backends+"affinity-key: path\nattempts-per-request: 1\n")
	owners := s.g.Partitions().OwnersAt("/items/7", time.Now()).Replicas
	for range 20 {
		if code, body, _ := do(t, "GET", "http://"+s.addr+"/items/7"); code != 200 {
			t.Fatalf("read: %d %s", code, body)
		}
	}
	onOwners := 0
	for i := range 4 {
		n := rs.count(i, "/items/7")
		if slices.Contains(owners, rs.url(i)) {
			onOwners += n
		} else if n > 0 {
			t.Errorf("replica %d, not an owner of /items/7 (%v), got %d reads", i, owners, n)
		}
	}
	if onOwners != 20 {
		t.Errorf("%d of 20 reads on the owners", onOwners)
	}
	code, body, _ := do(t, "GET", "http://"+s.admin+"/debug/partitions")
	var st struct {
		Key        string `json:"key"`
		Partitions int    `json:"partitions"`
		Replicas   []any  `json:"replicas"`
	}
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.Key != "path" || st.Partitions != 80 || len(st.Replicas) != 4 {
		t.Fatalf("/debug/partitions: %d %v %+v", code, err, st)
	}
	code, metrics, _ := do(t, "GET", "http://"+s.admin+"/metrics")
	for _, m := range []string{`tailgate_partition_moves_total{pool="default"} 0`, `tailgate_hot_keys{pool="default"} 0`, "tailgate_partition_load_imbalance", "tailgate_affinity_keyless_total 0"} {
		if code != 200 || !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(metrics)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}

	// The key changes live.
	s.rewrite(t, loopback+backends+"affinity-key: query:id\nattempts-per-request: 1\n")
	if err := s.r.reload("test"); err != nil {
		t.Fatal(err)
	}
	if st, _ := debugPartitions(t, s.g); st.Key != "query:id" {
		t.Errorf("key after reload %q", st.Key)
	}
	// The partition knobs need a restart.
	s.rewrite(t, loopback+backends+"affinity-key: query:id\nattempts-per-request: 1\npartition-owners: 3\n")
	if err := s.r.reload("test"); err != nil {
		t.Fatal(err)
	}
	s.waitLog(t, `msg="this setting needs a restart to change; its running value is kept" trigger=test flag=partition-owners running=2 new=3`)
	if st, _ := debugPartitions(t, s.g); st.Owners != 2 {
		t.Errorf("owners after reload %d, want the running 2", st.Owners)
	}
	// The mode turns off live.
	s.rewrite(t, loopback+backends+"attempts-per-request: 1\n")
	if err := s.r.reload("test"); err != nil {
		t.Errorf("turning affinity off: %v", err)
	}
	if _, on := debugPartitions(t, s.g); on {
		t.Error("affinity still on after a reload turned it off")
	}
	if code, _, _ := do(t, "GET", "http://"+s.addr+"/items?id=7"); code != http.StatusOK {
		t.Errorf("read after affinity was turned off: %d", code)
	}
}
