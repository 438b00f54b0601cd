// Package version says which build of poolagent is running, from what the
// Go toolchain records in every binary (runtime/debug.ReadBuildInfo): the
// module version, the VCS revision it was built from and the Go release.
// It links only the standard library, so the slim client can use it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info is one build's identity.
type Info struct {
	// Version is the build's version: what scripts/install.sh stamped
	// from `git describe`, else the main module's version as the Go
	// toolchain records it: a tag such as "v1.2.0" when installed with
	// `go install …@version`, a pseudo-version such as
	// "v0.0.0-20261202021356-8b189f71dacc" for a `go build` in a clone,
	// "(devel)" when it recorded none (-buildvcs=false, go run).
	Version string
	// Revision is the VCS commit the binary was built from, "" when the
	// build recorded none (go run, go test, a build outside a checkout).
	Revision string
	// Modified is true when the checkout had uncommitted changes.
	Modified bool
	// GoVersion is the Go release that built the binary, e.g. "go1.26.8".
	GoVersion string
}

// described is `git describe --tags --always --dirty` of the checkout the
// binary was built from, such as "v0.3.0-12-g8b189f7" or "8b189f7-dirty":
// scripts/install.sh sets it with -ldflags "-X
// github.com/poolagent/poolagent/internal/version.described=…", so a
// binary says which commit it is even where the toolchain recorded no VCS
// information (-buildvcs=false, a build from a copy of the tree).
var described string

// Current returns the running binary's Info.
func Current() Info {
	info := Info{Version: "(devel)", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok && bi.Main.Version != "" {
		info.Version = bi.Main.Version
	}
	if described != "" {
		info.Version = described
	}
	if !ok {
		return info
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String renders i for --version: "(devel), revision 0123abc (modified),
// go1.26.8".
func (i Info) String() string {
	s := i.Version
	if i.Revision != "" {
		s += ", revision " + i.Revision
		if i.Modified {
			s += " (modified)"
		}
	}
	return fmt.Sprintf("%s, %s", s, i.GoVersion)
}
