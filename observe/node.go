package observe

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/poolagent/poolagent/cpulimit"
)

// NodeCapacity is the CPU and memory this process may use on its host:
// the node a plan is made for when the operator gives no figures.
type NodeCapacity struct {
	// CPUs is OnlineCPUs lowered to CgroupCPUs when that is smaller,
	// vCPU; fractional when a quota caps this process's cgroup.
	CPUs float64
	// Online is /sys/devices/system/cpu/online, the CPUs a pool's CPUS
	// may name; OnlineCPUs counts them.
	Online     cpulimit.CPUSet
	OnlineCPUs int
	// CgroupCPUs is the tightest CPU bandwidth limit (quota / period) on
	// this process's cgroup or any ancestor, vCPU; 0 when there is none.
	CgroupCPUs float64
	// MemoryBytes is MemTotalBytes lowered to CgroupMemoryBytes when that
	// is smaller.
	MemoryBytes int64
	// MemTotalBytes is /proc/meminfo MemTotal, bytes.
	MemTotalBytes int64
	// CgroupMemoryBytes is the tightest memory limit on this process's
	// cgroup or any ancestor, bytes; 0 when there is none.
	CgroupMemoryBytes int64
}

// ReadNodeCapacity reads, below root ("/" on a live host, a fixture tree
// in tests):
//
//	sys/devices/system/cpu/online   CPU list, "0-3,8"
//	proc/meminfo                    MemTotal
//	proc/self/cgroup, mountinfo     this process's cgroups and their mounts
//
// and, along this process's cgroup path from its own cgroup up to the
// hierarchy's root, the limit files: v2 cpu.max ("max 100000" or
// "QUOTA PERIOD", µs) and memory.max ("max" or bytes); v1
// cpu.cfs_quota_us (-1 = none) with cpu.cfs_period_us, and
// memory.limit_in_bytes. A missing limit file means no limit there (the
// root cgroup has none; a hybrid host's cgroup2 mount has no cpu
// controller).
func ReadNodeCapacity(root string) (NodeCapacity, error) {
	var n NodeCapacity
	onlinePath := filepath.Join(root, "sys/devices/system/cpu/online")
	b, err := os.ReadFile(onlinePath)
	if err != nil {
		return n, fmt.Errorf("read online CPUs: %w", err)
	}
	if n.Online, err = parseOnline(string(b)); err != nil {
		return n, fmt.Errorf("%s: %w", onlinePath, err)
	}
	n.OnlineCPUs = n.Online.Count()

	pfs, err := procfs.NewFS(filepath.Join(root, "proc"))
	if err != nil {
		return n, fmt.Errorf("open proc: %w", err)
	}
	mi, err := pfs.Meminfo()
	if err != nil {
		return n, fmt.Errorf("read meminfo: %w", err)
	}
	if mi.MemTotalBytes == nil || *mi.MemTotalBytes == 0 || *mi.MemTotalBytes > math.MaxInt64 {
		return n, errors.New("read meminfo: no MemTotal")
	}
	n.MemTotalBytes = int64(*mi.MemTotalBytes)

	self, err := pfs.Self()
	if err != nil {
		return n, fmt.Errorf("find own process: %w", err)
	}
	groups, err := self.Cgroups()
	if err != nil {
		return n, fmt.Errorf("read own cgroups: %w", err)
	}
	mounts, err := self.MountInfo()
	if err != nil {
		return n, fmt.Errorf("read own mountinfo: %w", err)
	}
	for _, g := range groups {
		for _, m := range mounts {
			dir, ok := cgroupDir(root, g, m)
			if !ok {
				continue
			}
			top := filepath.Join(root, m.MountPoint)
			if err := n.readLimits(dir, top, m.FSType == "cgroup2"); err != nil {
				return n, err
			}
		}
	}

	n.CPUs = float64(n.OnlineCPUs)
	if n.CgroupCPUs > 0 && n.CgroupCPUs < n.CPUs {
		n.CPUs = n.CgroupCPUs
	}
	n.MemoryBytes = n.MemTotalBytes
	if n.CgroupMemoryBytes > 0 && n.CgroupMemoryBytes < n.MemoryBytes {
		n.MemoryBytes = n.CgroupMemoryBytes
	}
	return n, nil
}

