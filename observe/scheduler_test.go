package observe

import (
	"os"
	"path/filepath"
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

// TestSchedulerCaveat is the message test of the scheduler's clause
// (TestReadModelHost pins the sentence it ends up in): nothing to say for
// the fair class; otherwise the BPF scheduler, how much it takes, and
// what the models assume.
func TestSchedulerCaveat(t *testing.T) {
	tests := []struct {
		s    Scheduler
		want string
	}{
		{Scheduler{}, ""},
		{Scheduler{ExtState: "disabled"}, ""},
		{Scheduler{ExtState: "enabled", ExtOps: "rusty", ExtSwitchAll: true},
			`sched_ext is enabled: the BPF scheduler "rusty" schedules every task and enforces cpu.max its own way` + fairClass},
		{Scheduler{ExtState: "enabling"},
			"sched_ext is enabling: a BPF scheduler schedules the tasks that ask for SCHED_EXT and enforces cpu.max its own way" + fairClass},
		{Scheduler{Err: "/sys/kernel/sched_ext/state: permission denied"},
			"cannot tell which scheduler enforces cpu.max (/sys/kernel/sched_ext/state: permission denied)" + fairClass},
	}
	for _, tt := range tests {
		if got := tt.s.Caveat(); got != tt.want {
			t.Errorf("%+v:\n got %q\nwant %q", tt.s, got, tt.want)
		}
	}
}
