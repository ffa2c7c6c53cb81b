package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/tailgate-dev/tailgate/internal/buildinfo"
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

// "tailgate help <command>" is "<command> -h", down to a lab experiment.
func TestHelpCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "serve"}, "Usage: tailgate serve [flags]"},
		{[]string{"help", "calc"}, "Usage: tailgate calc [flags]"},
		{[]string{"help", "lab"}, "Usage: tailgate lab <experiment>"},
		{[]string{"help", "lab", "compare"}, "Usage: tailgate lab compare [flags]"},
		{[]string{"help", "version"}, "Usage: tailgate version [flags]"},
		{[]string{"help", "help"}, "Tailgate tames tail latency"},
	} {
		code, stdout, stderr := runCmd(tc.args...)
		if code != exitOK || !strings.HasPrefix(stdout, tc.want) || stderr != "" {
			t.Errorf("%v: exit %d, stdout begins %q, stderr %q; want 0 and %q", tc.args, code, firstLine(stdout), stderr, tc.want)
		}
	}
	if code, _, stderr := runCmd("help", "frobnicate"); code != exitUsage || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("help frobnicate: %d %q", code, stderr)
	}
}

// A wrong flag or a stray argument is reported with one line pointing to
// -h, not followed by the whole usage that would scroll it away; for
// every command and experiment.
func TestBadFlagShortError(t *testing.T) {
	var cmds [][]string
	for _, c := range commands {
		if c.name != "lab" {
			cmds = append(cmds, []string{c.name})
		}
	}
	for name := range experiments {
		cmds = append(cmds, []string{"lab", name})
	}
	for _, cmd := range cmds {
		name := "tailgate " + strings.Join(cmd, " ")
		for _, bad := range [][]string{{"-frobnicate"}, {"stray"}} {
			code, stdout, stderr := runCmd(append(cmd, bad...)...)
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			want := `Run "` + name + ` -h" for usage.`
			if code != exitUsage || stdout != "" || len(lines) != 2 || lines[1] != want {
				t.Errorf("%s %v: exit %d, stderr:\n%s\nwant 2 lines: the error, then %q", name, bad, code, stderr, want)
			}
		}
	}
	// -h given the flag package's way still prints the usage, on stdout.
	if code, stdout, _ := runCmd("calc", "-h=true"); code != exitOK || !strings.HasPrefix(stdout, "Usage: tailgate calc") {
		t.Errorf("calc -h=true: %d %q", code, firstLine(stdout))
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func TestVersion(t *testing.T) {
	want := buildinfo.Get().String() + "\n"
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		if code, stdout, stderr := runCmd(args...); code != exitOK || stdout != want || stderr != "" {
			t.Errorf("%v: %d %q %q, want %q", args, code, stdout, stderr, want)
		}
	}
	code, stdout, _ := runCmd("version", "-json")
	var got buildinfo.Info
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitOK || got != buildinfo.Get() {
		t.Errorf("version -json: %d %v %q", code, err, stdout)
	}
	// A test binary records no VCS revision: it says so rather than
	// printing an empty field.
	if !strings.Contains(want, "revision ") || strings.Contains(want, "revision ,") {
		t.Errorf("version line %q", want)
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
	for _, want := range []string{"1. straggler", "2. sweep", "(95% CI)", "3. overload", "hedging, budget and gate off", "Report with plots: " + html} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	// Where the knee is, or that there is none: on a machine busy enough
	// (a test run beside this one) no delay may beat no hedging's p99 in
	// so short a run, and the demo says so rather than name a knee.
	if strings.Count(stdout, "<- knee")+strings.Count(stdout, "There is no knee: no delay beat no hedging's p99") != 1 {
		t.Errorf("demo output names no knee, nor says there is none:\n%s", stdout)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), "<svg"); n != 5 {
		t.Errorf("report has %d plots, want 5 (CDF, frontier, 3 overload)", n)
	}
}
