package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/lab/exp"
)

func TestLabUsageAndRejects(t *testing.T) {
	if code, _, stderr := runCmd("lab"); code != exitUsage || !strings.Contains(stderr, "compare") {
		t.Errorf("lab: %d %q", code, stderr)
	}
	if code, stdout, _ := runCmd("lab", "-h"); code != exitOK || !strings.Contains(stdout, "overload") {
		t.Errorf("lab -h: %d %q", code, stdout)
	}
	if code, _, stderr := runCmd("lab", "nope"); code != exitUsage || !strings.Contains(stderr, `unknown experiment "nope"`) {
		t.Errorf("lab nope: %d %q", code, stderr)
	}
	bad := map[string][][]string{
		"compare":   {{"-samples", "0"}, {"-delay-ms", "0"}, {"-rate", "-1"}, {"-primary", "http://127.0.0.1:1/x"}, {"-primary", "ftp://a/x", "-secondary", "http://127.0.0.1:1/"}, {"-seed", "-1"}},
		"straggler": {{"-requests", "0"}, {"-rate", "0"}, {"-hedge-delay", "soon"}, {"-model", "lognormal:p50=9ms"}},
		"sweep":     {{"-requests", "0"}, {"-model", "nope"}, {"-delays", "x"}, {"-quantiles", "p100"}, {"-delays", "", "-quantiles", ""}},
		"overload":  {{"-workers", "0"}, {"-service", "0s"}, {"-loads", "0"}, {"-loads", "x"}, {"-duration", "2m"}, {"-workers", "64", "-service", "1ms"}},
	}
	for exp, cases := range bad {
		for _, args := range cases {
			code, _, stderr := runCmd(append([]string{"lab", exp}, args...)...)
			if code != exitUsage || stderr == "" {
				t.Errorf("lab %s %v: exit %d, stderr %q; want 2 with a message", exp, args, code, stderr)
			}
		}
		if code, stdout, _ := runCmd("lab", exp, "-h"); code != exitOK || !strings.Contains(stdout, "-html") {
			t.Errorf("lab %s -h: %d", exp, code)
		}
	}
}

func TestLabCompareWritesReports(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCmd("lab", "compare", "-samples", "20", "-rate", "100", "-out", dir+"/r.json", "-html", dir+"/r.html")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(stdout), &line); err != nil || line["experiment"] != "compare" {
		t.Fatalf("JSON line: %v %q", err, stdout)
	}
	b, err := os.ReadFile(dir + "/r.json")
	if err != nil || !strings.Contains(string(b), `"receipts"`) || !strings.Contains(string(b), `"fixtureWork"`) {
		t.Errorf("report file: %v", err)
	}
	if fi, err := os.Stat(dir + "/r.json"); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("report file mode: %v %v; want 0644", fi.Mode(), err)
	}
	if line["environment"] == nil {
		t.Errorf("JSON line without its environment: %q", stdout)
	}
	page, err := os.ReadFile(dir + "/r.html")
	if err != nil || !strings.Contains(string(page), "<svg") {
		t.Errorf("html: %v", err)
	}
}

func TestLabStragglerLines(t *testing.T) {
	code, stdout, stderr := runCmd("lab", "straggler", "-requests", "60", "-rate", "200")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"side":"baseline"`) || !strings.Contains(lines[1], `"backendAttemptsPerRequest"`) {
		t.Errorf("lines %q", lines)
	}
}

func TestFixtureRejects(t *testing.T) {
	for _, args := range [][]string{{"-model", "nope"}, {"-listen", "0.0.0.0:1"}, {"-listen", "x"}, {"-capacity", "-1"}, {"-queue-limit", "0"}} {
		code, _, stderr := runCmd(append([]string{"fixture"}, args...)...)
		if code != exitUsage || stderr == "" {
			t.Errorf("fixture %v: exit %d, stderr %q", args, code, stderr)
		}
	}
	if code, stdout, _ := runCmd("fixture", "-h"); code != exitOK || !strings.Contains(stdout, "lognormal:p50=8ms,p99=90ms") {
		t.Errorf("fixture -h: %d", code)
	}
}

func TestLabOutputsCheckedBeforeRun(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"compare", "-out", dir + "/missing/r.json"},
		{"straggler", "-html", dir + "/missing/r.html"},
		{"sweep", "-out", dir},
	} {
		start := time.Now()
		code, stdout, stderr := runCmd(append([]string{"lab"}, args...)...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, args[1]) {
			t.Errorf("lab %v: exit %d, stdout %q, stderr %q; want 2 naming %s", args, code, stdout, stderr, args[1])
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("lab %v refused only after %v: the run went ahead", args, d)
		}
	}
}

func TestJSONLinesCarryEnvironmentAndConfig(t *testing.T) {
	env := exp.Environment{GoVersion: "go1.26", CPUs: 2, Seed: 7}
	b, err := withContext(struct {
		Policy string `json:"policy"`
	}{"p"}, env, map[string]int{"shards": 60})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Policy      string          `json:"policy"`
		Environment exp.Environment `json:"environment"`
		Config      map[string]int  `json:"config"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.Policy != "p" || got.Environment.Seed != 7 || got.Environment.GoVersion != "go1.26" || got.Config["shards"] != 60 {
		t.Errorf("%s: %v %+v", b, err, got)
	}
	if b, err := withContext(struct{}{}, env, nil); err != nil || !json.Valid(b) || strings.Contains(string(b), "config") {
		t.Errorf("empty line: %s %v", b, err)
	}
	if _, err := withContext([]int{1}, env, nil); err == nil {
		t.Error("a line that is not an object was accepted")
	}
}
