package cgroupfs

// The cpu controller: its files, how a cgroup's CPU limit is read back and
// written, and its counters.

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// The cpu controller's files (cpuacct's on v1).
//
//	v2 cpu.max               "max 100000" | "QUOTA PERIOD", µs
//	v2 cpu.max.burst         "0", µs
//	v2 cpu.weight            "100", 1..10000
//	v2, v1 cpu.idle          "0" | "1" (Linux >= 5.15; not on a root)
//	v1 cpu.cfs_quota_us      "-1" | µs
//	v1 cpu.cfs_period_us     µs, 1000..1000000
//	v1 cpu.cfs_burst_us      µs
//	v1 cpu.shares            2..262144
//	v2, v1 cpu.stat          counters ([observe.ParseCPUStatV2], [observe.ParseCPUStatV1])
//	v2, v1 cpu.stat.local    throttled time of the group's own tasks (Linux >= 6.6)
//	v2 cpu.pressure          PSI ([observe.ParsePressure])
//	v1 cpuacct.usage         ns; cpuacct.stat USER_HZ ticks
const (
	fileCPUMax       = "cpu.max"
	fileCPUMaxBurst  = "cpu.max.burst"
	fileCPUWeight    = "cpu.weight"
	fileCPUIdle      = "cpu.idle"
	fileCFSQuota     = "cpu.cfs_quota_us"
	fileCFSPeriod    = "cpu.cfs_period_us"
	fileCFSBurst     = "cpu.cfs_burst_us"
	fileShares       = "cpu.shares"
	fileCPUStat      = "cpu.stat"
	fileCPUStatLocal = "cpu.stat.local"
	fileCPUPressure  = "cpu.pressure"
	fileAcctUsage    = "cpuacct.usage"
	fileAcctStat     = "cpuacct.stat"
)

// cpuController manages a cgroup's CPU bandwidth (v2 cpu.max and
// cpu.max.burst, v1 cpu.cfs_*), its weight (v2 cpu.weight, v1
// cpu.shares) and cpu.idle; every tree uses it.
var cpuController = controller{
	name: HierCPU,
	desired: func(c planner.Cgroup, s *settings) {
		s.cpu = c.CPU
		if c.CPU.Weight != 0 { // v1 writes the weight as cpu.shares
			s.shares = c.CPU.Shares()
		}
	},
	check:  func(c planner.Cgroup) error { return c.CPU.Check() },
	refuse: func(t *Tree, d planner.Desired, _ uses) error { return t.checkIdle(d) },
	read:   readCPU,
	top: func(t *Tree, cur *current, _ planner.Desired) (err error) {
		if !t.v2 {
			cur.rootHi, err = t.v1RootBound()
		}
		return err
	},
	values: (*builder).cpuValues,
	stat:   (*Reader).cpuSample,
}

// readCPU reads cg's CPU bandwidth, weight (v2) or shares (v1) and
// cpu.idle beneath f into s.
func readCPU(f FS, cg string, v2 bool, dir string, s *settings) error {
	bw, err := readCPULimit(f, cg, v2, dir)
	if err != nil {
		return err
	}
	s.cpu.QuotaUsec, s.cpu.PeriodUsec, s.cpu.BurstUsec = bw.QuotaUsec, bw.PeriodUsec, bw.BurstUsec
	if v2 {
		if s.cpu.Weight, err = readOr(f, cg, fileCPUWeight, s.cpu.Weight, parseCount); err != nil {
			return err
		}
	} else if s.shares, err = readOr(f, cg, fileShares, s.shares, parseCount); err != nil {
		return err
	}
	s.cpu.Idle, err = readIdle(f, cg)
	return err
}

// readCPULimit reads cgroup cg's CPU bandwidth beneath f, the one reader
// of it: v2 cpu.max and cpu.max.burst; v1 cpu.cfs_quota_us (-1: none),
// cpu.cfs_period_us and cpu.cfs_burst_us. A missing burst file (a
// kernel before 5.14) is no burst; a missing cpu.max or period (a root
// cgroup, a hierarchy without the cpu controller) is an error wrapping
// fs.ErrNotExist. dir is f's directory, for messages. Weight, idle and
// CPUs are left zero: they are files of their own.
func readCPULimit(f FS, cg string, v2 bool, dir string) (cpulimit.Limit, error) {
	at := func(file string) string { return path.Join(dir, cg, file) }
	var l cpulimit.Limit
	var err error
	burst := fileCFSBurst
	if v2 {
		b, err := f.ReadFile(path.Join(cg, fileCPUMax))
		if err != nil {
			return l, err
		}
		if l, err = cpulimit.ParseCPUMax(string(b)); err != nil {
			return l, fmt.Errorf("%s: %w", at(fileCPUMax), err)
		}
		burst = fileCPUMaxBurst
	} else {
		if l.PeriodUsec, err = readValue(f, cg, fileCFSPeriod, dir, cpulimit.ParseCFSPeriod); err != nil {
			return l, err
		}
		if l.QuotaUsec, err = readValue(f, cg, fileCFSQuota, dir, cpulimit.ParseCFSQuota); err != nil {
			return l, err
		}
	}
	l.BurstUsec, err = readValue(f, cg, burst, dir, parseCount)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	return l, err
}

