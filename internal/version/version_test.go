package version

import (
	"runtime"
	"testing"
)

func TestString(t *testing.T) {
	tests := []struct {
		name string
		info Info
		want string
	}{
		{"checkout build", Info{Version: "(devel)", Revision: "0123abc", GoVersion: "go1.26.8"}, "(devel), revision 0123abc, go1.26.8"},
		{"modified checkout", Info{Version: "(devel)", Revision: "0123abc", Modified: true, GoVersion: "go1.26.8"}, "(devel), revision 0123abc (modified), go1.26.8"},
		{"tagged, no VCS", Info{Version: "v1.2.0", GoVersion: "go1.26.8"}, "v1.2.0, go1.26.8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.info.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCurrent(t *testing.T) {
	info := Current()
	if info.Version == "" || info.GoVersion != runtime.Version() {
		t.Errorf("Current() = %+v, want a version and GoVersion %s", info, runtime.Version())
	}
}

// TestDescribed checks that the version scripts/install.sh stamps from
// `git describe` is the one reported.
func TestDescribed(t *testing.T) {
	defer func(old string) { described = old }(described)
	described = "v0.3.0-12-g8b189f7-dirty"
	if got := Current().Version; got != described {
		t.Errorf("Current().Version = %q, want the stamped %q", got, described)
	}
}
