// Package buildinfo reads what the Go toolchain recorded about the running
// binary (runtime/debug.ReadBuildInfo): Tailgate's module version, the VCS
// revision and commit time, and the Go version. The version command and
// the gateway's tailgate_build_info gauge both take it from here, so that
// they can never disagree.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Module is Tailgate's module path.
const Module = "github.com/tailgate-dev/tailgate"

// Unknown stands for what the binary does not record.
const Unknown = "unknown"

// Info describes the running binary's Tailgate.
type Info struct {
	// Version is the module version: a tag (v1.2.0), a pseudo-version
	// (v0.0.0-20260102030405-0a1f3220ab12, with "+dirty" when built from
	// a modified work tree), "(devel)" when the toolchain had none to
	// give, or Unknown without build information.
	Version string `json:"version"`
	// Revision is the VCS revision the binary was built from, Unknown when
	// none was stamped (go build -buildvcs=false, go run, a test binary).
	Revision string `json:"revision"`
	// Time is that revision's commit time, RFC 3339; empty when unknown.
	Time string `json:"time,omitempty"`
	// Modified says the work tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go version the binary was built with.
	GoVersion string `json:"goVersion"`
}

// Get returns the running binary's Info, read once.
func Get() Info { return get() }

var get = sync.OnceValue(func() Info { return From(debug.ReadBuildInfo()) })

// From returns the Info that bi records (ok false: none recorded). When
// Tailgate is a dependency of the main module rather than the main module
// itself, the VCS stamps describe the other module: Tailgate's revision
// and time then come from its pseudo-version, when it is one.
func From(bi *debug.BuildInfo, ok bool) Info {
	info := Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version()}
	if !ok || bi == nil {
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	var m *debug.Module
	if bi.Main.Path == Module {
		m = &bi.Main
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	} else {
		for _, d := range bi.Deps {
			if d.Path == Module {
				m = d
				if d.Replace != nil {
					m = d.Replace
				}
				break
			}
		}
	}
	if m == nil {
		return info
	}
	info.Version = m.Version
	if info.Version == "" {
		info.Version = "(devel)" // a replacement by a local directory has no version
	}
	if info.Revision == Unknown {
		if rev, at, ok := pseudo(info.Version); ok {
			info.Revision, info.Time = rev, at
		}
	}
	return info
}

// pseudo returns the revision prefix and commit time a pseudo-version
// carries (vX.Y.Z-[pre.]yyyymmddhhmmss-abcdefabcdef), ok false when v is
// not one.
func pseudo(v string) (rev, at string, ok bool) {
	v, _, _ = strings.Cut(v, "+") // +incompatible, +dirty
	i := strings.LastIndexByte(v, '-')
	if i < 0 || len(v)-i-1 != 12 || !isHex(v[i+1:]) {
		return "", "", false
	}
	rev, v = v[i+1:], v[:i]
	stamp := v[max(strings.LastIndexAny(v, "-."), 0)+1:]
	t, err := time.Parse("20060102150405", stamp)
	if err != nil {
		return "", "", false
	}
	return rev, t.Format(time.RFC3339), true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// String describes the binary in one line, as the version command prints
// it: "tailgate v1.2.0, revision 0a1f…, committed 2026-01-02T03:04:05Z,
// go1.26.0 linux/amd64"; parts not known are left out, the revision said
// unknown.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString("tailgate ")
	b.WriteString(i.Version)
	b.WriteString(", revision ")
	b.WriteString(i.Revision)
	if i.Modified {
		b.WriteString(" (modified)")
	}
	if i.Time != "" {
		b.WriteString(", committed ")
		b.WriteString(i.Time)
	}
	b.WriteString(", ")
	b.WriteString(i.GoVersion)
	b.WriteString(" ")
	b.WriteString(runtime.GOOS + "/" + runtime.GOARCH)
	return b.String()
}
