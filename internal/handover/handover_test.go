package handover

import (
	"slices"
	"testing"

	"github.com/poolagent/poolagent/internal/client"
)

func TestArgv0IsClients(t *testing.T) {
	if argv0 != client.HandedOver {
		t.Fatalf("argv0 %q, client.HandedOver %q: poolagent-run would not know it was handed over", argv0, client.HandedOver)
	}
}

func TestParseCmdline(t *testing.T) {
	for _, tt := range []struct {
		cmdline string
		args    []string
		ok      bool
	}{
		{"poolagent\x00run\x00--\x00true\x00", []string{"--", "true"}, true},
		{"/usr/local/bin/poolagent\x00run\x00", []string{}, true},
		{"poolagent\x00run\x00\x00x y\x00", []string{"", "x y"}, true},
		{"poolagent\x00pools\x00", nil, false},
		{"poolagent\x00", nil, false},
		{"poolagent\x00run\x00--generate-bash-completion\x00", nil, false},
		{"poolagent\x00run\x00cut short", nil, false},
		{"", nil, false},
	} {
		args, ok := parseCmdline([]byte(tt.cmdline))
		if ok != tt.ok || !slices.Equal(args, tt.args) {
			t.Errorf("parseCmdline(%q) = %q, %v; want %q, %v", tt.cmdline, args, ok, tt.args, tt.ok)
		}
	}
}

// FuzzParseCmdline: whatever the command line, parseCmdline gives back
// exactly the NUL-ended arguments after "run".
func FuzzParseCmdline(f *testing.F) {
	f.Add([]byte("poolagent\x00run\x00--pool\x00olap\x00--\x00make\x00-j4\x00"))
	f.Add([]byte("poolagent\x00daemon\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		args, ok := parseCmdline(b)
		if !ok {
			return
		}
		var again []byte
		for _, a := range append([]string{"x", "run"}, args...) {
			again = append(append(again, a...), 0)
		}
		if got, ok := parseCmdline(again); !ok || !slices.Equal(got, args) {
			t.Fatalf("parseCmdline(%q) = %q; the same arguments again gave %q, %v", b, args, got, ok)
		}
	})
}
