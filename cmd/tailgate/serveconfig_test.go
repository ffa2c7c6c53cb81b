package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTestFile writes content to name in a directory of the test's, and
// returns its path.
func writeTestFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// parseWithFile parses args and then the config file content, as serve
// does, and returns the flags, or the error.
func parseWithFile(t *testing.T, content string, args ...string) (*serveFlags, error) {
	t.Helper()
	path := writeTestFile(t, "tailgate.yaml", content)
	f, code, err := loadServeFlags(append([]string{"-config", path}, args...), io.Discard, io.Discard)
	if code >= 0 {
		t.Fatalf("command line %v refused", args)
	}
	if err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), path, "tailgate.yaml"))
	}
	return f, nil
}

// A file sets flags by their names: a list for a comma-separated flag,
// durations, numbers and booleans as written on the command line; and
// the configuration built from them is the one the command line would
// give.
func TestConfigFileSetsFlags(t *testing.T) {
	yamlFile := `# comments are fine
backends:
  - http://127.0.0.1:8081
  - http://127.0.0.1:8082
listen: 127.0.0.1:7070
hedge-delay: 25ms
hedge-fraction: 0.2
max-requests: 64
gate: false
probation-min-excess: 0s
`
	jsonFile := "{\n\t\"backends\": [\"http://127.0.0.1:8081\", \"http://127.0.0.1:8082\"], \"listen\": \"127.0.0.1:7070\",\n" +
		"\t\"hedge-delay\": \"25ms\", \"hedge-fraction\": 0.2, \"max-requests\": 64, \"gate\": false, \"probation-min-excess\": \"0s\"\n}\n" // tabs, as JSON is often indented
	want, code, err := loadServeFlags([]string{"-backends", "http://127.0.0.1:8081,http://127.0.0.1:8082", "-listen", "127.0.0.1:7070",
		"-hedge-delay", "25ms", "-hedge-fraction", "0.2", "-max-requests", "64", "-gate=false", "-probation-min-excess", "0s"}, io.Discard, io.Discard)
	if code >= 0 || err != nil {
		t.Fatal(code, err)
	}
	for name, content := range map[string]string{"yaml": yamlFile, "json": jsonFile} {
		f, err := parseWithFile(t, content)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want.fs.VisitAll(func(w *flag.Flag) {
			if w.Name == "config" {
				return
			}
			if got := f.fs.Lookup(w.Name).Value.String(); got != w.Value.String() {
				t.Errorf("%s: -%s %q, want %q as on the command line", name, w.Name, got, w.Value.String())
			}
		})
		cfg, _, err := f.config(io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(cfg.Backends) != 2 || cfg.Policy.Delay != 25*time.Millisecond || cfg.Policy.Budget.Fraction() != 0.2 ||
			cfg.MaxInFlightRequests != 64 || !cfg.Policy.Gate.Disabled || cfg.Replica.Probation.MinExcess >= 0 {
			t.Errorf("%s: configuration %+v", name, cfg)
		}
	}
}

// Every flag of serve can be set in the file, with its own name as the
// key, whoever adds it: the file goes through the flag set.
func TestConfigFileTakesEveryFlag(t *testing.T) {
	var f serveFlags
	fs := newFlags("serve", "", io.Discard)
	f.register(fs)
	var b strings.Builder
	n := 0
	fs.VisitAll(func(fl *flag.Flag) {
		if fl.Name != "config" {
			fmt.Fprintf(&b, "%s: %q\n", fl.Name, fl.DefValue)
			n++
		}
	})
	if _, err := applyConfigFile(fs, writeTestFile(t, "all.yaml", b.String())); err != nil {
		t.Fatalf("a file setting all %d flags to their defaults: %v", n, err)
	}
	set := 0
	fs.Visit(func(*flag.Flag) { set++ })
	if set != n {
		t.Errorf("%d of %d flags set by the file", set, n)
	}
}

// Flags given on the command line win over the file, whatever their order.
func TestConfigFileCommandLineWins(t *testing.T) {
	content := "backends: [http://127.0.0.1:8081]\nhedge-delay: 10ms\nmax-requests: 5\n"
	f, err := parseWithFile(t, content, "-hedge-delay", "30ms")
	if err != nil {
		t.Fatal(err)
	}
	if f.delay != "30ms" || f.maxRequests != 5 || f.backends != "http://127.0.0.1:8081" {
		t.Errorf("delay %q, max-requests %d, backends %q; want the command line's 30ms, the file's 5 and backend", f.delay, f.maxRequests, f.backends)
	}
	// The flag given before -config wins too.
	path := writeTestFile(t, "t.yaml", content)
	f, _, err = loadServeFlags([]string{"-max-requests", "9", "-config", path}, io.Discard, io.Discard)
	if err != nil || f.maxRequests != 9 || f.delay != "10ms" {
		t.Errorf("-max-requests 9 before -config: %v, max-requests %d, delay %q", err, f.maxRequests, f.delay)
	}
}

// A key that is not a flag is an error naming its line (and the flag it
// may be a misspelling of); so are values a flag refuses, duplicates and
// shapes that are not flag settings.
func TestConfigFileErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"backends: [http://127.0.0.1:8081]\nlisten: 127.0.0.1:1\nhedge-dealy: 5ms\n", `tailgate.yaml:3: unknown key "hedge-dealy" (did you mean hedge-delay?)`},
		{"backends: [http://127.0.0.1:8081]\n\n\nfrobnicate: true\n", `tailgate.yaml:4: unknown key "frobnicate"`},
		{"backends: http://a\nconfig: other.yaml\n", `tailgate.yaml:2: unknown key "config"`},
		{"backends: http://a\nmax-requests: lots\n", `tailgate.yaml:2: max-requests: invalid value "lots"`},
		{"backends: http://a\ngate: yes\n", `tailgate.yaml:2: gate: invalid value "yes"`},
		{"backends: http://a\ntimeout:\n", `tailgate.yaml:2: timeout: no value`},
		{"backends: http://a\ntimeout: {a: 1}\n", `tailgate.yaml:2: timeout: want a value or a list of values, not a mapping`},
		{"backends: http://a\nbackends: http://b\n", `tailgate.yaml:2: "backends" given twice (first on line 1)`},
		{"backends:\n  - [http://a]\n", `tailgate.yaml:2: backends: line 2: a list item must be a single value`},
		{"- backends\n", `tailgate.yaml:1: want a mapping of flag names to values`},
		{"backends: [http://a\n", `tailgate.yaml: yaml: line 1:`},
	} {
		_, err := parseWithFile(t, tc.content)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.content, err, tc.want)
		}
	}
	// An empty file, or one of comments, sets nothing.
	if f, err := parseWithFile(t, "# nothing yet\n", "-backends", "http://127.0.0.1:1"); err != nil || f.backends != "http://127.0.0.1:1" {
		t.Errorf("empty file: %v", err)
	}
}

