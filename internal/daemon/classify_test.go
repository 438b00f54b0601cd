package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/protocol"
)

// TestClassifierAppNameAndReject runs commands through `poolagent-run`
// without --pool: HAS_APP_NAME sees the base name of the executable the
// client found, and ACTION='reject' refuses with YDB's message before
// anything runs.
func TestClassifierAppNameAndReject(t *testing.T) {
	// sh is often a link (Debian: to dash): the app name is the
	// executable's, links resolved, as cgrules matches commands.
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	policy := policyOf(t, olapPool(2, 2, "")+`
GRANT USE ON RESOURCE POOL olap TO 'all-users@well-known';
CREATE RESOURCE POOL CLASSIFIER shells WITH (RANK=10, RESOURCE_POOL='olap', HAS_APP_NAME='`+filepath.Base(sh)+`');
CREATE RESOURCE POOL CLASSIFIER no_false WITH (RANK=20, ACTION='reject', HAS_APP_NAME='false');
`)
	d := startDaemon(t, Config{}, policy, newFakeCgroups(t), peer.SystemUsers{})
	bin := t.TempDir()
	if err := os.Symlink(sh, filepath.Join(bin, "linked-shell")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		status int
		pool   string // ResourcePoolId of the statistics; "" when refused
		stderr string
	}{
		{"app name matches", []string{"sh", "-c", "exit 0"}, 0, "olap", ""},
		{"other app: default", []string{"true"}, 0, "default", ""},
		{"link resolved", []string{filepath.Join(bin, "linked-shell"), "-c", "exit 0"}, 0, "olap", ""},
		{"rejected", []string{"false"}, client.ExitRefused, "",
			"poolagent-run: Request is rejected by classifier 'no_false' (rank=20)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
			if err != nil {
				t.Fatal(err)
			}
			defer stderr.Close()
			args := append([]string{"--socket", d.socket, "--stats", "json", "--"}, tc.args...)
			status := client.RunCommand("poolagent-run", args, nil, nil, stderr)
			out, err := os.ReadFile(stderr.Name())
			if err != nil {
				t.Fatal(err)
			}
			if status != tc.status {
				t.Fatalf("status %d, want %d; stderr %q", status, tc.status, out)
			}
			if tc.pool == "" {
				if string(out) != tc.stderr {
					t.Errorf("stderr %q, want %q", out, tc.stderr)
				}
				return
			}
			var st protocol.Stats
			if err := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &st); err != nil || st.ResourcePoolID != tc.pool {
				t.Errorf("statistics %q, want pool %s", out, tc.pool)
			}
		})
	}
}
