package kerneltest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Root is one test's own cgroup subtree.
type Root struct {
	// Path is the subtree's directory in the cpu hierarchy (v1) or the
	// cgroup2 mount (v2); pass it to cgroupfs as the pool root.
	Path string
	// Twins are the same relative path in the other v1 hierarchies the
	// test needs (cpuacct when mounted apart from cpu); empty in v2.
	Twins []string

	mode Mode
}

// Favour gives the test's cgroup the largest CPU weight (v1 cpu.shares
// 262144, v2 cpu.weight 10000) against the rest of the host. A throttled
// group's throttled time per period is the period less the wall time its
// quota took to spend, which other load on the same CPU stretches; with
// the top weight a busy loop runs whenever its quota allows, so throttled
// time follows the quota rather than the host's load.
func (r Root) Favour(t testing.TB) {
	t.Helper()
	file, weight := "cpu.shares", "262144"
	if r.mode == V2 {
		file, weight = "cpu.weight", "10000"
	}
	if err := os.WriteFile(filepath.Join(r.Path, file), []byte(weight), 0); err != nil {
		t.Fatalf("favour test cgroup: %v", err)
	}
}

var rootSeq atomic.Int64

// NewRoot creates a uniquely named, empty cgroup for the test under
// h.Parent (and its twin in each v1 hierarchy listed in need.Controllers)
// and removes it with t.Cleanup, also when the test fails: burners found
// inside are killed by PID, nothing else is moved or killed, and
// directories are removed children first. A process the test did not start
// that is left inside makes the cleanup fail the test.
func (h Host) NewRoot(t testing.TB, need Need) Root {
	t.Helper()
	name := fmt.Sprintf("poolagent-test-%d-%d-%s", os.Getpid(), rootSeq.Add(1), safeName(t.Name()))
	r := Root{Path: filepath.Join(h.Parent, name), mode: h.Mode}
	if h.Mode == V1 {
		for _, c := range need.Controllers {
			if d := h.Mounts.Twin(c, r.Path); c != "memory" && d != "" && d != r.Path {
				r.Twins = append(r.Twins, d)
			}
		}
	}
	for _, d := range append([]string{r.Path}, r.Twins...) {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("create test cgroup: %v", err)
		}
		// 0755 whatever the umask (the VM's is 077), so a test can act
		// as an unprivileged user below the root.
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatalf("create test cgroup: %v", err)
		}
		t.Cleanup(func() {
			if err := removeTree(d); err != nil {
				t.Errorf("remove test cgroup: %v", err)
			}
		})
	}
	return r
}

// Remove removes the test's subtree in every hierarchy now, children
// first, as its cleanup does: for a test of what happens when the cgroups
// under an open pool root go (the cleanup then finds nothing, or what the
// test made again at the same paths).
func (r Root) Remove(t testing.TB) {
	t.Helper()
	for _, d := range append([]string{r.Path}, r.Twins...) {
		if err := removeTree(d); err != nil {
			t.Fatalf("remove test cgroup: %v", err)
		}
	}
}

// safeName keeps the letters, digits, '-' and '_' of a test name, at most
// 40 of them, so the cgroup name says which test left it behind.
func safeName(s string) string {
	var b strings.Builder
	for _, c := range s {
		if b.Len() >= 40 {
			break
		}
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Cgroups returns the cgroup dir and every cgroup below it, parents
// first (lexical order within a directory); none when dir does not exist.
func Cgroups(dir string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return dirs, err
}

// removeTree removes the cgroup dir and every cgroup below it, children
// first. Burners inside are killed and reaped; any other process inside
// stays where it is and is reported, because its cgroup cannot be removed.
func removeTree(dir string) error {
	dirs, err := Cgroups(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		for _, pid := range procs(d) {
			if b := burnerByPID(pid); b != nil {
				b.kill()
				continue
			}
			errs = append(errs, fmt.Errorf("%s holds pid %d that the test did not start; left in place", d, pid))
		}
	}
	// WalkDir lists parents before children: remove in reverse.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := rmdirRetry(dirs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// procs lists the PIDs in the cgroup's cgroup.procs; none when unreadable.
func procs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// rmdirRetry removes an empty cgroup. A process that has just been reaped
// can keep its cgroup busy for a moment, so EBUSY is retried for a second.
func rmdirRetry(dir string) error {
	deadline := time.Now().Add(time.Second)
	for {
		err := syscall.Rmdir(dir)
		switch {
		case err == nil, errors.Is(err, syscall.ENOENT):
			return nil
		case errors.Is(err, syscall.EBUSY) && time.Now().Before(deadline):
			time.Sleep(10 * time.Millisecond)
		default:
			return fmt.Errorf("rmdir %s: %w", dir, err)
		}
	}
}

// CgroupPath returns dir, a cgroup directory, as /proc/PID/cgroup names
// it: the path below the mount of its hierarchy ("/poolagent-test-…", or
// below a delegated parent "/system.slice/poolagent-tests.scope/…").
func (h Host) CgroupPath(dir string) string {
	best := ""
	mounts := []string{h.Mounts.Unified}
	for _, m := range h.Mounts.V1 {
		mounts = append(mounts, m)
	}
	for _, m := range mounts {
		if m != "" && (dir == m || strings.HasPrefix(dir, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	return "/" + strings.TrimPrefix(strings.TrimPrefix(dir, best), "/")
}

// Enable turns on controllers in the cgroup.subtree_control of h.Parent,
// on cgroup v2, for a test that needs one its host does not enable at
// boot (the test VM's init enables cpu, memory and cpuset, not pids).
// A controller the parent does not offer (its cgroup.controllers) stops
// the test as Require does: a skip, or a failure with
// POOLAGENT_REQUIRE_KERNEL=1. Enabled controllers stay enabled: turning
// one off again fails while any cgroup below uses it, and costs nothing
// to leave. On cgroup v1 a controller is a hierarchy of its own, with
// nothing to turn on: Enable only insists that it is mounted (name it in
// Need.Controllers, so Require checks that it may be used).
func (h Host) Enable(t testing.TB, controllers ...string) {
	t.Helper()
	if h.Mode != V2 {
		for _, c := range controllers {
			if _, ok := h.Mounts.V1[c]; !ok {
				t.Fatalf("kerneltest.Enable: no v1 %s hierarchy; name %q in Need.Controllers so Require checks for it", c, c)
			}
		}
		return
	}
	have, err := os.ReadFile(filepath.Join(h.Parent, "cgroup.controllers"))
	if err != nil {
		t.Fatalf("enable %v: %v", controllers, err)
	}
	for _, c := range controllers {
		if !slices.Contains(strings.Fields(string(have)), c) {
			reason := fmt.Sprintf("%s is not in %s/cgroup.controllers %q", c, h.Parent, strings.TrimSpace(string(have)))
			if os.Getenv(EnvRequire) == "1" {
				t.Fatalf("real-kernel test cannot run: %s (%s=1 makes this a failure)", reason, EnvRequire)
			}
			t.Skipf("real-kernel test skipped: %s", reason)
		}
		if err := os.WriteFile(filepath.Join(h.Parent, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
			t.Fatalf("enable %s in %s: %v", c, h.Parent, err)
		}
	}
}
