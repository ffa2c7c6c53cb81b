package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabFanoutRejects(t *testing.T) {
	bad := map[string][][]string{
		"fanout": {{"-shards", "0"}, {"-shards", "201"}, {"-shards", "10", "-need", "11"}, {"-need", "-1"}, {"-hedge-delay", "-1ms"},
			{"-requests", "0"}, {"-rate", "0"}, {"-shards", "200", "-rate", "30"}, {"-model", "slowids:ids=1,fast=1ms,slow=2ms", "-simulate"},
			{"-sim-requests", "0"}, {"-simulate", "-shards", "1000001"}, {"-simulate", "-table1-fanout", "0"}, {"-simulate", "-shared-spread", "4"},
			{"-model", "nope"}, {"-out", "/"}},
		"bigtable": {{"-servers", "1"}, {"-servers", "201"}, {"-keys", "150"}, {"-keys", "50"}, {"-hedge-after", "0s"}, {"-budget", "0"},
			{"-budget", "1.5"}, {"-operations", "0"}, {"-rate", "0"}, {"-rate", "51"}, {"-key-model", "x"}, {"-sim-operations", "0"}},
	}
	for exp, cases := range bad {
		for _, args := range cases {
			code, stdout, stderr := runCmd(append([]string{"lab", exp}, args...)...)
			if code == exitOK || stderr == "" || stdout != "" {
				t.Errorf("lab %s %v: exit %d, stdout %q, stderr %q; want an error and no report", exp, args, code, stdout, stderr)
			}
		}
		if code, stdout, _ := runCmd("lab", exp, "-h"); code != exitOK || !strings.Contains(stdout, "-simulate") {
			t.Errorf("lab %s -h: %d %q", exp, code, stdout)
		}
	}
}

// One JSON line per policy, with the fields the issue names, on loopback
// and simulated.
func TestLabFanoutLines(t *testing.T) {
	dir := t.TempDir()
	html := filepath.Join(dir, "f.html")
	code, stdout, stderr := runCmd("lab", "fanout", "-shards", "4", "-need", "3", "-requests", "20", "-rate", "200",
		"-model", "lognormal:p50=1ms,p99=5ms", "-sim-requests", "2000", "-html", html)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines: %s", len(lines), stdout)
	}
	for i, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"policy", "p50Ms", "p99Ms", "p999Ms", "extraAttemptsPct", "partialShare", "simulated", "agreesWithSimulation", "environment", "config"} {
			if _, ok := v[k]; !ok {
				t.Errorf("line %d lacks %q: %s", i, k, l)
			}
		}
		if _, ok := v["predicted"]; ok != (i == 0) {
			t.Errorf("line %d: predicted present %v", i, ok)
		}
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "Cross-check") {
		t.Errorf("HTML: %v", err)
	}

	code, stdout, stderr = runCmd("lab", "fanout", "-simulate", "-shards", "100", "-sim-requests", "5000", "-table1-fanout", "100", "-shared-spread", "0")
	if code != exitOK {
		t.Fatalf("simulate: exit %d: %s", code, stderr)
	}
	kinds := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var v struct {
			Experiment string `json:"experiment"`
			Agrees     *bool  `json:"agrees"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		kinds[v.Experiment]++
		if v.Agrees != nil && !*v.Agrees {
			t.Errorf("arithmetic disagrees: %s", l)
		}
	}
	// 4 policies; fan-outs 1, 10, 100, 1000, 2000 (100 is the shards');
	// one Table 1 of three rows (-shared-spread 0 skips the second).
	if kinds["fanout-simulated"] != 4 || kinds["fanout-arithmetic"] != 5 || kinds["fanout-table1"] != 3 {
		t.Errorf("lines by kind %v", kinds)
	}
}

func TestLabBigtableLines(t *testing.T) {
	code, stdout, stderr := runCmd("lab", "bigtable", "-servers", "4", "-keys", "8", "-operations", "10", "-rate", "100",
		"-key-model", "lognormal:p50=1ms,p99=5ms")
	if code != exitOK || strings.Count(stdout, "\n") != 2 || !strings.Contains(stdout, `"label":"hedge after 10ms"`) || !strings.Contains(stdout, `"p999BeforeMs":1800`) {
		t.Errorf("loopback: exit %d %s %s", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd("lab", "bigtable", "-simulate", "-servers", "10", "-keys", "20", "-sim-operations", "2000")
	if code != exitOK || strings.Count(stdout, "\n") != 2 || !strings.Contains(stdout, `"experiment":"bigtable-simulated"`) {
		t.Errorf("simulate: exit %d %s %s", code, stdout, stderr)
	}
}