// serve reports a file's error as a usage error, exit 2, naming the line;
// a missing file too.
func TestServeConfigFileErrorExits2(t *testing.T) {
	path := writeTestFile(t, "tailgate.yaml", "backends: [http://127.0.0.1:1]\nlisten: 127.0.0.1:0\nadmin: ''\nhedge-delya: 5ms\n")
	code, _, stderr := runCmd("serve", "-config", path)
	if code != exitUsage || !strings.Contains(stderr, path+`:4: unknown key "hedge-delya" (did you mean hedge-delay?)`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCmd("serve", "-config", path+".missing")
	if code != exitUsage || !strings.Contains(stderr, path+".missing") {
		t.Errorf("missing file: exit %d, stderr %q", code, stderr)
	}
}

// A value that a flag takes but the configuration's checks refuse is
// located in the file as the file's own errors are; a duration without
// its unit says what a duration looks like; and every problem is said at
// once, a line each, by serve (exit 2).
func TestConfigFileCheckErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"backends: http://a:1\nhedge-fraction: 1.5\n", "tailgate.yaml:2: -hedge-fraction 1.5 must be within [0, 1]"},
		{"backends: http://a:1\n\nmax-conns: -1\n", "tailgate.yaml:3: -max-conns -1 must be at least 1"},
		{"backends: http://a:1\nlisten: 127.0.0.1:99999\n", `tailgate.yaml:2: -listen "127.0.0.1:99999": want host:port with a port within [0, 65535]`},
		{"backends: http://a:1\nlog-format: jsno\n", `tailgate.yaml:2: -log-format "jsno": want text or json`},
		{"backends: [dns+http://a]\ndns-refresh: 0s\n", "tailgate.yaml:2: -dns-refresh 0s must be positive"},
		{"backends: [http://a:1]\nbackend-cert: c.pem\n", "tailgate.yaml:2: -backend-cert and -backend-key go together"},
	} {
		f, err := parseWithFile(t, tc.content)
		if err != nil {
			t.Fatalf("%q: %v", tc.content, err)
		}
		if _, _, err := f.config(io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.content, err, tc.want)
		}
	}
	// The command line's value is not the file's: no line.
	f, err := parseWithFile(t, "backends: http://a:1\nhedge-fraction: 0.5\n", "-hedge-fraction", "2")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.config(io.Discard); err == nil || !strings.HasPrefix(err.Error(), "-hedge-fraction 2 must be") {
		t.Errorf("from the command line: %v", err)
	}
	if _, err := parseWithFile(t, "backends: http://a:1\ntimeout: 5\n"); err == nil ||
		err.Error() != `tailgate.yaml:2: timeout: invalid value "5": want a duration such as 5s or 250ms` {
		t.Errorf("timeout: 5: %v", err)
	}

	path := writeTestFile(t, "tailgate.yaml", "backends: [http://127.0.0.1:1]\nlisten: 127.0.0.1:99999\nlog-format: jsno\nmax-conns: -1\nhedge-fraction: 1.5\n")
	code, _, stderr := runCmd("serve", "-config", path, "-admin", "")
	for _, want := range []string{
		"tailgate serve: " + path + `:2: -listen "127.0.0.1:99999"`,
		"tailgate serve: " + path + `:3: -log-format "jsno"`,
		"tailgate serve: " + path + ":4: -max-conns -1",
		"tailgate serve: " + path + ":5: -hedge-fraction 1.5",
	} {
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr %q; want 2 with %q", code, stderr, want)
		}
	}
	code, _, stderr = runCmd("serve", "-backends", "http://127.0.0.1:1", "-timeout", "5")
	if code != exitUsage || !strings.Contains(stderr, "-timeout takes a duration such as 5s") {
		t.Errorf("-timeout 5: exit %d, stderr %q", code, stderr)
	}
}
