// Package kerneltest gates and supports tests that need a real kernel's
// cgroups: it decides whether a test can run here (root, cgroup mode,
// controllers), creates a uniquely named cgroup subtree per test and removes
// it afterwards, starts CPU-burning child processes, and tells a wrong
// timing result from a machine too busy to judge one (Retry).
//
// Two environment variables steer the gate, a third where the tests'
// cgroups go, and a fourth which v1 hierarchies are the tests' own:
//
//	POOLAGENT_REQUIRE_KERNEL=1   a test that cannot run fails instead of skipping
//	POOLAGENT_KERNEL_MODE=v1|v2  the mode this run covers (the VM harness sets v2)
//	POOLAGENT_KERNEL_PARENT=DIR  create the test subtrees below DIR (a
//	                             delegated cgroup) instead of the hierarchy's root
//	POOLAGENT_VM_GUEST_CGROUP=v1 set by the busybox VM's init in its cgroup v1
//	                             boot (scripts/vm/init), whose v1 pids
//	                             hierarchy is the VM's own: only there do v1
//	                             tests get a pids hierarchy
//
// Every real-kernel test names the modes it can run in. A run covers one
// mode: POOLAGENT_KERNEL_MODE when set, otherwise the mode of the host's cpu
// controller. A test for another mode skips (it belongs to the other run);
// a test for this run's mode must run, and under POOLAGENT_REQUIRE_KERNEL=1
// anything that stops it is a failure. CI runs the host (v1 cpu) and a VM
// (v2), so a test that names at least one mode runs in at least one of them
// and can never skip in both.
//
// Real-kernel tests are named TestKernel*. scripts/test.sh runs them apart
// from the unit tests, once on the host and once under cgroup v2 in a VM
// (go test -run '^TestKernel' -exec scripts/vm/run.sh on every package that
// has such tests), and fails unless each of them passed in at least one of
// the two runs. A real-kernel test with another name runs on the host only.
package kerneltest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cgroupfs"
)

// Environment variables read by [Require].
const (
	// EnvRequire set to "1" turns a skip of a test for this run's mode into
	// a failure.
	EnvRequire = "POOLAGENT_REQUIRE_KERNEL"
	// EnvMode names the mode this run covers: "v1" or "v2". Empty: the
	// mode of the host's cpu controller.
	EnvMode = "POOLAGENT_KERNEL_MODE"
	// EnvParent names the directory tests create their subtrees under,
	// instead of the cpu hierarchy's root: a subtree systemd delegated to
	// the tests (scripts/vm/systemd/exec.sh runs them in a scope with
	// Delegate=yes), so they meet v2 as services have it.
	EnvParent = "POOLAGENT_KERNEL_PARENT"
	// EnvVMGuest is "v1" in the busybox VM's cgroup v1 boot, where init
	// mounted the v1 hierarchies itself (scripts/vm/init, run.sh's
	// POOLAGENT_VM_CGROUP=v1). A v1 test that needs the pids hierarchy
	// runs only there: a host's own pids hierarchy is not the tests' to
	// use.
	EnvVMGuest = "POOLAGENT_VM_GUEST_CGROUP"
)

// Mode is a cgroup version a test runs against.
type Mode string

const (
	// V1 is a cgroup v1 cpu hierarchy (legacy or hybrid host).
	V1 Mode = "v1"
	// V2 is the unified cgroup2 hierarchy with the cpu controller.
	V2 Mode = "v2"
)

// Need says what a real-kernel test needs.
type Need struct {
	// Modes the test can run in; a mode-aware test lists both.
	Modes []Mode
	// Controllers the test needs besides cpu, which is always needed:
	// "cpuacct" (v1 only, ignored in v2 where cpu.stat carries usage),
	// "memory" (v2 only: v1 memory cgroups are never tested, because the
	// test process may not leave the memory cgroup it started in) and
	// "pids" (v1: the pids hierarchy, only in the VM's v1 boot, see
	// [EnvVMGuest], elsewhere the test belongs to that run; v2: not
	// checked here, the test turns it on with [Host.Enable]).
	Controllers []string
}

// Host is the kernel a test runs against, as found by [Require].
type Host struct {
	// Mode is the mode the test runs in.
	Mode Mode
	// Mounts is the host's cgroup layout (from /proc/self/mountinfo).
	Mounts cgroupfs.Mounts
	// Parent is the directory under which the test creates its own cgroup
	// subtree: the v1 cpu hierarchy's root, or the cgroup2 mount.
	Parent string
}

// Require returns the host a test runs against, or stops the test: it skips
// when the test is for another run's mode, and when the test cannot run here
// (not root, cpu controller in another mode, a controller missing) it skips
// with the reason, or fails with it when POOLAGENT_REQUIRE_KERNEL=1.
func Require(t testing.TB, need Need) Host {
	t.Helper()
	if len(need.Modes) == 0 {
		t.Fatalf("kerneltest.Require: Need.Modes is empty; a test that names no mode would never run")
	}
	h, reason, other := check(need, os.Getenv(EnvMode), os.Getenv(EnvVMGuest) == string(V1), os.Geteuid(), "/")
	switch {
	case reason == "":
		return h
	case other:
		t.Skipf("real-kernel test for %v: %s", need.Modes, reason)
	case os.Getenv(EnvRequire) == "1":
		t.Fatalf("real-kernel test for %v cannot run: %s (%s=1 makes this a failure)", need.Modes, reason, EnvRequire)
	default:
		t.Skipf("real-kernel test for %v skipped: %s", need.Modes, reason)
	}
	return Host{}
}

