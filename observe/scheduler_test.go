package observe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadScheduler reads literal sched_ext files from a fixture tree.
func TestReadScheduler(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  Scheduler
	}{
		{"no sched_ext in the kernel", nil, Scheduler{}},
		{"sched_ext built, nothing loaded", map[string]string{"state": "disabled\n", "switch_all": "0\n"}, Scheduler{ExtState: "disabled"}},
		{"scx_rusty for every task", map[string]string{"state": "enabled\n", "root/ops": "rusty\n", "switch_all": "1\n"},
			Scheduler{ExtState: "enabled", ExtOps: "rusty", ExtSwitchAll: true}},
		{"partial switch", map[string]string{"state": "enabled\n", "root/ops": "simple\n", "switch_all": "0\n"},
			Scheduler{ExtState: "enabled", ExtOps: "simple"}},
		{"loading", map[string]string{"state": "enabling\n"}, Scheduler{ExtState: "enabling"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := t.TempDir()
			for name, body := range tt.files {
				path := filepath.Join(sys, "kernel/sched_ext", name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := ReadScheduler(sys); got != tt.want {
				t.Errorf("ReadScheduler = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseSchedExtState(t *testing.T) {
	for _, ok := range []string{"disabled\n", "enabling\n", "enabled\n", "disabling\n", "enabled"} {
		if _, err := ParseSchedExtState([]byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	_, err := ParseSchedExtState([]byte("on\n"))
	if err == nil || err.Error() != `state "on" not understood (accepted: disabled, enabling, enabled, disabling)` {
		t.Errorf("bad state: %v", err)
	}
}

// TestSchedulerCaveat is the message test: nothing to say for the fair
// class; otherwise one sentence naming the BPF scheduler, how much it
// takes, and what the models assume.
func TestSchedulerCaveat(t *testing.T) {
	tests := []struct {
		s    Scheduler
		want string
	}{
		{Scheduler{}, ""},
		{Scheduler{ExtState: "disabled"}, ""},
		{Scheduler{ExtState: "enabled", ExtOps: "rusty", ExtSwitchAll: true},
			`sched_ext is enabled: the BPF scheduler "rusty" schedules every task and enforces cpu.max its own way; ` +
				"the throttling models assume the kernel's fair class (CFS/EEVDF) enforcing cpu.max, so predictions here may not match what this host does"},
		{Scheduler{ExtState: "enabling"},
			"sched_ext is enabling: a BPF scheduler schedules the tasks that ask for SCHED_EXT and enforces cpu.max its own way; " +
				"the throttling models assume the kernel's fair class (CFS/EEVDF) enforcing cpu.max, so predictions here may not match what this host does"},
		{Scheduler{Err: "/sys/kernel/sched_ext/state: permission denied"},
			"cannot tell which scheduler enforces cpu.max (/sys/kernel/sched_ext/state: permission denied); " +
				"the throttling models assume the kernel's fair class (CFS/EEVDF) enforcing cpu.max, so predictions here may not match what this host does"},
	}
	for _, tt := range tests {
		if got := tt.s.Caveat(); got != tt.want {
			t.Errorf("%+v:\n got %q\nwant %q", tt.s, got, tt.want)
		}
	}
	if got := ReadScheduler(writeTree(t, "enabled\n", "bad\n")).Caveat(); !strings.HasPrefix(got, "sched_ext is enabled: the BPF scheduler \"bad\"") {
		t.Errorf("caveat from files: %q", got)
	}
	if got := ReadScheduler(writeTree(t, "weird\n", "")).Caveat(); !strings.Contains(got, `cannot tell which scheduler enforces cpu.max (`) || !strings.Contains(got, `state "weird" not understood`) {
		t.Errorf("caveat for an unknown state: %q", got)
	}
}

// writeTree makes a /sys with sched_ext's state and, unless empty, the
// root scheduler's name.
func writeTree(t *testing.T, state, ops string) string {
	t.Helper()
	sys := t.TempDir()
	dir := filepath.Join(sys, "kernel/sched_ext")
	if err := os.MkdirAll(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	if ops != "" {
		if err := os.WriteFile(filepath.Join(dir, "root/ops"), []byte(ops), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return sys
}