// cgroupDir is the directory of cgroup g in mount m, when m mounts g's
// hierarchy and g lies inside the mount: the v2 line (hierarchy 0) goes
// with the cgroup2 mount, a v1 line with the cgroup mount whose super
// options name its cpu or memory controller.
func cgroupDir(root string, g procfs.Cgroup, m *procfs.MountInfo) (string, bool) {
	switch {
	case g.HierarchyID == 0 && m.FSType == "cgroup2":
	case g.HierarchyID != 0 && m.FSType == "cgroup":
		shared := false
		for _, c := range g.Controllers {
			if _, ok := m.SuperOptions[c]; ok && (c == "cpu" || c == "memory") {
				shared = true
			}
		}
		if !shared {
			return "", false
		}
	default:
		return "", false
	}
	rel, err := filepath.Rel(m.Root, g.Path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false // the cgroup is outside what this mount shows
	}
	return filepath.Join(root, m.MountPoint, rel), true
}

// readLimits walks from dir up to top (inclusive) and keeps the
// tightest CPU and memory limits found.
func (n *NodeCapacity) readLimits(dir, top string, v2 bool) error {
	for {
		if err := n.readLimitsIn(dir, v2); err != nil {
			return err
		}
		if dir == top || !strings.HasPrefix(dir, top) {
			return nil
		}
		dir = filepath.Dir(dir)
	}
}

// readLimitsIn reads one cgroup directory's limit files.
func (n *NodeCapacity) readLimitsIn(dir string, v2 bool) error {
	var cpus float64
	var mem int64
	var err error
	if v2 {
		var limit cpulimit.Limit
		if limit, err = readLimit(dir, "cpu.max", cpulimit.ParseCPUMax); err != nil {
			return err
		}
		cpus = limit.VCPU()
		if mem, err = readLimit(dir, "memory.max", ParseMemoryLimit); err != nil {
			return err
		}
	} else {
		period, err := readLimit(dir, "cpu.cfs_period_us", parseCFSPeriod)
		if err != nil {
			return err
		}
		if period > 0 {
			if cpus, err = readLimit(dir, "cpu.cfs_quota_us", func(q string) (float64, error) { return parseCFSQuota(q, period) }); err != nil {
				return err
			}
		}
		if mem, err = readLimit(dir, "memory.limit_in_bytes", ParseMemoryLimit); err != nil {
			return err
		}
	}
	if cpus > 0 && (n.CgroupCPUs == 0 || cpus < n.CgroupCPUs) {
		n.CgroupCPUs = cpus
	}
	if mem > 0 && (n.CgroupMemoryBytes == 0 || mem < n.CgroupMemoryBytes) {
		n.CgroupMemoryBytes = mem
	}
	return nil
}

// readLimit reads the limit file dir/name with parse; a file that does not
// exist is no limit there, the zero value.
func readLimit[T any](dir, name string, parse func(string) (T, error)) (T, error) {
	v, err := readFile(dir, name, func(b []byte) (T, error) { return parse(string(b)) })
	if errors.Is(err, fs.ErrNotExist) {
		var zero T
		return zero, nil
	}
	return v, err
}

// parseOnline reads /sys/devices/system/cpu/online, a CPU list
// (cpulimit.ParseCPUSet) that names at least the CPU reading it.
func parseOnline(s string) (cpulimit.CPUSet, error) {
	set, err := cpulimit.ParseCPUSet(s)
	if err == nil && set.IsEmpty() {
		err = errors.New("empty CPU list; want the online CPUs, such as \"0-3\"")
	}
	return set, err
}

// parseCFSPeriod reads cgroup v1 cpu.cfs_period_us, µs > 0.
func parseCFSPeriod(s string) (uint64, error) {
	p, err := strconv.ParseUint(strings.TrimSpace(s), 10, 63)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("cfs_period_us %q: want a positive number of µs", strings.TrimSpace(s))
	}
	return p, nil
}

// parseCFSQuota reads cgroup v1 cpu.cfs_quota_us (µs, -1 = none) as vCPU
// of periodUsec (> 0); 0 without a quota.
func parseCFSQuota(quota string, periodUsec uint64) (float64, error) {
	q, err := strconv.ParseInt(strings.TrimSpace(quota), 10, 64)
	if err != nil || q < -1 || q == 0 {
		return 0, fmt.Errorf("cfs_quota_us %q: want -1 or a positive number of µs", strings.TrimSpace(quota))
	}
	if q == -1 {
		return 0, nil
	}
	return float64(q) / float64(periodUsec), nil
}

