package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
)

// TestKernelTeardown: teardown is refused while a daemon owns the root and
// stops at a pool a process is in, saying so; once the process is gone it
// removes the root and everything below it in every hierarchy, and a
// second teardown finds nothing to do.
func TestKernelTeardown(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}
	h := kerneltest.Require(t, need)
	root := h.NewRoot(t, need)
	// The pool root is apply's to make, as the default's is.
	pools, twins := applySeedBelow(t, root)

	tree, err := cgroupfs.Open(h.Mounts, pools, cgroupfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	release, err := tree.Own()
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = runApp(t, "teardown", "--root", pools)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("owned by process %d (", os.Getpid())) || !strings.Contains(err.Error(), "nothing removed") {
		t.Errorf("teardown of an owned root: %v; want a refusal naming process %d", err, os.Getpid())
	}
	release()
	tree.Close()

	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleep.Process.Kill()
	if err := os.WriteFile(filepath.Join(pools, "olap", "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	_, _, err = runApp(t, "teardown", "--root", pools)
	if err == nil || !strings.Contains(err.Error(), "a process is still in it") {
		t.Errorf("teardown with a process in olap: %v; want a refusal saying a process is in it", err)
	}
	sleep.Process.Kill()
	sleep.Wait()

	out, stderr, err := runApp(t, "teardown", "--root", pools)
	if err != nil {
		t.Fatalf("teardown: %v\n%s", err, stderr)
	}
	if want := "removed the pool root " + pools + " and every cgroup below it\n"; out != want {
		t.Errorf("teardown printed %q, want %q", out, want)
	}
	for _, dir := range append([]string{pools}, twins...) {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s after teardown: %v, want it gone", dir, err)
		}
	}
	if out, _, err := runApp(t, "teardown", "--root", pools); err != nil || !strings.HasPrefix(out, "no pool root at ") {
		t.Errorf("second teardown: %v, %q", err, out)
	}
}

// applySeedBelow applies the seed pools with the pool root "pools" below
// the test's root, for apply to make, and returns its path and its twins
// in the other v1 hierarchies.
func applySeedBelow(t *testing.T, root kerneltest.Root) (pools string, twins []string) {
	t.Helper()
	pools = filepath.Join(root.Path, "pools")
	// On v2 the test's root hands its controllers down (v1 has no
	// cgroup.controllers).
	if have, err := os.ReadFile(filepath.Join(root.Path, "cgroup.controllers")); err == nil {
		for _, c := range strings.Fields(string(have)) {
			if err := os.WriteFile(filepath.Join(root.Path, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
				t.Fatalf("enable %s below the test's root: %v", c, err)
			}
		}
	}
	if _, stderr, err := runApp(t, "apply", "--pools", "../../testdata/pools/seed.sql", "--root", pools, "--cpus", "10", "--memory", "17179869184"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	for _, d := range root.Twins {
		twins = append(twins, filepath.Join(d, "pools"))
	}
	return pools, twins
}

// TestKernelTeardownMixed: below a pool root apply made, a cgroup made by
// hand beside the pools, one inside a pool, and (v1) one only in the
// cpuacct hierarchy. Teardown removes every pool but the one holding a
// foreign cgroup, leaves the foreign ones and lists them, and keeps (and
// lists) the pool and the roots above them; --unmarked then removes
// everything.
func TestKernelTeardownMixed(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}
	h := kerneltest.Require(t, need)
	root := h.NewRoot(t, need)
	pools, twins := applySeedBelow(t, root)
	foreign := []string{filepath.Join(pools, "by-hand"), filepath.Join(pools, "olap", "by-hand")}
	kept := []string{pools, filepath.Join(pools, "olap")}
	for _, d := range twins {
		foreign = append(foreign, filepath.Join(d, "acct-only"))
		kept = append(kept, d)
	}
	for _, d := range foreign {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var before []string
	for _, d := range append([]string{pools}, twins...) {
		before = append(before, cgroupsBelow(t, d)...)
	}

	out, stderr, err := runApp(t, "teardown", "--root", pools)
	if err != nil {
		t.Fatalf("teardown: %v\n%s", err, stderr)
	}
	t.Logf("teardown of %d cgroups, %d of them foreign:\n%s", len(before), len(foreign), out)
	var after []string
	for _, d := range append([]string{pools}, twins...) {
		after = append(after, cgroupsBelow(t, d)...)
	}
	want := append(slices.Clone(foreign), kept...)
	slices.Sort(want)
	if !slices.Equal(after, want) {
		t.Errorf("after teardown the cgroups are\n%s\nwant the foreign ones and the cgroups above them\n%s", strings.Join(after, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range append(slices.Clone(foreign), kept...) {
		if !strings.Contains(out, "  "+d+"\n") {
			t.Errorf("teardown's output does not list %s", d)
		}
	}
	if len(before) <= len(want) {
		t.Errorf("%d cgroups before teardown: the seed's pools were not made", len(before))
	}

	out, stderr, err = runApp(t, "teardown", "--root", pools, "--unmarked")
	if err != nil {
		t.Fatalf("teardown --unmarked: %v\n%s", err, stderr)
	}
	for _, dir := range append([]string{pools}, twins...) {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s after teardown --unmarked (%q): %v, want it gone", dir, out, err)
		}
	}
}

// cgroupsBelow returns dir and every cgroup below it, sorted.
func cgroupsBelow(t *testing.T, dir string) []string {
	t.Helper()
	dirs, err := kerneltest.Cgroups(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dirs)
	return dirs
}
