package buildinfo_test

import (
	"fmt"
	"runtime/debug"

	"github.com/tailgate-dev/tailgate/internal/buildinfo"
)

func ExampleFrom() {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: buildinfo.Module, Version: "v1.2.0"},
		Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "0a1f3220ab12"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}},
	}
	i := buildinfo.From(bi, true)
	fmt.Println(i.Version, i.Revision, i.Time, i.GoVersion)
	// Output: v1.2.0 0a1f3220ab12 2026-01-02T03:04:05Z go1.26.0
}