// parseCPUWeight reads cgroup v2 cpu.weight: 1..10000.
func parseCPUWeight(s string) (float64, error) {
	w, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || w < cpulimit.MinWeight || w > cpulimit.MaxWeight {
		return 0, fmt.Errorf("cpu.weight %q: want %d..%d", strings.TrimSpace(s), cpulimit.MinWeight, cpulimit.MaxWeight)
	}
	return float64(w), nil
}

// parseCPUShares reads cgroup v1 cpu.shares (2..262144) as the weight it
// gives, in cpu.weight's units (shares × 100 / 1024).
func parseCPUShares(s string) (float64, error) {
	shares, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || shares < 2 || shares > 262144 {
		return 0, fmt.Errorf("cpu.shares %q: want 2..262144", strings.TrimSpace(s))
	}
	return float64(shares) * cpulimit.DefaultWeight / 1024, nil
}

// CgroupLimit is a CPU or memory limit, or a CPU demotion, set on one
// cgroup.
type CgroupLimit struct {
	// Cgroup is the cgroup, "/"-rooted below its hierarchy's mount as
	// /proc/PID/cgroup names it ("/user.slice/user-1000.slice").
	Cgroup string
	// File is the limit's file: cpu.max or memory.max (v2),
	// cpu.cfs_quota_us or memory.limit_in_bytes (v1).
	File string
	// Value is the file's content, trimmed: "10000 100000", "536870912".
	Value string
	// CPUs is a CPU limit in vCPU (quota / period); 0 for a memory limit.
	CPUs float64
	// MemoryBytes is a memory limit in bytes; 0 for a CPU limit.
	MemoryBytes int64
	// CPUSet is, for a cpuset.cpus limit, its CPUs (CPUs is then their
	// count); empty otherwise.
	CPUSet cpulimit.CPUSet
	// Weight is, for a CPU demotion (cpu.idle 1, or a cpu.weight or v1
	// cpu.shares below the default), the weight the scheduler gives the
	// cgroup in cpu.weight's units: cpulimit.IdleWeight when idle,
	// shares × 100 / 1024 for cpu.shares; 0 otherwise.
	Weight float64
}

// Limit files [ReadCgroupLimits] reads, by kind of hierarchy.
const (
	LimitsV2       = "v2"     // cpu.max, memory.max, cpuset.cpus, cpu.weight, cpu.idle
	LimitsV1CPU    = "cpu"    // cpu.cfs_quota_us over cpu.cfs_period_us, cpu.shares, cpu.idle
	LimitsV1Memory = "memory" // memory.limit_in_bytes
	LimitsV1CPUSet = "cpuset" // cpuset.cpus
)

