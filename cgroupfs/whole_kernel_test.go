package cgroupfs_test

import (
	"bufio"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
)

// envForker makes the test binary a forker (below) instead of running
// tests.
const envForker = "POOLAGENT_TEST_FORKER"

// init: as a forker, the process starts sleepers from 4 threads at once
// as fast as it can, forever, saying "forking" once it has begun.
func init() {
	if os.Getenv(envForker) != "1" {
		return
	}
	attr := &syscall.ProcAttr{Files: []uintptr{^uintptr(0), ^uintptr(0), ^uintptr(0)}}
	for range 4 {
		go func() {
			for {
				syscall.ForkExec("/bin/sleep", []string{"sleep", "1000"}, attr)
			}
		}()
	}
	os.Stdout.WriteString("forking\n")
	select {}
}

// TestKernelQueryWhole: 200 times, a process forking from 4 threads is
// placed in a query of a pool with a CPU set, which on v1 is in three
// hierarchies (cpu, cpuacct, cpuset) written one after the other. Each
// time, the forker is stopped once placed, and every process in the
// query cgroup of one hierarchy must be in it in all of them: no child
// forked during the move is left in part of the query. (On v2 a move is
// one write, in the one hierarchy.)
func TestKernelQueryWhole(t *testing.T) {
	k := newKernelFor(t, kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1}, Controllers: []string{"cpuacct", "cpuset"}}, cgroupfs.Options{})
	d := cpusetDesired(t, "0")
	if _, err := k.tree.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	ps, _ := d.Pool("one")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 200
	split, placed, hiers := 0, 0, 0
	for i := range rounds {
		name := "w" + strconv.Itoa(i)
		if err := k.tree.MakeQuery(ps, name); err != nil {
			t.Fatal(err)
		}
		places, err := k.tree.QueryPlaces(ps, name)
		if err != nil {
			t.Fatal(err)
		}
		hiers = len(places)
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), envForker+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		group := cmd.Process.Pid
		stopGroup := func() {
			unix.Kill(-group, unix.SIGKILL)
			cmd.Wait()
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "forking\n" {
			stopGroup()
			t.Fatalf("forker: %q, %v", line, err)
		}
		err = k.tree.MoveToQuery(ps, name, cmd.Process.Pid)
		unix.Kill(-group, unix.SIGSTOP)
		if err != nil {
			stopGroup()
			t.Fatal(err)
		}
		// A fork under way when the signal came completes: the cgroups
		// are read until two reads in a row agree.
		in, err := queryProcs(places)
		for prev := map[int]int(nil); err == nil && !maps.Equal(in, prev); {
			prev = in
			time.Sleep(5 * time.Millisecond)
			in, err = queryProcs(places)
		}
		if err != nil {
			stopGroup()
			t.Fatal(err)
		}
		var parts []int
		for pid, n := range in {
			if n != len(places) {
				parts = append(parts, pid)
			}
		}
		if len(parts) > 0 {
			split++
			slices.Sort(parts)
			t.Logf("round %d: processes %v in the query in only part of its %d hierarchies", i, parts, len(places))
		}
		placed += len(in)
		stopGroup()
		removeWhenEmpty(t, k, "one", name)
	}
	t.Logf("%d rounds, %d hierarchies: %d processes in the queries when the forker was stopped, %d queries split", rounds, hiers, placed, split)
	if split > 0 {
		t.Errorf("%d of %d queries split across hierarchies", split, rounds)
	}
}

// queryProcs reads the query cgroup of every hierarchy of places and
// returns, for each process in it in one, how many it is in.
func queryProcs(places map[string]cgroupfs.QueryPlace) (map[int]int, error) {
	in := map[int]int{}
	for _, p := range places {
		b, err := os.ReadFile(filepath.Join(p.Mount, p.Path, "cgroup.procs"))
		if err != nil {
			return nil, err
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			in[pid]++
		}
	}
	return in, nil
}

// removeWhenEmpty removes query cgroup pool/query once its processes,
// killed, have left it.
func removeWhenEmpty(t *testing.T, k *kernel, pool, query string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := k.tree.RemoveQuery(pool, query)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("remove query %s/%s: %v", pool, query, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
