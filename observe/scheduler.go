package observe

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Scheduler is what this host's kernel schedules the pools' tasks with,
// as far as it bears on the throttling models: both assume the kernel's
// fair class (CFS, EEVDF since Linux 6.6), which enforces cpu.max per CPU
// with a period timer and runtime slices. A BPF scheduler loaded through
// sched_ext (Linux 6.12 and later) enforces cpu.max its own way (for
// scx_rusty and its kin, one BPF timer for the whole host, and only
// eventually: sched-ext/scx issue 3026), so neither model covers it.
type Scheduler struct {
	// ExtState is /sys/kernel/sched_ext/state: "disabled", "enabling",
	// "enabled" or "disabling"; "" when the kernel has no sched_ext.
	ExtState string
	// ExtOps is the root BPF scheduler's name,
	// /sys/kernel/sched_ext/root/ops, e.g. "rusty"; "" when none is loaded.
	ExtOps string
	// ExtSwitchAll is /sys/kernel/sched_ext/switch_all: true when every
	// task is moved to the BPF scheduler, false when only tasks that ask
	// for SCHED_EXT are.
	ExtSwitchAll bool
	// Err says what could not be read or understood; "" when all was.
	Err string
}

// ReadScheduler reads the sched_ext files below sysRoot (normally /sys).
// A kernel without sched_ext has no /sys/kernel/sched_ext: that is the
// fair class, not an error.
func ReadScheduler(sysRoot string) Scheduler {
	dir := filepath.Join(sysRoot, "kernel/sched_ext")
	b, err := os.ReadFile(filepath.Join(dir, "state"))
	if os.IsNotExist(err) {
		return Scheduler{}
	}
	if err != nil {
		return Scheduler{Err: err.Error()}
	}
	s := Scheduler{}
	if s.ExtState, err = ParseSchedExtState(b); err != nil {
		return Scheduler{Err: fmt.Sprintf("%s: %v", filepath.Join(dir, "state"), err)}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "root/ops")); err == nil {
		s.ExtOps = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "switch_all")); err == nil {
		s.ExtSwitchAll = strings.TrimSpace(string(b)) == "1"
	}
	return s
}

// schedExtStates are the values /sys/kernel/sched_ext/state takes
// (kernel/sched/ext.c, scx_enable_state_str).
var schedExtStates = []string{"disabled", "enabling", "enabled", "disabling"}

// ParseSchedExtState parses /sys/kernel/sched_ext/state, one word and a
// newline: "enabled\n". Accepted: disabled, enabling, enabled, disabling.
func ParseSchedExtState(b []byte) (string, error) {
	s := strings.TrimSpace(string(b))
	for _, ok := range schedExtStates {
		if s == ok {
			return s, nil
		}
	}
	if len(s) > 32 {
		s = s[:32] + "…"
	}
	return "", fmt.Errorf("state %q not understood (accepted: %s)", s, strings.Join(schedExtStates, ", "))
}

// Caveat says in one plain clause why the throttling models may not hold
// on this host's scheduler, or "" when it is the fair class they model.
func (s Scheduler) Caveat() string {
	const assume = "where the models assume the kernel's fair class (CFS/EEVDF)"
	switch {
	case s.Err != "":
		return fmt.Sprintf("cannot tell which scheduler enforces cpu.max (%s), %s", s.Err, assume)
	case s.ExtState == "" || s.ExtState == "disabled":
		return ""
	}
	who := "a BPF scheduler"
	if s.ExtOps != "" {
		who = fmt.Sprintf("the BPF scheduler %q", s.ExtOps)
	}
	what := "schedules every task"
	if !s.ExtSwitchAll {
		what = "schedules the tasks that ask for SCHED_EXT"
	}
	return fmt.Sprintf("sched_ext is %s: %s %s and enforces cpu.max its own way, %s", s.ExtState, who, what, assume)
}
