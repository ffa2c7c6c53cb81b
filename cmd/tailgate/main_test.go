package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the real main when re-executed by a test that needs a
// separate process (signals), and otherwise the tests, checking for leaks.
func TestMain(m *testing.M) {
	if os.Getenv("TAILGATE_TEST_MAIN") == "1" {
		os.Args = append([]string{"tailgate"}, os.Args[1:]...)
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

func runCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsage(t *testing.T) {
	if code, _, stderr := runCmd(); code != exitUsage || !strings.Contains(stderr, "Commands:") {
		t.Errorf("no args: %d %q", code, stderr)
	}
	if code, stdout, _ := runCmd("help"); code != exitOK || !strings.Contains(stdout, "calc") || !strings.Contains(stdout, "demo") {
		t.Errorf("help: %d %q", code, stdout)
	}
	if code, _, stderr := runCmd("frobnicate"); code != exitUsage || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown: %d %q", code, stderr)
	}
	for _, cmd := range []string{"calc", "demo"} {
		code, stdout, _ := runCmd(cmd, "-h")
		if code != exitOK || !strings.Contains(stdout, "Usage: tailgate "+cmd) || !strings.Contains(stdout, "-json") {
			t.Errorf("%s -h: %d %q", cmd, code, stdout)
		}
	}
}

func TestCalc(t *testing.T) {
	code, stdout, _ := runCmd("calc", "-fanout", "100", "-p", "0.01")
	if code != exitOK || !strings.Contains(stdout, "63.4% of requests are slow") {
		t.Errorf("calc: %d %q", code, stdout)
	}
	code, stdout, _ = runCmd("calc", "-fanout", "60", "-target", "0.99")
	if code != exitOK || !strings.Contains(stdout, "must be fast at p99.98") || !strings.Contains(stdout, "p <= 0.00017") {
		t.Errorf("calc -target: %d %q", code, stdout)
	}
	code, stdout, _ = runCmd("calc", "-fanout", "60", "-wait", "57", "-json", "-table", "10,100")
	var rep calcReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != exitOK {
		t.Fatalf("calc -json: %d %v %q", code, err, stdout)
	}
	if rep.WaitSlowShare == nil || *rep.WaitSlowShare > 0.004 || len(rep.Table) != 2 || rep.Table[1].Fanout != 100 {
		t.Errorf("calc -json: %+v", rep)
	}
}

func TestCalcRejects(t *testing.T) {
	bad := [][]string{
		{"-fanout", "0"}, {"-fanout", "-5"}, {"-p", "1.5"}, {"-p", "-0.1"}, {"-p", "NaN"},
		{"-target", "0"}, {"-target", "2"}, {"-wait", "101"}, {"-table", "1,x"}, {"-table", "0"},
		{"-fanout", "ten"}, {"-nope"}, {"stray"},
	}
	for _, args := range bad {
		code, _, stderr := runCmd(append([]string{"calc"}, args...)...)
		if code != exitUsage || stderr == "" {
			t.Errorf("calc %v: exit %d, stderr %q; want 2 with a message", args, code, stderr)
		}
	}
}

func TestDemoRejects(t *testing.T) {
	for _, args := range [][]string{{"-html", ""}, {"-html", "/"}, {"-html", "/nonexistent-dir/r.html"}, {"-seed", "x"}, {"-nope"}, {"stray"}} {
		code, _, stderr := runCmd(append([]string{"demo"}, args...)...)
		if code != exitUsage || stderr == "" {
			t.Errorf("demo %v: exit %d, stderr %q; want 2 with a message", args, code, stderr)
		}
	}
}

func TestDemoRuns(t *testing.T) {
	html := t.TempDir() + "/report.html"
	code, stdout, stderr := runCmd("demo", "-short", "-html", html)
	if code != exitOK {
		t.Fatalf("demo: %d %q", code, stderr)
	}
	for _, want := range []string{"1. straggler", "2. sweep", "<- knee", "3. overload", "hedging, budget and gate off", "Report with plots: " + html} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), "<svg"); n != 5 {
		t.Errorf("report has %d plots, want 5 (CDF, frontier, 3 overload)", n)
	}
}
