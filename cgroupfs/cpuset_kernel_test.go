package cgroupfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/planner"
)

// needCPUSet is what the CPU set tests need: cpu, on v1 the cpuacct and
// cpuset twins, on v2 cpuset offered to the test's root.
var needCPUSet = kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct", "cpuset"}}

// TestKernelCPUSet: a pool with CPUS='0' confines its queries to CPU 0.
// Two busy loops (one thread each) placed in it get affinity {0}, are
// never seen on CPU 1 in a second of sampling their running threads'
// /proc/PID/task/TID/stat "processor" field, and use about one CPU
// together, not two; the same two loops in a pool without CPUS get
// affinity {0,1} and use well over one CPU. Moving the pool to CPU 1 with a
// query inside moves the query (v1 widens first, then narrows), CPUS=-1
// gives it every CPU back, and removing the queries removes their twins.
func TestKernelCPUSet(t *testing.T) {
	k := newKernelFor(t, needCPUSet, cgroupfs.Options{})
	online, err := onlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if !online.Contains(0) || !online.Contains(1) {
		t.Fatalf("online CPUs %q: this test needs CPUs 0 and 1 (run the VM with POOLAGENT_VM_CPUS=2 or more)", online)
	}
	k.root.Favour(t)
	d := cpusetDesired(t, "0")
	res, err := k.tree.Reconcile(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("apply with CPUS='0': %d writes", res.Writes)
	if again, err := k.tree.Changes(d); err != nil || len(again.Ops) != 0 {
		t.Fatalf("re-apply not a no-op (%v):\n%s", err, again)
	}
	if got := readCPUSet(t, k, "one"); got != "0" {
		t.Fatalf("one/cpuset.cpus = %q, want 0", got)
	}

	// How much CPU the loops got is timing: judged only while the machine
	// gives the test its CPU (kerneltest.Root.Retry). Where they ran is
	// not: a loop of pool one seen on CPU 1 fails the test at once.
	k.root.Retry(t, 3, func(n int) string {
		one := burnPair(t, k, d, "one", fmt.Sprintf("q%d", n))
		t.Logf("pool one (CPUS='0'): CPUs seen %v in %d samples of running threads, usage %d µs in %v of wall time",
			one.seen, one.samples, one.usageUsec, one.wall)
		if slices.ContainsFunc(one.seen, func(c int) bool { return c != 0 }) {
			t.Errorf("pool on CPU 0 seen running on CPUs %v in %d samples; want CPU 0 only", one.seen, one.samples)
		}
		if limit := uint64(one.wall.Microseconds()) * 11 / 10; one.usageUsec > limit {
			t.Errorf("pool on CPU 0 used %d µs in %v: more than one CPU (%d µs)", one.usageUsec, one.wall, limit)
		}
		if one.samples == 0 {
			return "no running thread of pool one seen in a second of sampling"
		}
		if one.usageUsec < 300_000 {
			return fmt.Sprintf("pool on CPU 0 used %d µs in %v: want about one CPU, at least 0.3 s", one.usageUsec, one.wall)
		}
		// The same loops unconfined use both CPUs: one CPU above was the
		// CPU set's doing, not a busy host's. (Where they run is not
		// sampled here: with the test's root favoured, the two loops leave
		// the sampler next to no CPU.)
		all := burnPair(t, k, d, "all", fmt.Sprintf("p%d", n))
		t.Logf("pool all (no CPUS): usage %d µs in %v", all.usageUsec, all.wall)
		if all.usageUsec < one.usageUsec*13/10 {
			return fmt.Sprintf("pool without CPUS used %d µs, pool on CPU 0 %d µs: want the first well above the second", all.usageUsec, one.usageUsec)
		}
		return ""
	})

	moveAndBack(t, k)
}

// moveAndBack places a resident process in pool one, moves the pool to
// CPU 1 and then to every CPU, checking the process's affinity each time,
// and removes the query.
func moveAndBack(t *testing.T, k *kernel) {
	t.Helper()
	b := kerneltest.StartBurner(t, kerneltest.Burn{For: time.Second})
	d := cpusetDesired(t, "0")
	if err := k.tree.PlaceQuery(*d.Pools[2], "r", b.PID); err != nil {
		t.Fatal(err)
	}
	for _, cpus := range []string{"1", ""} {
		d = cpusetDesired(t, cpus)
		if _, err := k.tree.Reconcile(d); err != nil {
			t.Fatalf("CPUS=%q with a query running: %v", cpus, err)
		}
		want, _ := onlineCPUs()
		if cpus != "" {
			want, _ = cpulimit.ParseCPUSet(cpus)
		}
		if got := affinity(t, b.PID); got != want {
			t.Errorf("after CPUS=%q the query's process has affinity %q, want %q", cpus, got, want)
		}
	}
	if err := b.Go(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := k.tree.RemoveQuery("one", "r"); err != nil {
		t.Fatal(err)
	}
	for _, dir := range append([]string{k.root.Path}, k.root.Twins...) {
		if _, err := os.Stat(filepath.Join(dir, "one", "r")); !os.IsNotExist(err) {
			t.Errorf("query r still in %s after RemoveQuery (%v)", dir, err)
		}
	}
}

// cpusetDesired is default, a pool "all" without CPUS and a pool "one" on
// cpus ("" = none), as the planner makes them.
func cpusetDesired(t *testing.T, cpus string) planner.Desired {
	t.Helper()
	set, err := cpulimit.ParseCPUSet(cpus)
	if err != nil {
		t.Fatal(err)
	}
	one := cg(-1, 100000, 0, 100)
	one.CPU.CPUs = set
	query := fresh
	query.CPU.CPUs = set
	return planner.Desired{Pools: []*planner.PoolState{
		{Name: "default", Pool: cg(-1, 100000, 0, 100), Query: fresh},
		{Name: "all", Pool: cg(-1, 100000, 0, 100), Query: fresh},
		{Name: "one", Pool: one, Query: query},
	}}
}

// readCPUSet reads cg's cpuset.cpus: in the test's root on v2, in its
// cpuset twin on v1.
func readCPUSet(t *testing.T, k *kernel, cg string) string {
	t.Helper()
	dir := k.root.Path
	if !k.v2() {
		dir = k.h.Mounts.Twin("cpuset", k.root.Path)
	}
	b, err := os.ReadFile(filepath.Join(dir, cg, "cpuset.cpus"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// pairRun is what two busy loops did in one pool.
type pairRun struct {
	seen      []int // CPUs their running threads were seen on
	samples   int
	usageUsec uint64 // the pool's usage over the run
	wall      time.Duration
}

// burnPair places two one-second busy loops in pool (queries prefix1 and
// prefix2), checks their affinity is the pool's CPUs, runs them and samples
// where their running threads are.
func burnPair(t *testing.T, k *kernel, d planner.Desired, pool, prefix string) pairRun {
	t.Helper()
	ps, _ := d.Pool(pool)
	want := ps.Pool.CPU.CPUs
	if want.IsEmpty() {
		want, _ = onlineCPUs()
	}
	var bs []*kerneltest.Burner
	for i := range 2 {
		b := kerneltest.StartBurner(t, kerneltest.Burn{For: time.Second, Clock: kerneltest.Wall})
		if err := k.tree.PlaceQuery(ps, fmt.Sprintf("%s%d", prefix, i+1), b.PID); err != nil {
			t.Fatal(err)
		}
		if got := affinity(t, b.PID); got != want {
			t.Errorf("pool %s: placed process %d has affinity %q, want %q", pool, b.PID, got, want)
		}
		bs = append(bs, b)
	}
	_, before := k.stat(t, pool)
	start := time.Now()
	for _, b := range bs {
		if err := b.Go(); err != nil {
			t.Fatal(err)
		}
	}
	var run pairRun
	for time.Since(start) < 900*time.Millisecond {
		for _, b := range bs {
			for _, c := range runningOn(b.PID) {
				if !slices.Contains(run.seen, c) {
					run.seen = append(run.seen, c)
				}
				run.samples++
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, b := range bs {
		if _, err := b.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	run.wall = time.Since(start)
	_, after := k.stat(t, pool)
	run.usageUsec = after - before
	slices.Sort(run.seen)
	return run
}

// runningOn lists the CPUs the running threads of process pid are on:
// field 39 ("processor") of /proc/PID/task/TID/stat for each thread in
// state R. A sleeping thread's field is the CPU it last ran on, which
// may be from before the process was moved. A process that has exited
// has none.
func runningOn(pid int) []int {
	tids, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, tid := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, tid.Name()))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // f[0] is field 3
		if len(f) < 37 || f[0] != "R" {
			continue
		}
		if c, err := strconv.Atoi(f[36]); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// affinity is process pid's CPU affinity (sched_getaffinity).
func affinity(t *testing.T, pid int) cpulimit.CPUSet {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		t.Fatalf("sched_getaffinity %d: %v", pid, err)
	}
	var list []string
	for c := range cpulimit.MaxCPU + 1 {
		if set.IsSet(c) {
			list = append(list, strconv.Itoa(c))
		}
	}
	got, err := cpulimit.ParseCPUSet(strings.Join(list, ","))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// onlineCPUs reads /sys/devices/system/cpu/online.
func onlineCPUs() (cpulimit.CPUSet, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return cpulimit.CPUSet{}, err
	}
	return cpulimit.ParseCPUSet(string(b))
}