// check is Require without the testing.TB: it returns the host, or why the
// test cannot run; other says the test belongs to another run's mode, so
// skipping is right even when a real kernel is required. vmV1 says this is
// the VM's v1 boot ([EnvVMGuest]).
func check(need Need, envMode string, vmV1 bool, euid int, root string) (h Host, reason string, other bool) {
	if envMode != "" && envMode != string(V1) && envMode != string(V2) {
		return Host{}, fmt.Sprintf("%s=%q: want v1, v2 or empty", EnvMode, envMode), false
	}
	if envMode != "" && !slices.Contains(need.Modes, Mode(envMode)) {
		return Host{}, fmt.Sprintf("this run covers %s (%s)", envMode, EnvMode), true
	}
	ms, err := cgroupfs.Detect(root)
	if err != nil {
		return Host{}, err.Error(), false
	}
	dir, v2, err := ms.Controller("cpu")
	if err != nil {
		return Host{}, fmt.Sprintf("no cpu controller: %v", err), false
	}
	hostMode := V1
	if v2 {
		hostMode = V2
	}
	if envMode == "" && !slices.Contains(need.Modes, hostMode) {
		return Host{}, fmt.Sprintf("this host's cpu controller is cgroup %s (%s); the %v run covers the test", hostMode, dir, need.Modes), true
	}
	if envMode != "" && Mode(envMode) != hostMode {
		return Host{}, fmt.Sprintf("%s=%s but this host's cpu controller is cgroup %s (%s)", EnvMode, envMode, hostMode, dir), false
	}
	if parent := os.Getenv(EnvParent); parent != "" {
		dir = parent
	}
	if euid != 0 {
		return Host{}, fmt.Sprintf("needs root to create cgroups under %s (euid %d)", dir, euid), false
	}
	h = Host{Mode: hostMode, Mounts: ms, Parent: dir}
	switch hostMode {
	case V1:
		for _, c := range need.Controllers {
			if c == "memory" {
				return Host{}, "v1 memory cgroups are never tested: the test process may not leave the memory cgroup it started in", false
			}
			if c == "pids" && !vmV1 {
				return Host{}, fmt.Sprintf("v1 pids cgroups are tested only in the busybox VM's cgroup v1 boot (%s=v1): this host's own pids hierarchy is not the tests' to use", EnvVMGuest), true
			}
			if _, ok := ms.V1[c]; !ok {
				return Host{}, fmt.Sprintf("no v1 %s hierarchy mounted", c), false
			}
		}
	case V2:
		sub, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		if err != nil {
			return Host{}, err.Error(), false
		}
		enabled := strings.Fields(string(sub))
		for _, c := range append([]string{"cpu"}, need.Controllers...) {
			if c == "cpuacct" || c == "pids" {
				continue
			}
			if !slices.Contains(enabled, c) {
				return Host{}, fmt.Sprintf("%s is not in %s/cgroup.subtree_control %q; enable it with +%s", c, dir, strings.TrimSpace(string(sub)), c), false
			}
		}
	}
	return h, "", false
}

// AsUser runs fn on an OS thread of its own that writes as user uid: its
// filesystem uid is uid, which makes the kernel drop CAP_DAC_OVERRIDE and
// the other file capabilities from the thread, and CAP_DAC_READ_SEARCH is
// raised again. So fn can read every file and traverse every directory
// (a test VM's root directory may be 0700) but meets the permission checks
// uid would on every write: a root test sees a root it may not write to.
// fn must do its file operations on the calling goroutine and must not
// call t.FailNow; the test needs root (call Require first).
func AsUser(t testing.TB, uid int, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		err := errors.New("fn ended its goroutine (t.FailNow inside fn?)")
		defer func() { done <- err }()
		runtime.LockOSThread()
		// The goroutine ends with the thread still locked, so the runtime
		// discards the thread and no other goroutine inherits its
		// credentials.
		if err = unix.Setfsuid(uid); err != nil {
			err = fmt.Errorf("setfsuid %d: %w", uid, err)
			return
		}
		if got, _ := unix.SetfsuidRetUid(-1); got != uid {
			err = fmt.Errorf("fsuid is %d after setfsuid %d (needs root)", got, uid)
			return
		}
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var caps [2]unix.CapUserData
		if err = unix.Capget(&hdr, &caps[0]); err != nil {
			err = fmt.Errorf("capget: %w", err)
			return
		}
		caps[0].Effective |= 1 << unix.CAP_DAC_READ_SEARCH
		if err = unix.Capset(&hdr, &caps[0]); err != nil {
			err = fmt.Errorf("raise CAP_DAC_READ_SEARCH: %w", err)
			return
		}
		fn()
		err = nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("run as uid %d: %v", uid, err)
	}
}