// ReadCgroupLimits reads the limits set on cgroup (a "/"-rooted path)
// below the hierarchy mounted at mount, whose limit files are those of
// kind (LimitsV2, LimitsV1CPU, LimitsV1Memory, LimitsV1CPUSet): v2
// cpu.max ("max PERIOD" or "QUOTA PERIOD", µs) and memory.max ("max" or
// bytes); v1 cpu.cfs_quota_us (µs, -1 = none) over cpu.cfs_period_us, and
// memory.limit_in_bytes (bytes; the page-rounded maximum = none); v2 and
// v1 cpuset.cpus (a CPU list), a limit when it names fewer CPUs than the
// hierarchy's root has (v2 cpuset.cpus.effective, v1 cpuset.cpus; an
// empty v2 list is its parent's); and a CPU demotion: cpu.idle "1" (v2 and
// v1), else a v2 cpu.weight (1..10000) or v1 cpu.shares (2..262144) giving
// a weight below cpulimit.DefaultWeight (see CgroupLimit.Weight). A file
// that is missing or says "no limit" adds nothing.
func ReadCgroupLimits(mount, cgroup, kind string) ([]CgroupLimit, error) {
	dir := filepath.Join(mount, cgroup)
	var out []CgroupLimit
	cpu := func(file string, vcpu float64, raw string) {
		if vcpu > 0 {
			out = append(out, CgroupLimit{Cgroup: cgroup, File: file, Value: raw, CPUs: vcpu})
		}
	}
	memory := func(file string) error {
		mem, raw, err := readLimitRaw(dir, file, ParseMemoryLimit)
		if mem > 0 {
			out = append(out, CgroupLimit{Cgroup: cgroup, File: file, Value: raw, MemoryBytes: mem})
		}
		return err
	}
	// demotion adds cpu.idle 1, or else the weight file's weight when
	// below the default.
	demotion := func(file string, parse func(string) (float64, error)) error {
		idle, raw, err := readLimitRaw(dir, "cpu.idle", cpulimit.ParseCPUIdle)
		if err != nil {
			return err
		}
		if idle {
			out = append(out, CgroupLimit{Cgroup: cgroup, File: "cpu.idle", Value: raw, Weight: cpulimit.IdleWeight})
			return nil
		}
		weight, raw, err := readLimitRaw(dir, file, parse)
		if weight > 0 && weight < cpulimit.DefaultWeight {
			out = append(out, CgroupLimit{Cgroup: cgroup, File: file, Value: raw, Weight: weight})
		}
		return err
	}
	switch kind {
	case LimitsV2:
		limit, raw, err := readLimitRaw(dir, "cpu.max", cpulimit.ParseCPUMax)
		if err != nil {
			return nil, err
		}
		cpu("cpu.max", limit.VCPU(), raw)
		if err := memory("memory.max"); err != nil {
			return nil, err
		}
		if err := demotion("cpu.weight", parseCPUWeight); err != nil {
			return nil, err
		}
		l, err := readCPUSetLimit(mount, cgroup, "cpuset.cpus.effective")
		if err != nil || l == nil {
			return out, err
		}
		out = append(out, *l)
	case LimitsV1CPU:
		period, _, err := readLimitRaw(dir, "cpu.cfs_period_us", parseCFSPeriod)
		if err != nil {
			return nil, err
		}
		if period > 0 {
			vcpu, raw, err := readLimitRaw(dir, "cpu.cfs_quota_us", func(q string) (float64, error) { return parseCFSQuota(q, period) })
			if err != nil {
				return nil, err
			}
			cpu("cpu.cfs_quota_us", vcpu, fmt.Sprintf("%s (period %d)", raw, period))
		}
		if err := demotion("cpu.shares", parseCPUShares); err != nil {
			return nil, err
		}
	case LimitsV1Memory:
		if err := memory("memory.limit_in_bytes"); err != nil {
			return nil, err
		}
	case LimitsV1CPUSet:
		l, err := readCPUSetLimit(mount, cgroup, "cpuset.cpus")
		if err != nil || l == nil {
			return out, err
		}
		out = append(out, *l)
	default:
		return nil, fmt.Errorf("limit kind %q: want %q, %q, %q or %q", kind, LimitsV2, LimitsV1CPU, LimitsV1Memory, LimitsV1CPUSet)
	}
	return out, nil
}

// readCPUSetLimit is cgroup's cpuset.cpus as a limit when it names fewer
// CPUs than rootFile of the hierarchy's root (the CPUs all cgroups start
// from); nil without one: no file, an empty list, or every CPU.
func readCPUSetLimit(mount, cgroup, rootFile string) (*CgroupLimit, error) {
	set, raw, err := readLimitRaw(filepath.Join(mount, cgroup), "cpuset.cpus", cpulimit.ParseCPUSet)
	if err != nil || set.IsEmpty() {
		return nil, err
	}
	all, _, err := readLimitRaw(mount, rootFile, cpulimit.ParseCPUSet)
	if err != nil || all.IsEmpty() || all.SubsetOf(set) {
		return nil, err
	}
	return &CgroupLimit{Cgroup: cgroup, File: "cpuset.cpus", Value: raw, CPUs: float64(set.Count()), CPUSet: set}, nil
}

// readLimitRaw reads the limit file dir/name with parse and returns the
// value and the file's trimmed content; a missing file is the zero value
// and "".
func readLimitRaw[T any](dir, name string, parse func(string) (T, error)) (T, string, error) {
	var zero T
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return zero, "", nil
	}
	if err != nil {
		return zero, "", err
	}
	raw := strings.TrimSpace(string(b))
	v, err := parse(raw)
	if err != nil {
		return zero, raw, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return v, raw, nil
}
