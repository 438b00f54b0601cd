package compare

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
)

// TestMeasureRefuses runs Measure against fixture host roots, without root
// or a kernel: what it refuses, it refuses before making anything.
func TestMeasureRefuses(t *testing.T) {
	l, err := LayoutOf(parse(t, "cpus 1\ngroup app quota 20ms period 100ms\ntask job group app need 10ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	hybrid, _ := filepath.Abs("../testdata/cgroupfs/mounts/hybrid")
	existing := t.TempDir()
	tests := []struct {
		name string
		opt  Options
		is   error
		want string
	}{
		{"no worker command", Options{HostRoot: hybrid}, nil, "compare: no worker command"},
		{"no cgroup mounts", Options{HostRoot: "../testdata/cgroupfs/mounts/nocgroup", WorkerCommand: []string{"true"}}, cgroupfs.ErrNoController, "compare: cpu (mode unavailable)"},
		{"no cpu controller", Options{HostRoot: "../testdata/cgroupfs/mounts/unified-nocpu", WorkerCommand: []string{"true"}}, cgroupfs.ErrNoController, "compare: cpu (mode unified)"},
		{"no /proc", Options{HostRoot: t.TempDir(), WorkerCommand: []string{"true"}}, os.ErrNotExist, "compare: detect cgroup mounts"},
		{"a root that exists", Options{HostRoot: hybrid, Root: existing, WorkerCommand: []string{"true"}}, nil,
			"compare: run 1: pool root " + existing + " exists; compare creates its own root and removes it afterwards"},
	}
	ks := ReadKernelSettings(t.TempDir(), t.TempDir(), "") // the kernel's defaults
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

// TestHostInfo reads the load and the CPU model from a fixture /proc.
func TestHostInfo(t *testing.T) {
	proc := t.TempDir()
	for name, data := range map[string]string{
		"loadavg": "0.52 0.40 0.30 1/100 1234\n",
		"cpuinfo": "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: QEMU TCG CPU version 2.5+\n\n",
	} {
		if err := os.WriteFile(filepath.Join(proc, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := Load1(proc); got != 0.52 {
		t.Errorf("Load1 = %v, want 0.52", got)
	}
	if !Emulated(proc) {
		t.Error("Emulated = false for QEMU TCG CPU")
	}
	empty := t.TempDir()
	if got := Load1(empty); got != -1 {
		t.Errorf("Load1 without loadavg = %v, want -1", got)
	}
	if Emulated(empty) {
		t.Error("Emulated without cpuinfo = true")
	}
}
