package observe_test

// Real-kernel tests: the readers against counters a live kernel keeps for
// a busy loop it throttles. They run on the host's cgroup v1 cpu hierarchy
// and, through scripts/vm/run.sh, under cgroup v2 in a VM
// (internal/kerneltest decides which run covers which mode). Bounds are
// generous on purpose: the host is shared, and the figures the kernel
// should produce are printed with t.Logf for the CI log.

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/observe"
)

func TestMain(m *testing.M) { kerneltest.Main(m) }

const periodUsec = 100_000

// bothModes is what every test here needs: the cpu controller and, on v1,
// cpuacct for usage.
var bothModes = kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}

// testTree is one test's cgroup subtree, written and read through
// cgroupfs, whose reader hands the bytes to observe's parsers.
type testTree struct {
	host kerneltest.Host
	root kerneltest.Root
	dirs []*cgroupfs.Dir // the cpu hierarchy's root first, then its v1 twins
	tree *cgroupfs.Reader
	// before is each moved burner's CPU time when it was moved in.
	before map[int]time.Duration
}

func newTestTree(t *testing.T, need kerneltest.Need) *testTree {
	t.Helper()
	h := kerneltest.Require(t, need)
	root := h.NewRoot(t, need)
	// Top weight against the rest of the host, so a throttled loop spends
	// its quota as soon as the period starts and throttled time follows
	// the quota, not the host's load.
	root.Favour(t)
	tt := &testTree{host: h, root: root, tree: cgroupfs.NewReader(true, root.Path, "", "", nil), before: map[int]time.Duration{}}
	if h.Mode == kerneltest.V1 {
		acct := root.Path // cpu and cpuacct mounted together
		if len(root.Twins) > 0 {
			acct = root.Twins[0]
		}
		tt.tree = cgroupfs.NewReader(false, root.Path, acct, "", nil)
	}
	t.Cleanup(func() { tt.tree.Close() })
	for _, p := range append([]string{root.Path}, root.Twins...) {
		d, err := cgroupfs.OpenDir(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		tt.dirs = append(tt.dirs, d)
	}
	if h.Mode == kerneltest.V2 {
		tt.write(t, ".", "cgroup.subtree_control", "+cpu")
	}
	return tt
}

// group creates a child cgroup in every hierarchy of the tree.
func (tt *testTree) group(t *testing.T, name string) {
	t.Helper()
	for _, d := range tt.dirs {
		if err := d.Mkdir(name); err != nil {
			t.Fatal(err)
		}
	}
}

// write writes a file in the cpu hierarchy.
func (tt *testTree) write(t *testing.T, group, file, value string) {
	t.Helper()
	if err := tt.dirs[0].WriteFile(group+"/"+file, value); err != nil {
		t.Fatal(err)
	}
}

// limit sets a CPU bandwidth limit: cpu.max and cpu.max.burst on v2,
// cpu.cfs_* on v1. Burst goes after the quota: the kernel refuses a burst
// above the quota in force.
func (tt *testTree) limit(t *testing.T, group string, quotaUsec, burstUsec int) {
	t.Helper()
	if tt.host.Mode == kerneltest.V2 {
		tt.write(t, group, "cpu.max", strconv.Itoa(quotaUsec)+" "+strconv.Itoa(periodUsec))
		tt.write(t, group, "cpu.max.burst", strconv.Itoa(burstUsec))
		return
	}
	tt.write(t, group, "cpu.cfs_period_us", strconv.Itoa(periodUsec))
	tt.write(t, group, "cpu.cfs_quota_us", strconv.Itoa(quotaUsec))
	tt.write(t, group, "cpu.cfs_burst_us", strconv.Itoa(burstUsec))
}

// weight sets cpu.weight on v2, or the equivalent cpu.shares on v1 (the
// default weight 100 is 1024 shares).
func (tt *testTree) weight(t *testing.T, group string, w int) {
	t.Helper()
	if tt.host.Mode == kerneltest.V2 {
		tt.write(t, group, "cpu.weight", strconv.Itoa(w))
		return
	}
	tt.write(t, group, "cpu.shares", strconv.Itoa(w*1024/100))
}

// move puts a ready burner into group in every hierarchy, noting the CPU
// time its start-up used outside.
func (tt *testTree) move(t *testing.T, group string, b *kerneltest.Burner) {
	t.Helper()
	tt.before[b.PID] = cpuSoFar(t, b.PID)
	for _, d := range tt.dirs {
		if err := d.WriteFile(group+"/cgroup.procs", strconv.Itoa(b.PID)); err != nil {
			t.Fatal(err)
		}
	}
}

func (tt *testTree) read(t *testing.T, group string) observe.Sample {
	t.Helper()
	s, err := tt.tree.Read(group)
	if err != nil {
		t.Fatal(err)
	}
	if !s.UsageKnown {
		t.Fatalf("%s: usage unknown; cpuacct twin missing below %s", group, tt.tree.Root())
	}
	return s
}

// run tells the burners to go and waits for them, returning the CPU time
// each used in its group (rusage minus what it used before the move) and
// the wall time until the last one exited.
func (tt *testTree) run(t *testing.T, bs ...*kerneltest.Burner) (cpu []time.Duration, wall time.Duration) {
	t.Helper()
	cpu = make([]time.Duration, len(bs))
	for i, b := range bs {
		cpu[i] = -tt.before[b.PID]
		if err := b.Go(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for i, b := range bs {
		used, err := b.Wait()
		if err != nil {
			t.Fatal(err)
		}
		cpu[i] += used
	}
	wall = time.Since(start)
	t.Logf("burners done %v after go, CPU time in the group %v", wall, cpu)
	return cpu, wall
}

// cpuSoFar returns the CPU time a waiting burner has used so far, summed
// over its threads: the first field of /proc/PID/task/TID/schedstat is a
// thread's run time in nanoseconds (/proc/PID/schedstat covers the main
// thread only).
func cpuSoFar(t *testing.T, pid int) time.Duration {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/schedstat")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			t.Fatalf("%s/%s/schedstat: %q", dir, task.Name(), b)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("%s/%s/schedstat: %v", dir, task.Name(), err)
		}
		sum += time.Duration(ns)
	}
	return sum
}

// checkUsage compares the usage observe read with the CPU time the burner
// used inside the group: both are the kernel's accounting of the same task,
// so they agree closely (cpuacct.stat's user/system split is in 10 ms
// ticks; usage itself is exact).
func checkUsage(t *testing.T, s observe.Sample, cpu time.Duration) {
	t.Helper()
	usage := time.Duration(s.CPU.UsageUsec) * time.Microsecond
	if d := usage - cpu; d.Abs() > 5*time.Millisecond+cpu/100 {
		t.Errorf("%s: usage_usec %v, but the burner used %v in the group", s.Group, usage, cpu)
	}
	if split := time.Duration(s.CPU.UserUsec+s.CPU.SystemUsec) * time.Microsecond; (split - usage).Abs() > 30*time.Millisecond+usage/20 {
		t.Errorf("%s: user+system %v far from usage %v", s.Group, split, usage)
	}
}

// TestKernelQuotaThrottling: a busy loop pinned to one CPU for 2 s in a
// group capped at 20% of a CPU (20 ms per 100 ms) is throttled in about 20
// periods for about 80 ms each: ~1.6 s. How often and how long it was
// throttled is timing, judged only while the machine gives the test its
// CPU (kerneltest.Root.Retry); what no machine can make right (more
// throttled periods than periods, usage over the quota) fails at once.
func TestKernelQuotaThrottling(t *testing.T) {
	tt := newTestTree(t, bothModes)
	tt.root.Retry(t, 3, func(n int) string {
		group := fmt.Sprintf("capped%d", n)
		tt.group(t, group)
		tt.limit(t, group, 20_000, 0)
		b := kerneltest.StartBurner(t, kerneltest.Burn{For: 2 * time.Second, Clock: kerneltest.Wall, Pin: true, CPU: 0})
		tt.move(t, group, b)
		cpus, wall := tt.run(t, b)
		s := tt.read(t, group)
		t.Logf("%s: cpu.stat %+v", tt.host.Mode, s.CPU)
		checkUsage(t, s, cpus[0])
		checkQuotaBounds(t, s.CPU)
		return tt.quotaThrottled(t, s, wall)
	})
}

// checkQuotaBounds fails the test on what a 20 ms quota never allows,
// however busy the machine.
func checkQuotaBounds(t *testing.T, st observe.CPUStat) {
	t.Helper()
	if st.NrThrottled > st.NrPeriods {
		t.Errorf("nr_throttled %d of %d periods: more than there were", st.NrThrottled, st.NrPeriods)
	}
	if st.NrThrottled > 0 && time.Duration(st.ThrottledUsec)*time.Microsecond/time.Duration(st.NrThrottled) > 100*time.Millisecond {
		t.Errorf("throttled %d µs in %d periods: more than a period each", st.ThrottledUsec, st.NrThrottled)
	}
	// The group starts with one quota and gets one per period; beyond
	// that only the overrun the scheduler tick lets through before it
	// notices the quota is spent (4 ms ticks at HZ=250, more under
	// emulation), which the next period pays back.
	if limit := (st.NrPeriods+1)*20_000 + 10_000; st.UsageUsec > limit {
		t.Errorf("usage_usec %d over quota x (periods+1) + 10 ms = %d", st.UsageUsec, limit)
	}
	if st.NrBursts != 0 || st.BurstUsec != 0 {
		t.Errorf("bursts %d (%d µs) without a burst allowance", st.NrBursts, st.BurstUsec)
	}
}

// quotaThrottled judges the timing of a 2 s loop at 20%: it says why the
// periods or the throttled time are off, or "" when they are right.
func (tt *testTree) quotaThrottled(t *testing.T, s observe.Sample, wall time.Duration) string {
	t.Helper()
	st := s.CPU
	// Periods count while the group is active: the 2 s loop, its exit
	// (slow when throttled, slower under emulation) and one idle period
	// after it. Wall time is what the test saw from go to exit.
	walls := uint64(wall / (periodUsec * time.Microsecond))
	if st.NrPeriods < 18 || st.NrPeriods+2 < walls || st.NrPeriods > walls+3 {
		return fmt.Sprintf("nr_periods %d, want about %d (%v of 100 ms periods)", st.NrPeriods, walls, wall)
	}
	// A machine that does not let the loop spend its 20 ms in every
	// period throttles it in fewer periods, for less time.
	if st.NrThrottled < st.NrPeriods/2 {
		return fmt.Sprintf("nr_throttled %d of %d periods, want nearly all", st.NrThrottled, st.NrPeriods)
	}
	// Pinned to one CPU, the group is throttled at most while it exists:
	// about 80 ms of each 100 ms period, ~1.6 s for 2 s.
	if throttled := time.Duration(st.ThrottledUsec) * time.Microsecond; throttled < time.Second || throttled > wall {
		return fmt.Sprintf("throttled_usec %v, want about 1.6 s and at most the %v the loop ran", throttled, wall)
	}
	if s.LocalThrottledUsec != nil {
		// cpu.stat.local (Linux 6.6+): the group's own tasks waited the
		// whole throttled time, as they were its only tasks.
		if d := int64(*s.LocalThrottledUsec) - int64(st.ThrottledUsec); math.Abs(float64(d)) > 0.1*float64(st.ThrottledUsec)+10_000 {
			t.Errorf("cpu.stat.local throttled %d µs, cpu.stat %d µs: want about equal", *s.LocalThrottledUsec, st.ThrottledUsec)
		}
	}
	if tt.host.Mode == kerneltest.V2 {
		checkThrottlingPressure(t, s, wall)
	}
	return ""
}

// checkThrottlingPressure: throttling shows in cpu.pressure. While the
// group is throttled its only thread is runnable and waits, so the time is
// "some" pressure, and "full" too (no thread of the group runs): both
// totals cover most of the throttled time and at most the wall time.
func checkThrottlingPressure(t *testing.T, s observe.Sample, wall time.Duration) {
	t.Helper()
	p := s.Pressure
	if p == nil {
		t.Fatal("no cpu.pressure on v2 (the VM kernel has PSI on)")
	}
	if p.Full == nil {
		t.Fatal("cpu.pressure without a full line (the VM kernel is 6.1, full is there since 5.13)")
	}
	throttled := time.Duration(s.CPU.ThrottledUsec) * time.Microsecond
	some := time.Duration(p.Some.TotalUsec) * time.Microsecond
	full := time.Duration(p.Full.TotalUsec) * time.Microsecond
	t.Logf("throttled %v, cpu.pressure some %v, full %v, wall %v", throttled, some, full, wall)
	if some < throttled*3/4 || some > wall+time.Second {
		t.Errorf("cpu.pressure some total %v: want most of the throttled %v and at most the %v of wall time", some, throttled, wall)
	}
	if full < throttled/2 || full > some {
		t.Errorf("cpu.pressure full total %v: want at least half the throttled %v and at most some %v", full, throttled, some)
	}
}

// TestKernelWeightSplit: two busy loops pinned to the same CPU in sibling
// groups weighted 100 and 300 (v1: 1024 and 3072 shares) split it 1/4 to
// 3/4.
func TestKernelWeightSplit(t *testing.T) {
	tt := newTestTree(t, bothModes)
	weights := map[string]int{"light": 100, "heavy": 300}
	var bs []*kerneltest.Burner
	groups := []string{"light", "heavy"}
	for _, g := range groups {
		tt.group(t, g)
		tt.weight(t, g, weights[g])
		b := kerneltest.StartBurner(t, kerneltest.Burn{For: 2 * time.Second, Clock: kerneltest.Wall, Pin: true, CPU: 0})
		tt.move(t, g, b)
		bs = append(bs, b)
	}
	cpu, _ := tt.run(t, bs...)
	light, heavy := tt.read(t, "light"), tt.read(t, "heavy")
	checkUsage(t, light, cpu[0])
	checkUsage(t, heavy, cpu[1])
	share := float64(light.CPU.UsageUsec) / float64(light.CPU.UsageUsec+heavy.CPU.UsageUsec)
	t.Logf("%s: light usage %d µs, heavy %d µs: light share %.3f", tt.host.Mode, light.CPU.UsageUsec, heavy.CPU.UsageUsec, share)
	if share < 0.18 || share > 0.32 {
		t.Errorf("light share %.3f, want about 0.25", share)
	}
	for _, s := range []observe.Sample{light, heavy} {
		if s.CPU.NrPeriods != 0 || s.CPU.NrThrottled != 0 {
			t.Errorf("%s: periods %d, throttled %d without a quota", s.Group, s.CPU.NrPeriods, s.CPU.NrThrottled)
		}
	}
}

// TestKernelBurst: a group that left quota unused while its period timer
// ran banks it, up to the burst allowance, and a busy loop then spends
// quota+burst in one period: nr_bursts >= 1, at most burst µs each.
func TestKernelBurst(t *testing.T) {
	tt := newTestTree(t, bothModes)
	const quota, burst = 20_000, 20_000
	tt.group(t, "bursty")
	tt.limit(t, "bursty", quota, burst)

	// Warm-up: 5 ms of work starts the period timer; the next two
	// refills bank the unused quota (the kernel refills even an idle
	// group's runtime, up to quota+burst, before it stops the timer).
	warm := kerneltest.StartBurner(t, kerneltest.Burn{For: 5 * time.Millisecond, Clock: kerneltest.CPUTime, Pin: true, CPU: 0})
	tt.move(t, "bursty", warm)
	tt.run(t, warm)
	time.Sleep(3 * periodUsec * time.Microsecond)
	before := tt.read(t, "bursty").CPU

	b := kerneltest.StartBurner(t, kerneltest.Burn{For: time.Second, Clock: kerneltest.Wall, Pin: true, CPU: 0})
	tt.move(t, "bursty", b)
	tt.run(t, b)
	st := tt.read(t, "bursty").CPU
	t.Logf("%s: after warm-up %+v, after the loop %+v", tt.host.Mode, before, st)

	// The warm-up's own exit may already burst; the loop must burst too.
	d := st.Sub(before)
	if d.NrBursts < 1 {
		t.Errorf("the loop made %d bursts after an idle warm-up, want at least 1", d.NrBursts)
	}
	if d.BurstUsec == 0 || d.BurstUsec > d.NrBursts*burst {
		t.Errorf("the loop's burst_usec %d in %d bursts, want 1..%d each", d.BurstUsec, d.NrBursts, burst)
	}
	if d.NrThrottled == 0 {
		t.Errorf("never throttled: a 1 s busy loop must exhaust 20 ms per period")
	}
}

// TestKernelModelHost reads what the throttling models assume of this very
// kernel (observe.ReadModelHost): on a live kernel each file it reads is
// absent or understood, never "cannot be read", the release is uname's,
// and CFS bandwidth control, which every test here needs, is there. The
// caveats found are logged: none on the development host (6.18, no
// sched_ext), the tick's source in the VM.
func TestKernelModelHost(t *testing.T) {
	h := observe.ReadModelHost("/")
	if h.ReleaseErr != "" || h.Release != observe.KernelRelease() {
		t.Errorf("release %q (%s), uname says %q", h.Release, h.ReleaseErr, observe.KernelRelease())
	}
	for what, err := range map[string]string{"sched_ext": h.Scheduler.Err, "slice": h.SliceErr, "nohz_full": h.NohzErr} {
		if err != "" {
			t.Errorf("%s not understood on a live kernel: %s", what, err)
		}
	}
	if h.NoBandwidth {
		t.Error("no sched_cfs_bandwidth_slice_us on a kernel that enforces cpu.max")
	}
	t.Logf("Linux %s, sched_ext %q, nohz_full %q, skew_tick %v; caveats: %q", h.Release, h.Scheduler.ExtState, h.NohzFull, h.SkewTick, h.Caveats().String())
}
