package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	if _, stderr, err := runApp(t, "apply", "--pools", "../../testdata/pools/seed.sql", "--root", root.Path, "--cpus", "10", "--memory", "17179869184"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}

	tree, err := cgroupfs.Open(h.Mounts, root.Path, cgroupfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	release, err := tree.Own()
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = runApp(t, "teardown", "--root", root.Path)
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
	if err := os.WriteFile(filepath.Join(root.Path, "olap", "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	_, _, err = runApp(t, "teardown", "--root", root.Path)
	if err == nil || !strings.Contains(err.Error(), "a process is still in it") {
		t.Errorf("teardown with a process in olap: %v; want a refusal saying a process is in it", err)
	}
	sleep.Process.Kill()
	sleep.Wait()

	out, stderr, err := runApp(t, "teardown", "--root", root.Path)
	if err != nil {
		t.Fatalf("teardown: %v\n%s", err, stderr)
	}
	if want := "removed the pool root " + root.Path + " and every cgroup below it\n"; out != want {
		t.Errorf("teardown printed %q, want %q", out, want)
	}
	for _, dir := range append([]string{root.Path}, root.Twins...) {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s after teardown: %v, want it gone", dir, err)
		}
	}
	if out, _, err := runApp(t, "teardown", "--root", root.Path); err != nil || !strings.HasPrefix(out, "no pool root at ") {
		t.Errorf("second teardown: %v, %q", err, out)
	}
}