// readValue reads cg's file beneath f with parse; a parse error names
// the file below dir.
func readValue[T any](f FS, cg, file, dir string, parse func(string) (T, error)) (T, error) {
	b, err := f.ReadFile(path.Join(cg, file))
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(string(b))
	if err != nil {
		return v, fmt.Errorf("%s: %w", path.Join(dir, cg, file), err)
	}
	return v, nil
}

// CPUStat reads group's cpu.stat only (no usage on v1, no pressure): the
// cheap read for polling.
func (r *Reader) CPUStat(group string) (observe.CPUStat, error) {
	parse := observe.ParseCPUStatV1
	if r.v2 {
		parse = observe.ParseCPUStatV2
	}
	return read(r, r.cpuHier(), group, fileCPUStat, parse)
}

// Usage reads the CPU time group has used, in µs, from one file: v2's
// cpu.stat, v1's cpuacct.usage. known is false on v1 where the group has
// no cpuacct twin (the controller is not mounted, or the group is not in
// it), as for [Reader.ReadCPU]: the kernel keeps no usage there.
func (r *Reader) Usage(group string) (usec uint64, known bool, err error) {
	if r.v2 {
		st, err := r.CPUStat(group)
		return st.UsageUsec, err == nil, err
	}
	if r.dirs[HierCPUAcct] == "" {
		return 0, false, nil
	}
	nsec, err := read(r, HierCPUAcct, group, fileAcctUsage, observe.ParseCPUAcctUsage)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return nsec / 1000, true, nil
}

// cpuSample reads group's CPU counters into s: accounting and throttling
// ([Reader.ReadCPU]), the throttled time of the group's own tasks and, on
// v2, CPU pressure.
func (r *Reader) cpuSample(group string, s *observe.Sample) error {
	if err := r.readCPU(group, s, true); err != nil {
		return err
	}
	var err error
	if s.LocalThrottledUsec, err = r.localThrottled(group); err != nil {
		return err
	}
	if r.v2 {
		s.Pressure, err = r.pressure(group, fileCPUPressure)
	}
	return err
}

// CPUPressure reads group's CPU pressure (cpu.pressure, "some" and "full"
// stall totals in µs), the part of [Reader.Read] beside [Reader.ReadCPU]
// that a consumer of the CPU counters and their stalls reads; nil on v1,
// which keeps none, and where the group has none.
func (r *Reader) CPUPressure(group string) (*observe.Pressure, error) {
	if !r.v2 {
		return nil, nil
	}
	return r.pressure(group, fileCPUPressure)
}

