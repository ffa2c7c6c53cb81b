package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabClassesRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-reads", "-1"}, {"-reads", "100001"}, {"-rate", "-1"}, {"-search-share", "2"},
		{"-item-delay", "-1ms"}, {"-search-delay", "-1ms"}, {"-out", "/"}, {"stray"}, {"-nope"},
	} {
		code, stdout, stderr := runCmd(append([]string{"lab", "classes"}, args...)...)
		if code != exitUsage || stderr == "" || stdout != "" {
			t.Errorf("lab classes %v: exit %d, stdout %q, stderr %q; want exit 2 and an error", args, code, stdout, stderr)
		}
	}
	if code, stdout, _ := runCmd("lab", "classes", "-h"); code != exitOK || !strings.Contains(stdout, "-search-share") {
		t.Errorf("lab classes -h: %d %q", code, stdout)
	}
	if code, stdout, _ := runCmd("lab", "-h"); code != exitOK || !strings.Contains(stdout, "classes ") {
		t.Errorf("lab -h does not list classes: %q", stdout)
	}
}

// One line per condition and kind of read, each with its environment;
// -out holds the report, -html a plot per kind.
func TestLabClassesLines(t *testing.T) {
	dir := t.TempDir()
	out, html := filepath.Join(dir, "c.json"), filepath.Join(dir, "c.html")
	code, stdout, stderr := runCmd("lab", "classes", "-reads", "100", "-rate", "500", "-seed", "4", "-out", out, "-html", html)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 10 {
		t.Fatalf("%d lines: %s", len(lines), stdout)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		var v struct {
			Experiment      string   `json:"experiment"`
			Condition       string   `json:"condition"`
			Path            string   `json:"path"`
			P99Ms           *float64 `json:"p99Ms"`
			AttemptsPerRead float64  `json:"attemptsPerRead"`
			Environment     struct {
				Seed uint64 `json:"seed"`
			} `json:"environment"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.Experiment != "classes" || v.Environment.Seed != 4 || v.P99Ms == nil || v.AttemptsPerRead < 1 {
			t.Errorf("line %s: %v", l, err)
		}
		seen[v.Condition+" "+v.Path] = true
	}
	for _, k := range []string{"direct /item", "gateway, classes /search", "gateway, routes fixed /item", "per-endpoint p90 /search"} {
		if !seen[k] {
			t.Errorf("no line for %s: %v", k, seen)
		}
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), `"conditions"`) {
		t.Errorf("-out: %v", err)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "GET /search") || !strings.Contains(string(b), "<svg") {
		t.Errorf("-html: %v", err)
	}
}
