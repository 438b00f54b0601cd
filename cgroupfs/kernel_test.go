package cgroupfs_test

// Real-kernel tests: cgroupfs against the host's cgroup v1 cpu hierarchy
// and, through the VM harness, cgroup v2 (internal/kerneltest decides which
// run covers which mode). Every test makes its own uniquely named subtree,
// which is removed also when the test fails.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
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
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

func TestMain(m *testing.M) { kerneltest.Main(m) }

// need is what every test here needs: the cpu controller and, on v1,
// cpuacct kept in step.
var need = kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}

type kernel struct {
	h    kerneltest.Host
	root kerneltest.Root
	tree *cgroupfs.Tree
}

// newKernel makes the test's own subtree and opens it as the pool root.
func newKernel(t *testing.T, opt cgroupfs.Options) *kernel {
	t.Helper()
	return newKernelFor(t, need, opt)
}

func newKernelFor(t *testing.T, need kerneltest.Need, opt cgroupfs.Options) *kernel {
	t.Helper()
	h := kerneltest.Require(t, need)
	root := h.NewRoot(t, need)
	tr, err := cgroupfs.Open(h.Mounts, root.Path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return &kernel{h: h, root: root, tree: tr}
}

func (k *kernel) v2() bool { return k.h.Mode == kerneltest.V2 }

func (k *kernel) read(t *testing.T, cg, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(k.root.Path, cg, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// cg builds a desired cgroup as the planner does: quota -1 = unlimited,
// memory unlimited; weight 0 = leave weight and shares unset.
func cg(quota int64, period, burst, weight uint64) planner.Cgroup {
	return planner.Cgroup{
		CPU:         cpulimit.Limit{QuotaUsec: quota, PeriodUsec: int64(period), BurstUsec: int64(burst), Weight: int64(weight)},
		MemoryBytes: -1,
	}
}

// fresh is a cgroup as the kernel creates it: a desired state with it
// writes nothing.
var fresh = cg(-1, 100000, 0, 0)

// seed is the guide's olap pool on a 10 vCPU node (cpu.max "700000
// 100000", queries "350000 100000") with a second pool that has a burst.
func seed() planner.Desired {
	return planner.Desired{
		Node: planner.Node{CPUs: 10, PeriodUsec: 100000},
		Pools: []*planner.PoolState{
			{Name: "default", Pool: cg(-1, 100000, 0, 100), Query: cg(-1, 100000, 0, 0)},
			{Name: "etl", Pool: cg(200000, 100000, 50000, 50), Query: cg(100000, 100000, 0, 0)},
			{Name: "olap", Pool: cg(700000, 100000, 0, 100), Query: cg(350000, 100000, 0, 0)},
		},
	}
}

// TestKernelApplySeed plans testdata/pools/seed.sql (the guide's olap pool)
// for a 10 vCPU node and applies it: olap gets cpu.max "700000 100000",
// its queries "350000 100000"; a second apply writes nothing.
func TestKernelApplySeed(t *testing.T) {
	k := newKernel(t, cgroupfs.Options{})
	src, err := os.ReadFile("../testdata/pools/seed.sql")
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := planner.Load("seed.sql", src)
	if err != nil {
		t.Fatal(err)
	}
	d, err := planner.Plan(m, planner.Node{CPUs: 10, MemoryBytes: 16 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec}, planner.Activity{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.tree.Reconcile(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first apply: %d writes", res.Writes)
	want := map[string]string{
		"olap/cpu.cfs_quota_us": "700000", "olap/cpu.cfs_period_us": "100000", "default/cpu.cfs_quota_us": "-1",
	}
	if k.v2() {
		want = map[string]string{
			"olap/cpu.max": "700000 100000", "default/cpu.max": "max 100000",
			"cgroup.subtree_control": "cpu", "olap/cgroup.subtree_control": "cpu",
		}
	}
	for f, v := range want {
		if got := k.read(t, filepath.Dir(f), filepath.Base(f)); got != v {
			t.Errorf("%s = %q, want %q", f, got, v)
		}
	}
	for _, twin := range k.root.Twins {
		for _, p := range []string{"default", "olap"} {
			if _, err := os.Stat(filepath.Join(twin, p)); err != nil {
				t.Errorf("twin hierarchy not kept in step: %v", err)
			}
		}
	}
	// A query of olap gets the query template.
	b := kerneltest.StartBurner(t, kerneltest.Burn{For: time.Minute})
	if err := k.tree.PlaceQuery(*d.Pools[1], "q1", b.PID); err != nil {
		t.Fatal(err)
	}
	file, v := "cpu.cfs_quota_us", "350000"
	if k.v2() {
		file, v = "cpu.max", "350000 100000"
	}
	if got := k.read(t, "olap/q1", file); got != v {
		t.Errorf("olap/q1/%s = %q, want %q", file, got, v)
	}
	again, err := k.tree.Reconcile(d)
	if err != nil {
		t.Fatal(err)
	}
	if again.Writes != 0 {
		t.Errorf("second apply made %d writes, want 0: %v", again.Writes, again.Done)
	}
}

// TestKernelApplyBurstAndWeights applies a pool with a burst and weights
// and checks the kernel's files.
func TestKernelApplyBurstAndWeights(t *testing.T) {
	k := newKernel(t, cgroupfs.Options{})
	if _, err := k.tree.Reconcile(seed()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"etl/cpu.cfs_quota_us": "200000", "etl/cpu.cfs_burst_us": "50000", "etl/cpu.shares": "512"}
	if k.v2() {
		want = map[string]string{"etl/cpu.max": "200000 100000", "etl/cpu.max.burst": "50000", "etl/cpu.weight": "50"}
	}
	for f, v := range want {
		if got := k.read(t, filepath.Dir(f), filepath.Base(f)); got != v {
			t.Errorf("%s = %q, want %q", f, got, v)
		}
	}
	if again, err := k.tree.Reconcile(seed()); err != nil || again.Writes != 0 {
		t.Errorf("second apply: %d writes, %v; want 0", again.Writes, err)
	}
}

// TestKernelThrottle runs a busy loop pinned to one CPU for 2 s in a pool
// capped at 20% of a CPU: the kernel should throttle about 20 periods for
// about 1.6 s in all.
func TestKernelThrottle(t *testing.T) {
	k := newKernel(t, cgroupfs.Options{})
	d := planner.Desired{Pools: []*planner.PoolState{
		{Name: "default", Pool: cg(-1, 100000, 0, 100), Query: cg(-1, 100000, 0, 0)},
		{Name: "slow", Pool: cg(20000, 100000, 0, 100), Query: cg(-1, 100000, 0, 0)},
	}}
	if _, err := k.tree.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	k.root.Favour(t)
	b := kerneltest.StartBurner(t, kerneltest.Burn{For: 2 * time.Second, Clock: kerneltest.Wall, Pin: true, CPU: 0})
	if err := k.tree.PlaceQuery(*d.Pools[1], "q1", b.PID); err != nil {
		t.Fatal(err)
	}
	if err := b.Go(); err != nil {
		t.Fatal(err)
	}
	cpu, err := b.Wait()
	if err != nil {
		t.Fatal(err)
	}
	st, usageUsec := k.stat(t, "slow")
	t.Logf("burner cpu %s; slow: usage %d µs, nr_periods %d, nr_throttled %d, throttled %d µs",
		cpu, usageUsec, st.NrPeriods, st.NrThrottled, st.ThrottledUsec)
	// About 20 periods of 20 ms run and 80 ms throttled. The bounds are
	// generous: under the VM's emulation, or a busy host, the same 2 s of
	// the burner's clock can span a few more periods.
	if st.NrThrottled < 12 || st.NrThrottled > 40 {
		t.Errorf("nr_throttled = %d, want about 20 (12..40)", st.NrThrottled)
	}
	if st.ThrottledUsec < 800_000 || st.ThrottledUsec > 3_200_000 {
		t.Errorf("throttled = %d µs, want about 1.6 s (0.8..3.2 s)", st.ThrottledUsec)
	}
	// The quota holds whatever the wall time: at most 20 ms ran in each
	// period (10% over for the kernel's per-CPU runtime slices).
	if usageUsec < 200_000 || usageUsec > st.NrPeriods*22_000 {
		t.Errorf("usage = %d µs over %d periods, want 0.2 s..20 ms per period", usageUsec, st.NrPeriods)
	}
}

// stat reads a pool's counters through a Reader: v1 throttling from
// cpu.stat and usage from cpuacct, v2 both from cpu.stat.
func (k *kernel) stat(t *testing.T, pool string) (observe.CPUStat, uint64) {
	t.Helper()
	s, err := k.reader(t).Read(pool)
	if err != nil {
		t.Fatal(err)
	}
	if !s.UsageKnown {
		t.Fatalf("%s: usage unknown", pool)
	}
	return s.CPU, s.CPU.UsageUsec
}

// cgroupOf returns pid's cgroup path in the cpu hierarchy, from
// /proc/PID/cgroup ("N:cpu,cpuacct:/path" on v1, "0::/path" on v2).
func (k *kernel) cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && ((k.v2() && f[0] == "0") || (!k.v2() && slices.Contains(strings.Split(f[1], ","), "cpu"))) {
			// The path is below the hierarchy's mount, which is not the
			// tests' parent when that is a delegated subtree.
			mount, _, err := k.h.Mounts.Controller("cpu")
			if err != nil {
				t.Fatal(err)
			}
			return filepath.Join(mount, f[2])
		}
	}
	t.Fatalf("no cpu cgroup in /proc/%d/cgroup: %s", pid, b)
	return ""
}

// TestKernelDropPoolWhileRunning drops a pool while one of its queries
// burns CPU and another sleeps: both processes end up in default, alive.
func TestKernelDropPoolWhileRunning(t *testing.T) {
	k := newKernel(t, cgroupfs.Options{})
	d := seed()
	if _, err := k.tree.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	busy := kerneltest.StartBurner(t, kerneltest.Burn{For: time.Minute, Clock: kerneltest.Wall})
	idle := kerneltest.StartBurner(t, kerneltest.Burn{For: time.Minute})
	if err := k.tree.PlaceQuery(*d.Pools[1], "q1", busy.PID); err != nil {
		t.Fatal(err)
	}
	if err := k.tree.PlaceQuery(*d.Pools[1], "q2", idle.PID); err != nil {
		t.Fatal(err)
	}
	if err := busy.Go(); err != nil {
		t.Fatal(err)
	}
	d.Pools = slices.Delete(d.Pools, 1, 2) // drop etl
	res, err := k.tree.Reconcile(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drop: %d writes", res.Writes)
	for pid, want := range map[int]string{busy.PID: "default/etl.q1", idle.PID: "default/etl.q2"} {
		if got := k.cgroupOf(t, pid); got != filepath.Join(k.root.Path, want) {
			t.Errorf("pid %d is in %s, want %s", pid, got, want)
		}
		if err := unix.Kill(pid, 0); err != nil {
			t.Errorf("pid %d: %v", pid, err)
		}
	}
	for _, dir := range append([]string{k.root.Path}, k.root.Twins...) {
		if _, err := os.Stat(filepath.Join(dir, "etl")); !os.IsNotExist(err) {
			t.Errorf("%s/etl still exists", dir)
		}
	}
	if again, _ := k.tree.Changes(d); len(again.Ops) != 0 {
		t.Errorf("plan after the drop is not empty:\n%s", again)
	}
}

// TestKernelRefusesInvalidValues writes values the kernel refuses straight
// through a Dir, and checks that Plan refuses the same desired state
// before writing anything.
func TestKernelRefusesInvalidValues(t *testing.T) {
	k := newKernel(t, cgroupfs.Options{})
	dir, err := cgroupfs.OpenDir(k.root.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for _, c := range []string{"p", "p/q"} {
		if err := dir.Mkdir(c); err != nil {
			t.Fatal(err)
		}
		if k.v2() && c == "p" {
			for _, parent := range []string{".", "p"} {
				if err := dir.WriteFile(parent+"/cgroup.subtree_control", "+cpu"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	quota := func(c string, q int64) error {
		if k.v2() {
			v := "max 100000"
			if q >= 0 {
				v = fmt.Sprintf("%d 100000", q)
			}
			return dir.WriteFile(c+"/cpu.max", v)
		}
		return dir.WriteFile(c+"/cpu.cfs_quota_us", strconv.FormatInt(q, 10))
	}
	burst := func(c string, b int) error {
		if k.v2() {
			return dir.WriteFile(c+"/cpu.max.burst", strconv.Itoa(b))
		}
		return dir.WriteFile(c+"/cpu.cfs_burst_us", strconv.Itoa(b))
	}
	pool := func(p, q planner.Cgroup) planner.Desired {
		return planner.Desired{Pools: []*planner.PoolState{{Name: "default", Pool: fresh, Query: fresh}, {Name: "olap", Pool: p, Query: q}}}
	}
	tests := []struct {
		name      string
		kernel    func() error
		refused   bool // whether this mode's kernel refuses it
		desired   planner.Desired
		planError bool
	}{
		{"quota below 1 ms", func() error { return quota("p", 500) }, true,
			pool(cg(500, 100000, 0, 100), cg(-1, 100000, 0, 0)), true},
		{"burst above quota", func() error {
			if err := quota("p", 20000); err != nil {
				return err
			}
			return burst("p", 30000)
		}, true, pool(cg(20000, 100000, 30000, 100), cg(-1, 100000, 0, 0)), true},
		{"child above parent", func() error {
			if err := quota("p", 20000); err != nil {
				return err
			}
			return quota("p/q", 50000)
		}, !k.v2(), pool(cg(20000, 100000, 0, 100), cg(50000, 100000, 0, 0)), !k.v2()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Cleanup(func() {
				quota("p/q", -1)
				burst("p", 0)
				quota("p", -1)
			})
			err := tt.kernel()
			if tt.refused && !errors.Is(err, unix.EINVAL) {
				t.Errorf("kernel: err = %v, want EINVAL", err)
			}
			if !tt.refused && err != nil {
				t.Errorf("kernel refused it: %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), k.root.Path) {
				t.Errorf("error %q does not name the file", err)
			}
			_, err = k.tree.Changes(tt.desired)
			if got := errors.Is(err, cgroupfs.ErrInvalid); got != tt.planError {
				t.Errorf("Plan: err = %v, want refused=%v", err, tt.planError)
			}
		})
	}
}

// TestKernelMissingController: a pool root whose parent does not enable
// cpu for its children is refused before anything is written. Only v2 can
// have the controller missing below a mount; on v1 a controller is a
// mount, which TestDetect and TestMissingController cover with fixtures.
func TestKernelMissingController(t *testing.T) {
	k := newKernelFor(t, kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V2}}, cgroupfs.Options{})
	tr, err := cgroupfs.Open(k.h.Mounts, filepath.Join(k.root.Path, "nocpu"), cgroupfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	_, err = tr.Reconcile(seed())
	if !errors.Is(err, cgroupfs.ErrNoController) {
		t.Fatalf("err = %v, want ErrNoController", err)
	}
	if _, err := os.Stat(filepath.Join(k.root.Path, "nocpu")); !os.IsNotExist(err) {
		t.Error("the pool root was created")
	}
}

// TestKernelNonWritableRoot applies as an unprivileged user: the first
// write is refused, reported with its path, and nothing is created.
func TestKernelNonWritableRoot(t *testing.T) {
	k := newKernel(t, cgroupfs.Options{})
	tr, err := cgroupfs.Open(k.h.Mounts, filepath.Join(k.root.Path, "pools"), cgroupfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if k.v2() {
		// the pool root's parent (the test's root) must offer cpu
		if err := os.WriteFile(filepath.Join(k.root.Path, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			t.Fatal(err)
		}
	}
	kerneltest.AsUser(t, 65534, func() { _, err = tr.Reconcile(seed()) })
	var ae *cgroupfs.ApplyError
	if !errors.As(err, &ae) || !errors.Is(err, unix.EACCES) {
		t.Fatalf("err = %v, want an *ApplyError wrapping EACCES", err)
	}
	if len(ae.Done) != 0 || !strings.Contains(err.Error(), filepath.Join(k.root.Path, "pools")) {
		t.Errorf("want nothing done and the root named; got %v", err)
	}
	if _, err := os.Stat(filepath.Join(k.root.Path, "pools")); !os.IsNotExist(err) {
		t.Error("the pool root was created")
	}
}

// failing fails the Nth mkdir, rmdir or write across every FS it wraps.
type failing struct {
	cgroupfs.FS
	n, failAt *int
}

func (f failing) hit() error {
	*f.n++
	if *f.n == *f.failAt {
		return fmt.Errorf("injected fault at write %d: %w", *f.n, unix.EIO)
	}
	return nil
}

func (f failing) WriteFile(name, v string) error {
	if err := f.hit(); err != nil {
		return err
	}
	return f.FS.WriteFile(name, v)
}

func (f failing) Mkdir(name string) error {
	if err := f.hit(); err != nil {
		return err
	}
	return f.FS.Mkdir(name)
}

func (f failing) Rmdir(name string) error {
	if err := f.hit(); err != nil {
		return err
	}
	return f.FS.Rmdir(name)
}

func (f failing) Close() error { return f.FS.(io.Closer).Close() }

// changed drops etl, tightens olap and adds adhoc.
func changed() planner.Desired {
	return planner.Desired{Pools: []*planner.PoolState{
		{Name: "default", Pool: cg(-1, 100000, 0, 100), Query: cg(-1, 100000, 0, 0)},
		{Name: "adhoc", Pool: cg(100000, 100000, 20000, 20), Query: cg(50000, 100000, 0, 0)},
		{Name: "olap", Pool: cg(300000, 100000, 0, 200), Query: cg(150000, 100000, 0, 0)},
	}}
}

// TestKernelFaultInjection fails write N of a change (new pool, changed
// pool, dropped pool with two running queries) for every N on the real
// kernel, then checks that a clean apply converges to the tree a direct
// apply makes.
func TestKernelFaultInjection(t *testing.T) {
	var direct string
	total := -1
	for n := 0; n <= total || total < 0; n++ {
		t.Run(fmt.Sprintf("fail at %d", n), func(t *testing.T) {
			var count, failAt int
			k := newKernel(t, cgroupfs.Options{OpenFS: func(dir string) (cgroupfs.FS, error) {
				d, err := cgroupfs.OpenDir(dir)
				if err != nil {
					return nil, err
				}
				return failing{FS: d, n: &count, failAt: &failAt}, nil
			}})
			d := seed()
			if _, err := k.tree.Reconcile(d); err != nil {
				t.Fatal(err)
			}
			roles := map[int]string{}
			for _, q := range []string{"q1", "q2"} {
				b := kerneltest.StartBurner(t, kerneltest.Burn{For: time.Minute})
				roles[b.PID] = q
				if err := k.tree.PlaceQuery(*d.Pools[1], q, b.PID); err != nil {
					t.Fatal(err)
				}
			}
			count, failAt = 0, n
			res, err := k.tree.Reconcile(changed())
			if n == 0 {
				if err != nil {
					t.Fatal(err)
				}
				total = res.Writes
				direct = k.snapshot(t, roles)
				t.Logf("direct apply: %d writes", total)
				return
			}
			var ae *cgroupfs.ApplyError
			if !errors.As(err, &ae) || !errors.Is(err, unix.EIO) {
				t.Fatalf("err = %v, want an *ApplyError wrapping EIO", err)
			}
			failAt = 0
			if _, err := k.tree.Reconcile(changed()); err != nil {
				t.Fatalf("clean apply after the fault: %v", err)
			}
			if got := k.snapshot(t, roles); got != direct {
				t.Fatalf("tree differs from a direct apply:\n--- got\n%s--- want\n%s", got, direct)
			}
		})
		if t.Failed() {
			return
		}
	}
}

// snapshot lists every cgroup below the pool root in every hierarchy with
// the values poolagent manages and its processes by role.
func (k *kernel) snapshot(t *testing.T, roles map[int]string) string {
	t.Helper()
	files := []string{"cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.cfs_burst_us", "cpu.shares"}
	if k.v2() {
		files = []string{"cpu.max", "cpu.max.burst", "cpu.weight", "cgroup.subtree_control"}
	}
	var b strings.Builder
	for i, dir := range append([]string{k.root.Path}, k.root.Twins...) {
		filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			fmt.Fprintf(&b, "%d %s:", i, rel)
			if i == 0 {
				for _, f := range files {
					v, _ := os.ReadFile(filepath.Join(p, f))
					fmt.Fprintf(&b, " %s=%q", f, strings.TrimSpace(string(v)))
				}
			}
			procs, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			var who []string
			for _, f := range strings.Fields(string(procs)) {
				pid, _ := strconv.Atoi(f)
				who = append(who, roles[pid])
			}
			slices.Sort(who)
			fmt.Fprintf(&b, " procs=%v\n", who)
			return nil
		})
	}
	return b.String()
}

// TestKernelNoMountCrossing: OpenCgroupDir checks the file system on the
// real kernel and refuses to follow a lookup into a mount placed inside
// the tree (RESOLVE_NO_XDEV), where a plain beneath-root open would. v2
// only: it mounts a tmpfs inside the test's own subtree, which on the
// project's hosts (cgroup v1 shared with other work) it does not; the VM
// is its own machine.
func TestKernelNoMountCrossing(t *testing.T) {
	k := newKernelFor(t, kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V2}}, cgroupfs.Options{})
	child := filepath.Join(k.root.Path, "mounted")
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(child) })
	if err := unix.Mount("tmpfs", child, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", child, err)
	}
	t.Cleanup(func() { unix.Unmount(child, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(child, "cpu.max"), []byte("max 100000\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	if _, err := cgroupfs.OpenCgroupDir(child); !errors.Is(err, cgroupfs.ErrNotCgroup) {
		t.Errorf("OpenCgroupDir on the tmpfs: %v, want ErrNotCgroup", err)
	}
	// Both lookups: openat2, and the walk used where a seccomp filter
	// refuses openat2.
	cgroupfs.Lookups(t, func(t *testing.T) {
		d, err := cgroupfs.OpenCgroupDir(k.root.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.ReadFile("cpu.max"); err != nil {
			t.Errorf("read the root's own cpu.max: %v", err)
		}
		if _, err := d.ReadFile("mounted/cpu.max"); !errors.Is(err, unix.EXDEV) {
			t.Errorf("read across the mount: %v, want EXDEV", err)
		}
		if err := d.WriteFile("mounted/cpu.max", "1000 100000"); !errors.Is(err, unix.EXDEV) {
			t.Errorf("write across the mount: %v, want EXDEV", err)
		}
	})
	plain, err := cgroupfs.OpenDir(k.root.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.ReadFile("mounted/cpu.max"); err != nil {
		t.Errorf("OpenDir without the check reads across the mount: %v, want it to (the difference is the point)", err)
	}
}

// TestKernelIdlePool: a pool with cpu.idle 1 yields to a normal pool.
// Two busy loops pinned to CPU 0, one in each pool, are measured over 1 s
// in which both run: the normal one gets nearly all of the CPU, the idle one about the
// idle weight's share (3 of 1027) and what wake-ups leave. Alone, the idle
// pool runs at full speed: idle is not a cap. Made normal again, the pool
// takes its weight.
func TestKernelIdlePool(t *testing.T) {
	k := newKernel(t, cgroupfs.Options{})
	batch := cg(-1, 100000, 0, 0)
	batch.CPU.Idle = true
	d := planner.Desired{Pools: []*planner.PoolState{
		{Name: "default", Pool: cg(-1, 100000, 0, 100), Query: fresh},
		{Name: "batch", Pool: batch, Query: fresh},
		{Name: "web", Pool: cg(-1, 100000, 0, 100), Query: fresh},
	}}
	if _, err := k.tree.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	if got := k.read(t, "batch", "cpu.idle"); got != "1" {
		t.Fatalf("batch cpu.idle = %q, want 1", got)
	}
	k.root.Favour(t)
	queries := 0
	// run starts a busy loop pinned to CPU 0 in each pool for 3 s of wall
	// time and measures each pool's usage over 1 s from 0.5 s after the
	// last one was told to go: a window all of them are running in, however
	// slowly an emulated guest starts them.
	run := func(pools ...string) map[string]uint64 {
		t.Helper()
		var bs []*kerneltest.Burner
		for _, p := range pools {
			queries++
			b := kerneltest.StartBurner(t, kerneltest.Burn{For: 3 * time.Second, Clock: kerneltest.Wall, Pin: true, CPU: 0})
			if err := k.tree.PlaceQuery(*d.Pools[map[string]int{"batch": 1, "web": 2}[p]], fmt.Sprintf("q%d", queries), b.PID); err != nil {
				t.Fatal(err)
			}
			bs = append(bs, b)
		}
		for _, b := range bs {
			if err := b.Go(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond)
		before := map[string]uint64{}
		for _, p := range pools {
			_, before[p] = k.stat(t, p)
		}
		time.Sleep(time.Second)
		used := map[string]uint64{}
		for _, p := range pools {
			_, u := k.stat(t, p)
			used[p] = u - before[p]
		}
		for _, b := range bs {
			if _, err := b.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		return used
	}
	both := run("batch", "web")
	t.Logf("1 s on CPU 0, both pools busy: web %d µs, idle batch %d µs (%.2f%% of web)",
		both["web"], both["batch"], 100*float64(both["batch"])/float64(max(both["web"], 1)))
	if both["web"] < 500_000 || both["batch"]*10 > both["web"] {
		t.Errorf("web %d µs, batch %d µs: want web at least 0.5 s and batch under a tenth of it", both["web"], both["batch"])
	}
	alone := run("batch")
	t.Logf("1 s on CPU 0, idle batch alone: %d µs", alone["batch"])
	if alone["batch"] < 500_000 {
		t.Errorf("idle batch alone used %d µs of 1 s, want at least 0.5 s: idle must not cap", alone["batch"])
	}

	d.Pools[1].Pool = cg(-1, 100000, 0, 200)
	if _, err := k.tree.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	file, want := "cpu.shares", "2048"
	if k.v2() {
		file, want = "cpu.weight", "200"
	}
	if idle, w := k.read(t, "batch", "cpu.idle"), k.read(t, "batch", file); idle != "0" || w != want {
		t.Errorf("batch made normal: cpu.idle %q, %s %q; want 0 and %s", idle, file, w, want)
	}
}

// TestKernelUsageAndThreadsExcept reads what the daemon's history reads of
// a pool that ran: each query's usage from one file, as Read has it, and
// the pool's threads outside the queries it names.
func TestKernelUsageAndThreadsExcept(t *testing.T) {
	k, d := newPoolP(t)
	pids := map[string]int{}
	for _, q := range []string{"q1", "q2"} {
		sleeper := exec.Command("sleep", "60")
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
		if err := k.tree.PlaceQuery(*d.Pools[1], q, sleeper.Process.Pid); err != nil {
			t.Fatal(err)
		}
		pids[q] = sleeper.Process.Pid
	}
	r := k.reader(t)
	usage := func(group string) uint64 {
		t.Helper()
		usec, known, err := r.Usage(group)
		if err != nil || !known {
			t.Fatalf("Usage(%s) = %d, %v, %v: want it known", group, usec, known, err)
		}
		return usec
	}
	for _, group := range []string{"p", "p/q1"} {
		// A sleeper may still be starting: the usage Read finds lies
		// between the two Usage reads around it.
		before := usage(group)
		full, err := r.Read(group)
		if err != nil {
			t.Fatal(err)
		}
		after := usage(group)
		if before > full.CPU.UsageUsec || full.CPU.UsageUsec > after {
			t.Errorf("%s: Usage %d µs, then Read's usage %d µs, then Usage %d µs: want them in order", group, before, full.CPU.UsageUsec, after)
		}
	}
	all, _, err := r.Threads("p", 100)
	if err != nil || !slices.Contains(all, pids["q1"]) || !slices.Contains(all, pids["q2"]) {
		t.Fatalf("Threads(p) = %v, %v: want both sleepers %v", all, err, pids)
	}
	some, _, err := r.ThreadsExcept("p", map[string]bool{"q1": true}, 100)
	if err != nil || slices.Contains(some, pids["q1"]) || !slices.Contains(some, pids["q2"]) {
		t.Errorf("ThreadsExcept(p, q1) = %v, %v: want q2's sleeper %d and not q1's %d", some, err, pids["q2"], pids["q1"])
	}
}

// The reader keeps the counter files it reads again open (package
// reread): a query's usage read through a kept file is the kernel's
// current one, a query removed meanwhile reads as not there, and one made
// again under the same name reads as the new cgroup; its thread lists are
// read afresh.
func TestKernelKeptReads(t *testing.T) {
	k, d := newPoolP(t)
	start := func(script string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if err := k.tree.PlaceQuery(*d.Pools[1], "q", cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	r := k.reader(t)
	acct := k.acctRoot()
	usage := func() (uint64, error) {
		usec, known, err := r.Usage("p/q")
		if err == nil && !known {
			err = errors.New("usage unknown")
		}
		return usec, err
	}
	// A burner: its usage, read through the kept file from the second
	// read on, grows to 50 ms (the wait is bounded, not judged).
	burner := start("while :; do :; done")
	var last uint64
	for i, deadline := 0, time.Now().Add(time.Minute); last < 50000; i++ {
		got, err := usage()
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %d of p/q's usage: %d µs, grown from %d µs in a minute of a burner's run; want it to reach 50,000 µs", i+1, got, last)
		}
		last = got
		time.Sleep(10 * time.Millisecond)
	}
	// The usage file is kept open: this process has a descriptor of it.
	file := filepath.Join(acct, "p/q/cpuacct.usage")
	if k.v2() {
		file = filepath.Join(k.root.Path, "p/q/cpu.stat")
	}
	if !openHere(t, file) {
		t.Errorf("no descriptor of %s is open after repeated reads: want it kept", file)
	}
	// A process that joins the query is listed at once, however often
	// the list was read before (v1 keeps a list it made for an open file
	// for a second: a kept one would not change).
	for range 3 {
		if tids, _, err := r.Threads("p", 100); err != nil || !slices.Contains(tids, burner.Process.Pid) {
			t.Fatalf("threads of p = %v, %v; want the burner's %d", tids, err, burner.Process.Pid)
		}
	}
	joiner := exec.Command("sleep", "60")
	if err := joiner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { joiner.Process.Kill(); joiner.Wait() })
	if err := k.tree.MoveToQuery(*d.Pools[1], "q", joiner.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if tids, _, err := r.Threads("p/q", 100); err != nil || !slices.Contains(tids, joiner.Process.Pid) {
		t.Fatalf("threads of p/q right after a process joined = %v, %v; want the joiner's %d", tids, err, joiner.Process.Pid)
	}
	joiner.Process.Kill()
	joiner.Wait()
	burner.Process.Kill()
	burner.Wait()
	if err := k.tree.RemoveQuery("p", "q"); err != nil {
		t.Fatal(err)
	}
	// Usage says a cgroup that is not there: v2's read error, v1's
	// unknown usage (no cpuacct twin).
	if got, known, err := r.Usage("p/q"); known || (k.v2() && !errors.Is(err, fs.ErrNotExist)) || (!k.v2() && err != nil) {
		t.Fatalf("usage of the removed p/q = %d µs, known %v, %v; want it unknown (v1) or an error wrapping fs.ErrNotExist (v2)", got, known, err)
	}
	tids, _, err := r.Threads("p", 100)
	if err != nil || len(tids) != 0 {
		t.Fatalf("threads of p with its query removed = %v, %v; want none", tids, err)
	}
	// The same name again: a new cgroup, whose usage starts anew, and
	// whose thread the pool's kept directory lists.
	sleeper := start("exec sleep 60")
	for range 2 {
		if got, err := usage(); err != nil || got >= last {
			t.Fatalf("usage of p/q made again with a sleeper = %d µs, %v; want the new cgroup's, below the burner's %d µs", got, err, last)
		}
	}
	if tids, _, err := r.Threads("p", 100); err != nil || !slices.Contains(tids, sleeper.Process.Pid) {
		t.Fatalf("threads of p with p/q made again = %v, %v; want the sleeper's %d", tids, err, sleeper.Process.Pid)
	}
}

// openHere reports whether this process has a descriptor open on file.
func openHere(t *testing.T, file string) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == file {
			return true
		}
	}
	return false
}

// newPoolP is a kernel tree with pool p (and the default pool), both
// unlimited, and its plan.
func newPoolP(t *testing.T) (*kernel, planner.Desired) {
	t.Helper()
	k := newKernel(t, cgroupfs.Options{})
	d := planner.Desired{Pools: []*planner.PoolState{
		{Name: "default", Pool: cg(-1, 100000, 0, 100), Query: cg(-1, 100000, 0, 0)},
		{Name: "p", Pool: cg(-1, 100000, 0, 100), Query: cg(-1, 100000, 0, 0)},
	}}
	if _, err := k.tree.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	return k, d
}

// acctRoot is where the tree's usage is read: its cpuacct twin on v1.
func (k *kernel) acctRoot() string {
	if len(k.root.Twins) > 0 {
		return k.root.Twins[0]
	}
	return k.root.Path
}

// reader is a Reader of the tree's root, closed when t ends.
func (k *kernel) reader(t *testing.T) *cgroupfs.Reader {
	r := cgroupfs.NewReader(k.v2(), k.root.Path, k.acctRoot(), "", nil)
	t.Cleanup(func() { r.Close() })
	return r
}

// TestKernelDirReadDir lists cgroup directories on the real kernel, where
// ReadDir trusts a directory's link count to say it has no
// subdirectories: a leaf lists none, its parent lists it, and a cgroup
// whose child is removed lists none again.
func TestKernelDirReadDir(t *testing.T) {
	k := newKernel(t, cgroupfs.Options{})
	d, err := cgroupfs.OpenCgroupDir(k.root.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, cg := range []string{"a", "a/b", "a/c"} {
		if err := d.Mkdir(cg); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, cg := range []string{"a/b", "a/c", "a"} {
			d.Rmdir(cg)
		}
	})
	list := func(cg string) []string {
		t.Helper()
		subs, err := d.ReadDir(cg)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(subs)
		return subs
	}
	if got := list("a"); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("a lists %q, want [b c]", got)
	}
	if got := list("a/b"); len(got) != 0 {
		t.Errorf("a/b, a leaf, lists %q", got)
	}
	if err := d.Rmdir("a/c"); err != nil {
		t.Fatal(err)
	}
	if got := list("a"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("a after a/c went lists %q, want [b]", got)
	}
	if err := d.Rmdir("a/b"); err != nil {
		t.Fatal(err)
	}
	if got := list("a"); len(got) != 0 {
		t.Errorf("a after both went lists %q", got)
	}
}