// localThrottled reads throttled time from group's cpu.stat.local, in
// µs (v2 throttled_usec; v1 throttled_time, ns); nil when the kernel has
// no cpu.stat.local (before Linux 6.6) or the file has no such line (the
// root cgroup's is empty).
func (r *Reader) localThrottled(group string) (*uint64, error) {
	key, div := "throttled_time", uint64(1000)
	if r.v2 {
		key, div = "throttled_usec", 1
	}
	var ok bool
	v, err := read(r, r.cpuHier(), group, fileCPUStatLocal, func(b []byte) (v uint64, err error) {
		v, ok, err = observe.ParseLocalStat(b, key)
		return v, err
	})
	if errors.Is(err, fs.ErrNotExist) || err == nil && !ok {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v /= div
	return &v, nil
}

// pressure reads a PSI file of group (cpu.pressure, memory.pressure); nil
// when the group has none: the file is missing (a kernel without
// CONFIG_PSI, or booted with psi=0) or refuses reads with EOPNOTSUPP (PSI
// disabled for the group in cgroup.pressure).
func (r *Reader) pressure(group, file string) (*observe.Pressure, error) {
	p, err := read(r, HierUnified, group, file, observe.ParsePressure)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// usageV1 fills s's usage from the group's cpuacct twin, if any:
// cpuacct.usage (ns) and, when split is set, cpuacct.stat (user and
// system, USER_HZ ticks).
func (r *Reader) usageV1(group string, s *observe.Sample, split bool) error {
	if r.dirs[HierCPUAcct] == "" {
		return nil
	}
	usageNsec, err := read(r, HierCPUAcct, group, fileAcctUsage, observe.ParseCPUAcctUsage)
	if err == nil && split {
		var st observe.CPUStat
		if st, err = read(r, HierCPUAcct, group, fileAcctStat, observe.ParseCPUAcctStat); err == nil {
			s.CPU.UserUsec, s.CPU.SystemUsec = st.UserUsec, st.SystemUsec
		}
	}
	if err == nil {
		s.CPU.UsageUsec, s.UsageKnown = usageNsec/1000, true
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// readIdle reads cg's cpu.idle; a kernel without it (before 5.15) has no
// idle cgroups.
func readIdle(f FS, cg string) (bool, error) {
	b, err := f.ReadFile(path.Join(cg, fileCPUIdle))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	idle, err := cpulimit.ParseCPUIdle(string(b))
	if err != nil {
		return false, fmt.Errorf("%s: %w", path.Join(cg, fileCPUIdle), err)
	}
	return idle, nil
}

// checkIdle refuses a desired state with an idle pool on a kernel without
// cpu.idle. The file is looked for in the pool root or, before the root
// is made, in its parent; a cgroup v2 root cgroup has none on any kernel,
// so when the parent is the v2 mount's root the kernel's release decides
// (cpu.idle came with Linux 5.15, for v1 and v2 alike).
func (t *Tree) checkIdle(d planner.Desired) error {
	var idle []string
	for _, p := range d.Pools {
		if p.Pool.CPU.Idle || p.Query.CPU.Idle {
			idle = append(idle, p.Name)
		}
	}
	if len(idle) == 0 {
		return nil
	}
	h := t.order[0]
	f, err := t.mountFS(h)
	if err != nil {
		return fmt.Errorf("check cpu.idle: %w", err)
	}
	for dir := t.inMount(h, t.roots[h]); ; dir = path.Dir(dir) {
		if dir == "." && t.v2 {
			return checkIdleRelease(idle)
		}
		ok, err := isDir(f, dir)
		if err != nil {
			return fmt.Errorf("check cpu.idle: %w", err)
		}
		if ok {
			_, err := f.ReadFile(path.Join(dir, fileCPUIdle))
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("CPU_IDLE=1 in pool %s: %w: %s has no %s (idle cgroups need Linux 5.15 or later); accepted here: CPU_IDLE=-1",
					strings.Join(idle, ", "), ErrNoController, filepath.Join(t.mounts[h], dir), fileCPUIdle)
			}
			if err != nil {
				return fmt.Errorf("check cpu.idle: %w", err)
			}
			return nil
		}
		if dir == "." {
			return nil
		}
	}
}

// checkIdleRelease refuses idle pools on a kernel release before 5.15.
func checkIdleRelease(idle []string) error {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("check cpu.idle: uname: %w", err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	var major, minor int
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err != nil {
		return fmt.Errorf("check cpu.idle: kernel release %q: %w", release, err)
	}
	if major < 5 || major == 5 && minor < 15 {
		return fmt.Errorf("CPU_IDLE=1 in pool %s: %w: kernel %s has no cpu.idle (idle cgroups need Linux 5.15 or later); accepted here: CPU_IDLE=-1",
			strings.Join(idle, ", "), ErrNoController, release)
	}
	return nil
}

// v1RootBound reads the bandwidth of the pool root and its ancestors up to
// the mount (read only; a limit there is the operator's or systemd's) and
// returns the ratio of the nearest limited one, which bounds every pool.
func (t *Tree) v1RootBound() (uint64, error) {
	f, err := t.mountFS(HierCPU)
	if err != nil {
		return 0, err
	}
	for dir := t.inMount(HierCPU, t.roots[HierCPU]); ; dir = path.Dir(dir) {
		ok, err := isDir(f, dir)
		if err != nil {
			return 0, err
		}
		if ok {
			l, err := readCPULimit(f, dir, false, t.mounts[HierCPU])
			if err != nil {
				return 0, err
			}
			if l.Limited() {
				return l.Ratio(), nil
			}
		}
		if dir == "." {
			return math.MaxUint64, nil
		}
	}
}

// tightens reports whether tg's bandwidth ratio goes down.
func (b *builder) tightens(tg target) bool {
	return tg.want.cpu.Ratio() < tg.cur.cpu.Ratio()
}

// v1Bandwidth writes quota and period on v1, where every intermediate state
// must keep the cgroup's ratio at or below its parent's and at or above its
// limited children's (tg_cfs_schedulable_down). When only one of them
// changes that is one write. When both change, quota first is tried, then
// period first; when neither intermediate fits between the bounds, the
// quota is lifted to -1 (unlimited: the cgroup then inherits its parent's
// limit, always valid) for the period write.
func (b *builder) v1Bandwidth(cg string, from, to cpulimit.Limit) {
	q0, p0, q1, p1 := from.QuotaUsec, from.PeriodUsec, to.QuotaUsec, to.PeriodUsec
	quota := func(q int64) {
		b.add(HierCPU, cg, OpWrite, fileCFSQuota, cpulimit.Limit{QuotaUsec: q}.CFSQuota())
	}
	period := func(p int64) { b.add(HierCPU, cg, OpWrite, fileCFSPeriod, strconv.FormatInt(p, 10)) }
	switch {
	case p0 == p1:
		quota(q1)
		return
	case q0 == q1:
		period(p1)
		return
	}
	lo, hi := b.v1Bounds(cg)
	fits := func(q, p int64) bool {
		r := cpulimit.Limit{QuotaUsec: q, PeriodUsec: p}.Ratio()
		return r == math.MaxUint64 || (r >= lo && r <= hi)
	}
	switch {
	case fits(q1, p0):
		quota(q1)
		period(p1)
	case fits(q0, p1):
		period(p1)
		quota(q1)
	default:
		quota(cpulimit.Max)
		period(p1)
		quota(q1)
	}
}

// v1Bounds is the range cg's ratio must stay in: at least its limited
// children's, at most its parent's (for a pool, the pool root's bound).
func (b *builder) v1Bounds(cg string) (lo, hi uint64) {
	hi = b.cur.rootHi
	if parent := path.Dir(cg); parent != "." {
		if bw, ok := b.bw[parent]; ok {
			hi = bw.Ratio()
		}
	}
	for p, bw := range b.bw {
		if path.Dir(p) == cg {
			if r := bw.Ratio(); r != math.MaxUint64 && r > lo {
				lo = r
			}
		}
	}
	return lo, hi
}

// cpuValues writes what differs between tg's current and wanted CPU
// values. The
// burst goes first: the kernel (tg_set_cfs_bandwidth) refuses a burst above
// the quota, and a quota below the burst, so a burst that shrinks must be
// written before the quota shrinks, while a burst that grows above the
// current quota is refused (EINVAL) and written again after the quota.
func (b *builder) cpuValues(tg target) {
	cpuH := HierUnified
	if !b.cur.v2 {
		cpuH = HierCPU
	}
	w, c := tg.want, tg.cur
	if w.cpu.BurstUsec != c.cpu.BurstUsec {
		file := fileCFSBurst
		if b.cur.v2 {
			file = fileCPUMaxBurst
		}
		b.add(cpuH, tg.path, OpWrite, file, strconv.FormatInt(w.cpu.BurstUsec, 10))
		b.ops[len(b.ops)-1].RetryAfterMax = true
	}
	if w.cpu.QuotaUsec != c.cpu.QuotaUsec || w.cpu.PeriodUsec != c.cpu.PeriodUsec {
		if b.cur.v2 {
			b.add(cpuH, tg.path, OpWrite, fileCPUMax, w.cpu.CPUMax())
		} else {
			b.v1Bandwidth(tg.path, c.cpu, w.cpu)
		}
		b.bw[tg.path] = w.cpu
	}
	// The kernel refuses a weight for an idle cgroup, and leaving idle
	// sets the weight to the default: idle goes off before the weight is
	// written, on after (an idle cgroup's desired weight is 0, unwritten).
	idle := func() { b.add(cpuH, tg.path, OpWrite, fileCPUIdle, w.cpu.CPUIdle()) }
	if w.cpu.Idle != c.cpu.Idle && !w.cpu.Idle {
		idle()
		c.cpu.Weight, c.shares = cpulimit.DefaultWeight, cpulimit.DefaultShares
	}
	if b.cur.v2 && w.cpu.Weight != 0 && w.cpu.Weight != c.cpu.Weight {
		b.add(cpuH, tg.path, OpWrite, fileCPUWeight, strconv.FormatInt(w.cpu.Weight, 10))
	}
	if !b.cur.v2 && w.shares != 0 && w.shares != c.shares {
		b.add(cpuH, tg.path, OpWrite, fileShares, strconv.FormatInt(w.shares, 10))
	}
	if w.cpu.Idle != c.cpu.Idle && w.cpu.Idle {
		idle()
	}
}
