package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
)

// TestApplyArgs: bad arguments are refused with what would be accepted,
// before any cgroup is read or written.
func TestApplyArgs(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.sql")
	if err := os.WriteFile(bad, []byte("CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=170);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	node := []string{"--cpus", "4", "--memory", "1073741824"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no pool file", []string{"apply"}, "--pools is required"},
		{"zero cpus", []string{"apply", "--pools", bad, "--cpus", "0", "--memory", "1"}, "--cpus 0 is not accepted"},
		{"ambiguous memory", []string{"apply", "--pools", bad, "--cpus", "1", "--memory", "16G"}, `--memory "16G": suffix "G" is ambiguous`},
		{"bad period", []string{"apply", "--pools", bad, "--period", "2s"}, "--period 2s is not accepted"},
		{"missing pool file", append([]string{"apply", "--pools", "/nonexistent.sql"}, node...), "read pool file"},
		{"invalid pool file", append([]string{"apply", "--pools", bad}, node...), "nothing applied"},
		{"root outside the cgroup mount", append([]string{"apply", "--pools", "../../testdata/pools/seed.sql", "--root", t.TempDir()}, node...), "bad pool root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runApp(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestKernelApplyCommand is the operator's view on the real kernel:
// `poolagent apply --pools testdata/pools/seed.sql --root DIR` creates the
// tree with the planned values, a second apply reports 0 writes, and
// --dry-run prints a change without making it.
func TestKernelApplyCommand(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}
	h := kerneltest.Require(t, need)
	root := h.NewRoot(t, need)
	args := func(pools string, extra ...string) []string {
		return append([]string{"apply", "--pools", pools, "--root", root.Path, "--cpus", "10", "--memory", "17179869184"}, extra...)
	}
	quota, value := "cpu.cfs_quota_us", `write "700000" to `
	if h.Mode == kerneltest.V2 {
		quota, value = "cpu.max", `write "700000 100000" to `
	}
	out, stderr, err := runApp(t, args("../../testdata/pools/seed.sql")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	t.Logf("first apply:\n%s", out)
	if !strings.Contains(out, value+filepath.Join(root.Path, "olap", quota)) {
		t.Errorf("first apply does not report the olap quota:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(root.Path, "olap", quota)); err != nil || !strings.HasPrefix(string(b), "700000") {
		t.Errorf("olap/%s = %q, %v", quota, b, err)
	}
	out, _, err = runApp(t, args("../../testdata/pools/seed.sql")...)
	if err != nil || !strings.HasSuffix(out, ": 0 writes\n") {
		t.Errorf("second apply: %v\n%s", err, out)
	}

	changed := filepath.Join(t.TempDir(), "changed.sql")
	if err := os.WriteFile(changed, []byte("CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=30);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = runApp(t, args(changed, "--dry-run")...)
	if err != nil || !strings.Contains(out, "dry run: 1 write planned") || !strings.Contains(out, "300000") {
		t.Errorf("dry run: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(root.Path, "olap", quota)); !strings.HasPrefix(string(b), "700000") {
		t.Errorf("the dry run wrote olap/%s = %q", quota, b)
	}

	// While a daemon owns the root, apply writes nothing and names it.
	tree, err := cgroupfs.Open(h.Mounts, root.Path, cgroupfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	release, err := tree.Own()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_, _, err = runApp(t, args(changed)...)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("owned by process %d (", os.Getpid())) || !strings.Contains(err.Error(), "nothing written") {
		t.Errorf("apply on an owned root: %v; want a refusal naming process %d", err, os.Getpid())
	}
	if b, _ := os.ReadFile(filepath.Join(root.Path, "olap", quota)); !strings.HasPrefix(string(b), "700000") {
		t.Errorf("apply on an owned root wrote olap/%s = %q", quota, b)
	}
}
