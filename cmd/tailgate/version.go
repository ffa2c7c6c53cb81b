package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/tailgate-dev/tailgate/internal/buildinfo"
)

const versionSynopsis = `Prints the Tailgate version this binary was built from, its VCS revision and
commit time, and the Go version, as the Go toolchain recorded them. A binary
built without VCS information (go run, -buildvcs=false) says "(devel)" or
"unknown" instead. The gateway exports the same as tailgate_build_info.`

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", versionSynopsis, stderr)
	asJSON := fs.Bool("json", false, "print JSON: version, revision, time, modified, goVersion")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	info := buildinfo.Get()
	if *asJSON {
		b, _ := json.Marshal(info)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintln(stdout, info)
	return exitOK
}
