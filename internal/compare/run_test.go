package compare

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/observe"
)

// TestMeasureRefuses runs Measure against fixture host roots, without root
// or a kernel: what it refuses, it refuses before making anything.
func TestMeasureRefuses(t *testing.T) {
	l, err := LayoutOf(parse(t, "cpus 1\ngroup app quota 20ms period 100ms\ntask job group app need 10ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	hybrid, _ := filepath.Abs("../../testdata/cgroupfs/mounts/hybrid")
	existing := t.TempDir()
	tests := []struct {
		name string
		opt  Options
		is   error
		want string
	}{
		{"no worker command", Options{HostRoot: hybrid}, nil, "compare: no worker command"},
		{"no cgroup mounts", Options{HostRoot: "../../testdata/cgroupfs/mounts/nocgroup", WorkerCommand: []string{"true"}}, cgroupfs.ErrNoController, "compare: cpu (mode unavailable)"},
		{"no cpu controller", Options{HostRoot: "../../testdata/cgroupfs/mounts/unified-nocpu", WorkerCommand: []string{"true"}}, cgroupfs.ErrNoController, "compare: cpu (mode unified)"},
		{"no /proc", Options{HostRoot: t.TempDir(), WorkerCommand: []string{"true"}}, os.ErrNotExist, "compare: detect cgroup mounts"},
		{"a root that exists", Options{HostRoot: hybrid, Root: existing, WorkerCommand: []string{"true"}}, nil,
			"compare: run 1: pool root " + existing + " exists; compare creates its own root and removes it afterwards"},
	}
	ks := observe.ReadKernelSettings(t.TempDir(), t.TempDir(), "") // the kernel's defaults
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opt.Kernel = ks
			_, err := Measure(t.Context(), "x", l, tt.opt)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("Measure: %v; want %q (is %v)", err, tt.want, tt.is)
			}
		})
	}
	if ents, err := os.ReadDir(existing); err != nil || len(ents) != 0 {
		t.Errorf("the existing root was touched: %v, %v", ents, err)
	}
}
