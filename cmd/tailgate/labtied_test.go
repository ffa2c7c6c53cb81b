package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestLabTiedRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-servers", "1"}, {"-servers", "17"}, {"-workers", "0"}, {"-workers", "17"}, {"-queue-limit", "0"},
		{"-reads", "0"}, {"-reads", "100001"}, {"-rate", "0"}, {"-rate", "1001"}, {"-reads", "20000", "-rate", "100"},
		{"-background-share", "0"}, {"-background-share", "1"}, {"-hedge-delay", "-1ms"}, {"-hedge-budget", "0"},
		{"-tied-delay", "-1ms"}, {"-tied-delay", "2s"}, {"-timeout", "0s"}, {"-warmup", "-1s"},
		{"-read-model", "nope"}, {"-background-model", "lognormal:p50=2ms,p99=1ms"},
		{"-rate", "900"}, // past the servers' capacity
		{"-background-share", "0.9", "-background-model", "const:1ms", "-workers", "16", "-servers", "16", "-rate", "10"}, // too many requests/s
		{"-out", "/"}, {"stray"}, {"-nope"},
	} {
		code, stdout, stderr := runCmd(append([]string{"lab", "tied"}, args...)...)
		if code != exitUsage || stderr == "" || stdout != "" {
			t.Errorf("lab tied %v: exit %d, stdout %q, stderr %q; want exit 2 and an error", args, code, stdout, stderr)
		}
	}
	code, stdout, _ := runCmd("lab", "tied", "-h")
	if code != exitOK || !strings.Contains(stdout, "Table 2") || !strings.Contains(stdout, "-background-share") {
		t.Errorf("lab tied -h: %d %q", code, stdout)
	}
	if code, _, stderr := runCmd("lab", "nope"); code != exitUsage || !strings.Contains(stderr, "tied") {
		t.Errorf("unknown experiment: %d %q", code, stderr)
	}
	if code, stdout, _ := runCmd("lab", "-h"); code != exitOK || !strings.Contains(stdout, "tied ") {
		t.Errorf("lab -h does not list tied: %q", stdout)
	}
}

// One JSON line per cluster and policy, each with its environment and
// configuration; -out holds the report, -html the plots and the table.
func TestLabTiedLines(t *testing.T) {
	dir := t.TempDir()
	out, html := filepath.Join(dir, "t.json"), filepath.Join(dir, "t.html")
	code, stdout, stderr := runCmd("lab", "tied", "-servers", "2", "-workers", "1", "-reads", "20", "-rate", "400",
		"-read-model", "lognormal:p50=2ms,p99=6ms", "-background-model", "const:5ms", "-background-share", "0.3",
		"-warmup", "20ms", "-seed", "5", "-out", out, "-html", html)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines: %s", len(lines), stdout)
	}
	seen := map[string]bool{}
	for i, l := range lines {
		var v struct {
			Experiment  string         `json:"experiment"`
			Cluster     string         `json:"cluster"`
			Policy      string         `json:"policy"`
			P50         *float64       `json:"p50Ms"`
			ExtraWork   *float64       `json:"extraWorkPct"`
			Work        map[string]any `json:"work"`
			Paper       map[string]any `json:"paper"`
			Environment struct {
				GoVersion string `json:"goVersion"`
				Seed      uint64 `json:"seed"`
			} `json:"environment"`
			Config map[string]any `json:"config"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		json.Unmarshal([]byte(l), &raw)
		for _, k := range []string{"p90Ms", "p99Ms", "p999Ms"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("line %d lacks %q", i, k)
			}
		}
		if v.Experiment != "tied" || v.P50 == nil || v.ExtraWork == nil || v.Work["reconciled"] != true || v.Environment.GoVersion != runtime.Version() ||
			v.Environment.Seed != 5 || v.Config["readSeed"] == nil || v.Config["readModel"] != "lognormal:p50=2ms,p99=6ms" {
			t.Errorf("line %d: %s", i, l)
		}
		if (v.Paper != nil) != (v.Policy != "hedging") {
			t.Errorf("line %d: paper row %v for %s", i, v.Paper, v.Policy)
		}
		seen[v.Cluster+"/"+v.Policy] = true
	}
	if len(seen) != 6 {
		t.Errorf("configurations %v", seen)
	}
	var rep struct {
		Runs  []json.RawMessage `json:"runs"`
		Paper map[string]any    `json:"paper"`
	}
	if b, err := os.ReadFile(out); err != nil || json.Unmarshal(b, &rep) != nil || len(rep.Runs) != 6 || rep.Paper["loadedTied"] == nil {
		t.Errorf("-out: %v, %d runs", err, len(rep.Runs))
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Table 2", "loaded cluster", "for comparison only", "<svg", "tied requests"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
}
