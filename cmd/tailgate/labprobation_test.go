package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestLabProbationRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-duration", "500ms"}, {"-duration", "6m"}, {"-rate", "0"}, {"-rate", "2001"}, {"-rate", "2000", "-duration", "5m"},
		{"-replicas", "1"}, {"-replicas", "11"}, {"-factor", "1"}, {"-factor", "1001"}, {"-factor", "NaN"},
		{"-degrade-from", "-1s"}, {"-degrade-to", "-1s"},
		{"-degrade-from", "30s", "-degrade-to", "20s"}, {"-degrade-from", "40s"}, // past the default end, 30s
		{"-degrade-to", "61s"}, {"-duration", "10s", "-degrade-to", "11s"}, {"-degrade-from", "0s", "-degrade-to", "0s"},
		{"-model", "nope"}, {"-model", "lognormal:p50=2ms,p99=1ms"}, {"-hedge-delay", "soon"},
		{"-probation-window", "-1s"}, {"-probation-window", "2m"}, {"-probation-factor", "1"}, {"-shadow-rate", "-1"}, {"-shadow-rate", "101"},
		{"-out", "/"}, {"stray"}, {"-nope"},
	} {
		code, stdout, stderr := runCmd(append([]string{"lab", "probation"}, args...)...)
		if code != exitUsage || stderr == "" || stdout != "" {
			t.Errorf("lab probation %v: exit %d, stdout %q, stderr %q; want exit 2 and an error", args, code, stdout, stderr)
		}
	}
	code, stdout, _ := runCmd("lab", "probation", "-h")
	if code != exitOK || !strings.Contains(stdout, "-degrade-from") || !strings.Contains(stdout, "service-time draws") {
		t.Errorf("lab probation -h: %d %q", code, stdout)
	}
	if code, stdout, _ := runCmd("lab", "-h"); code != exitOK || !strings.Contains(stdout, "probation ") {
		t.Errorf("lab -h does not list probation: %q", stdout)
	}
	if code, _, stderr := runCmd("lab", "nope"); code != exitUsage || !strings.Contains(stderr, "probation") {
		t.Errorf("unknown experiment: %d %q", code, stderr)
	}
	if code, _, stderr := runCmd(); code != exitUsage || !strings.Contains(stderr, "| probation") {
		t.Errorf("usage does not list probation: %q", stderr)
	}
}

// One JSON line per second per run, then a summary line per run, each
// with its environment and configuration; -out holds the report, -html
// the timeline.
func TestLabProbationLines(t *testing.T) {
	dir := t.TempDir()
	out, html := filepath.Join(dir, "p.json"), filepath.Join(dir, "p.html")
	code, stdout, stderr := runCmd("lab", "probation", "-duration", "1s", "-rate", "100", "-model", "const:2ms",
		"-degrade-from", "200ms", "-degrade-to", "600ms", "-factor", "20", "-probation-window", "100ms", "-shadow-rate", "50",
		"-seed", "5", "-out", out, "-html", html)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines: %s", len(lines), stdout)
	}
	kinds := map[string]int{}
	for i, l := range lines {
		var v struct {
			Experiment  string         `json:"experiment"`
			Line        string         `json:"line"`
			Condition   string         `json:"condition"`
			Second      *int           `json:"second"`
			Replicas    []any          `json:"replicas"`
			Received    []any          `json:"received"`
			Transitions []any          `json:"transitions"`
			Seconds     []any          `json:"seconds"`
			Raw         map[string]any `json:"-"`
			Environment struct {
				GoVersion string `json:"goVersion"`
				Seed      uint64 `json:"seed"`
				CPUs      int    `json:"cpus"`
			} `json:"environment"`
			Config map[string]any `json:"config"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		json.Unmarshal([]byte(l), &raw)
		if v.Experiment != "probation" || v.Environment.GoVersion != runtime.Version() || v.Environment.Seed != 5 || v.Environment.CPUs < 1 ||
			v.Config["degradedModel"] != "phase:from=200ms,to=600ms,factor=20,base=const:2ms" || v.Config["rate"] != 100.0 {
			t.Errorf("line %d: %s", i, l)
		}
		kinds[v.Line+"/"+v.Condition]++
		switch v.Line {
		case "second":
			for _, k := range []string{"p50Ms", "p99Ms", "reads", "degraded", "onProbation", "degradedAttempts", "degradedShadows"} {
				if _, ok := raw[k]; !ok {
					t.Errorf("line %d lacks %q", i, k)
				}
			}
			if v.Second == nil || *v.Second != 0 || len(v.Replicas) != 3 {
				t.Errorf("line %d: %s", i, l)
			}
		case "summary":
			for _, k := range []string{"p50Ms", "p99Ms", "p999Ms", "extraAttemptsPct", "shadows", "enteredProbationAtMs", "exitedProbationAtMs", "timeToEnterMs", "duringDegradation"} {
				if _, ok := raw[k]; !ok {
					t.Errorf("line %d lacks %q", i, k)
				}
			}
			if v.Seconds != nil || len(v.Received) != 3 {
				t.Errorf("summary line %d: %s", i, l)
			}
		default:
			t.Errorf("line %d: kind %q", i, v.Line)
		}
	}
	if kinds["second/no probation"] != 1 || kinds["second/probation"] != 1 || kinds["summary/no probation"] != 1 || kinds["summary/probation"] != 1 {
		t.Errorf("lines %v", kinds)
	}
	var rep struct {
		Runs []struct {
			Seconds []json.RawMessage `json:"seconds"`
		} `json:"runs"`
		Config map[string]any `json:"config"`
	}
	if b, err := os.ReadFile(out); err != nil || json.Unmarshal(b, &rep) != nil || len(rep.Runs) != 2 || len(rep.Runs[1].Seconds) != 1 {
		t.Errorf("-out: %v, %+v", err, rep)
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"p99 per second", "<svg", "replica-c degraded", "no probation", "primaries spread over every replica"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
}
