package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFrom(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0a1f3220ab12cd34ef56ab78cd90ef12ab34cd56"},
		{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want Info
	}{
		{"no build info", nil, false, Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version()}},
		{"tagged main module", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: Module, Version: "v1.2.0"}, Settings: vcs}, true,
			Info{Version: "v1.2.0", Revision: "0a1f3220ab12cd34ef56ab78cd90ef12ab34cd56", Time: "2026-01-02T03:04:05Z", Modified: true, GoVersion: "go1.26.1"}},
		{"devel, no VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: Module, Version: "(devel)"}}, true,
			Info{Version: "(devel)", Revision: Unknown, GoVersion: "go1.26.1"}},
		{"test binary: no main module", &debug.BuildInfo{GoVersion: "go1.26.1", Settings: vcs}, true,
			Info{Version: Unknown, Revision: Unknown, GoVersion: "go1.26.1"}},
		{"dependency at a tag: the main module's stamps are not ours", &debug.BuildInfo{GoVersion: "go1.26.1",
			Main: debug.Module{Path: "example.com/app", Version: "v3.0.0"}, Settings: vcs,
			Deps: []*debug.Module{{Path: "example.com/other", Version: "v0.1.0"}, {Path: Module, Version: "v1.3.0"}}}, true,
			Info{Version: "v1.3.0", Revision: Unknown, GoVersion: "go1.26.1"}},
		{"dependency at a pseudo-version", &debug.BuildInfo{GoVersion: "go1.26.1",
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: Module, Version: "v1.2.4-0.20260102030405-0a1f3220ab12"}}}, true,
			Info{Version: "v1.2.4-0.20260102030405-0a1f3220ab12", Revision: "0a1f3220ab12", Time: "2026-01-02T03:04:05Z", GoVersion: "go1.26.1"}},
		{"dependency replaced by a directory", &debug.BuildInfo{GoVersion: "go1.26.1",
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: Module, Version: "v1.0.0", Replace: &debug.Module{Path: "../tailgate"}}}}, true,
			Info{Version: "(devel)", Revision: Unknown, GoVersion: "go1.26.1"}},
	} {
		if got := From(tc.bi, tc.ok); got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestPseudo(t *testing.T) {
	for _, tc := range []struct{ v, rev, at string }{
		{"v0.0.0-20260102030405-0a1f3220ab12", "0a1f3220ab12", "2026-01-02T03:04:05Z"},
		{"v1.2.4-0.20260102030405-0a1f3220ab12+dirty", "0a1f3220ab12", "2026-01-02T03:04:05Z"},
		{"v2.0.0-rc.1.0.20260102030405-0a1f3220ab12+incompatible", "0a1f3220ab12", "2026-01-02T03:04:05Z"},
		{"v1.2.0", "", ""},
		{"v1.0.0-abcdefabcdef", "", ""},                // a prerelease tag, not a pseudo-version
		{"v0.0.0-20261302030405-0a1f3220ab12", "", ""}, // no 13th month
		{"(devel)", "", ""},
	} {
		rev, at, ok := pseudo(tc.v)
		if rev != tc.rev || at != tc.at || ok != (tc.rev != "") {
			t.Errorf("pseudo(%q) = %q, %q, %v; want %q, %q", tc.v, rev, at, ok, tc.rev, tc.at)
		}
	}
}

func TestString(t *testing.T) {
	full := Info{Version: "v1.2.0", Revision: "0a1f32", Time: "2026-01-02T03:04:05Z", Modified: true, GoVersion: "go1.26.1"}
	want := "tailgate v1.2.0, revision 0a1f32 (modified), committed 2026-01-02T03:04:05Z, go1.26.1 " + runtime.GOOS + "/" + runtime.GOARCH
	if got := full.String(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	bare := From(nil, false).String()
	if !strings.HasPrefix(bare, "tailgate unknown, revision unknown, go") || strings.Contains(bare, "committed") {
		t.Errorf("without build info: %q", bare)
	}
}

// Get reads the test binary's own information: whatever it holds, every
// label of the build_info gauge is non-empty.
func TestGetNeverEmpty(t *testing.T) {
	i := Get()
	if i.Version == "" || i.Revision == "" || i.GoVersion != runtime.Version() {
		t.Errorf("Get() = %+v", i)
	}
}
