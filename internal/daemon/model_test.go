package daemon

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/peer"
)

// TestModelCaveatsAtStart: on a host the throttling model does not cover
// (the literal host trees of observe/testdata/host), the daemon says so
// once in its log at start and its metrics carry the reasons; on a covered
// host it says nothing.
func TestModelCaveatsAtStart(t *testing.T) {
	for tree, want := range map[string]string{"scx-rusty": "sched_ext", "old": "kernel_release,no_cfs_bandwidth,nohz_full,skew_tick", "fair": ""} {
		t.Run(tree, func(t *testing.T) {
			var log bytes.Buffer
			srv, err := New(Config{Socket: filepath.Join(t.TempDir(), "agent.sock"), HostRoot: filepath.Join("../../observe/testdata/host", tree),
				Log: slog.New(slog.NewTextHandler(&log, nil))}, policyOf(t, ""), newFakeCgroups(t), peer.SystemUsers{}, &fixedLoad{})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := srv.MetricsSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			if got := snap.Host.ModelCaveats.Reasons(); got != want {
				t.Errorf("metrics' reasons %q, want %q", got, want)
			}
			said := strings.Count(log.String(), "the throttling prediction may not match this host: ")
			switch {
			case want == "" && said != 0:
				t.Errorf("a covered host: the log says it %d times:\n%s", said, log.String())
			case want != "" && (said != 1 || !strings.Contains(log.String(), "reasons="+want)):
				t.Errorf("the log says it %d times, want once with reasons=%s:\n%s", said, want, log.String())
			}
		})
	}
}
