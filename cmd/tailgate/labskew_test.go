package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestLabSkewRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-replicas", "1"}, {"-replicas", "17"}, {"-workers", "0"}, {"-keys", "0"}, {"-cache-keys", "3000"}, {"-exponent", "-1"}, {"-exponent", "NaN"},
		{"-hit", "60ms"}, {"-miss", "0s"}, {"-miss", "2s"}, {"-load", "0"}, {"-load", "2"}, {"-warmup", "-1s"}, {"-duration", "100ms"}, {"-duration", "3m"},
		{"-exponents", "x"}, {"-exponents", "1,4"}, {"-exponents", "1,1,1,1,1,1,1,1,1"}, {"-load-bound", "0.9"}, {"-owners", "-1"}, {"-hot-keys", "-2"},
		{"-window", "-1s"}, {"-rebalance-every", "0s"}, {"-timeout", "1ms"}, {"-workers", "16", "-hit", "1ms", "-miss", "2ms"},
		{"-sim-requests", "5000"}, {"-simulate", "-replicas", "1"}, {"-simulate", "-sim-requests", "10"}, {"-simulate", "-keys", "10", "-cache-keys", "100"},
		{"-out", "/"}, {"stray"}, {"-nope"},
	} {
		code, stdout, stderr := runCmd(append([]string{"lab", "skew"}, args...)...)
		if code != exitUsage || stderr == "" || stdout != "" {
			t.Errorf("lab skew %v: exit %d, stdout %q, stderr %q; want exit 2 and an error", args, code, stdout, stderr)
		}
	}
	// An error names the flag.
	if _, _, stderr := runCmd("lab", "skew", "-cache-keys", "3000"); !strings.Contains(stderr, "-cache-keys 3000") {
		t.Errorf("stderr %q does not name -cache-keys", stderr)
	}
	code, stdout, _ := runCmd("lab", "skew", "-h")
	if code != exitOK || !strings.Contains(stdout, "-exponents") || !strings.Contains(stdout, "-simulate") || !strings.Contains(stdout, "hash mod N") {
		t.Errorf("lab skew -h: %d %q", code, stdout)
	}
	if code, stdout, _ := runCmd("lab", "-h"); code != exitOK || !strings.Contains(stdout, "skew ") {
		t.Errorf("lab -h does not list skew: %q", stdout)
	}
}

// One JSON line per policy, then one per goal, each with its environment
// and configuration; -out holds the report, -html the plots.
func TestLabSkewLines(t *testing.T) {
	if testing.Short() {
		t.Skip("loopback run")
	}
	dir := t.TempDir()
	out, html := filepath.Join(dir, "s.json"), filepath.Join(dir, "s.html")
	code, stdout, stderr := runCmd("lab", "skew", "-replicas", "2", "-keys", "100", "-cache-keys", "20", "-hit", "1ms", "-miss", "5ms", "-load", "0.3",
		"-warmup", "0s", "-duration", "1s", "-exponents", "", "-seed", "5", "-out", out, "-html", html)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 8+10 {
		t.Fatalf("%d lines: %s", len(lines), stdout)
	}
	for i, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		env, _ := v["environment"].(map[string]any)
		cfg, _ := v["config"].(map[string]any)
		if v["experiment"] != "skew" || env["goVersion"] != runtime.Version() || env["seed"] != 5.0 || cfg["replicas"] != 2.0 || cfg["keys"] != 100.0 {
			t.Errorf("line %d: %s", i, l)
		}
		want := []string{"policy", "p50Ms", "p99Ms", "p999Ms", "hitRatio", "loadMaxOverMean", "partitionsMoved", "hotKeys", "attemptsPerRead"}
		if i >= 8 {
			want = []string{"goal", "hedging", "measured", "met"}
		}
		for _, k := range want {
			if _, ok := v[k]; !ok {
				t.Errorf("line %d lacks %q: %s", i, k, l)
			}
		}
		if _, ok := v["timeline"]; ok {
			t.Errorf("line %d carries the timeline", i)
		}
	}
	var rep struct {
		Results []struct {
			Timeline [][]float64 `json:"timeline"`
		} `json:"results"`
	}
	if b, err := os.ReadFile(out); err != nil || json.Unmarshal(b, &rep) != nil || len(rep.Results) != 8 || len(rep.Results[0].Timeline) != 2 {
		t.Errorf("-out: %v, %+v", err, rep)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "Reads each replica received") {
		t.Errorf("-html: %v", err)
	}
}

func TestLabSkewSimulate(t *testing.T) {
	args := []string{"lab", "skew", "-simulate", "-replicas", "30", "-keys", "3000", "-cache-keys", "40", "-sim-requests", "20000", "-seed", "3"}
	code, stdout, stderr := runCmd(args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines: %s", len(lines), stdout)
	}
	for _, l := range lines {
		var v map[string]any
		json.Unmarshal([]byte(l), &v)
		cfg, _ := v["config"].(map[string]any)
		if v["experiment"] != "skew-simulated" || v["loadMaxOverMean"] == nil || v["hitRatio"] == nil || cfg["replicas"] != 30.0 || cfg["requests"] != 20000.0 {
			t.Errorf("line %s", l)
		}
	}
	// The same seed, the same figures (the environment aside).
	_, again, _ := runCmd(args...)
	strip := func(s string) string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			out = append(out, l[:strings.Index(l, `,"environment"`)])
		}
		return strings.Join(out, "\n")
	}
	if strip(again) != strip(stdout) {
		t.Errorf("two simulations with seed 3 differ:\n%s\n%s", stdout, again)
	}
}
