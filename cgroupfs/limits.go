package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/observe"
)

// Limits of cgroups that are not poolagent's: the ones this process runs
// in (the node a plan is made for) and the ones a process leaves when it
// is placed in a query cgroup. They are read, never written, beneath the
// hierarchy's mount.

// ReadNodeCapacity reads the host's CPUs and memory below root ("/" on a
// live host, a fixture tree in tests; [observe.ReadHostCapacity]) and
// lowers them to the tightest limits on this process's cgroups and their
// ancestors up to each hierarchy's root (its proc/self/cgroup lines
// matched with the mounts of proc/self/mountinfo): v2 cpu.max and
// memory.max, v1 cpu.cfs_quota_us over cpu.cfs_period_us and
// memory.limit_in_bytes. A missing limit file is no limit there (the root
// cgroup has none; a hybrid host's cgroup2 mount has no cpu controller).
func ReadNodeCapacity(root string) (observe.NodeCapacity, error) {
	n, err := observe.ReadHostCapacity(root)
	if err != nil {
		return n, err
	}
	pfs, err := procfs.NewFS(filepath.Join(root, "proc"))
	if err != nil {
		return n, fmt.Errorf("open proc: %w", err)
	}
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
			cg, ok := cgroupIn(g, m)
			if !ok {
				continue
			}
			if err := withinLimits(&n, filepath.Join(root, m.MountPoint), cg, m.FSType == "cgroup2"); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// cgroupIn is cgroup g's path below mount m ("." for its root), when m
// mounts g's hierarchy and g lies inside the mount: the v2 line
// (hierarchy 0) goes with the cgroup2 mount, a v1 line with the cgroup
// mount whose super options name its cpu or memory controller.
func cgroupIn(g procfs.Cgroup, m *procfs.MountInfo) (string, bool) {
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
	return filepath.ToSlash(rel), true
}

// withinLimits lowers n to the CPU and memory limits of cg and each of
// its ancestors beneath the mount at dir.
func withinLimits(n *observe.NodeCapacity, dir, cg string, v2 bool) error {
	f, err := OpenDir(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	for ; ; cg = path.Dir(cg) {
		cpu, err := readCPULimit(f, cg, v2, dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		mem, err := readMemoryLimit(f, cg, v2, dir)
		if err != nil {
			return err
		}
		n.Within(cpu.VCPU(), max(mem, 0))
		if cg == "." {
			return nil
		}
	}
}

// ReadLimits reads the limits set on cgroup (a "/"-rooted path, as
// /proc/PID/cgroup names it) in hierarchy hier mounted at mount:
// HierUnified cpu.max ("max PERIOD" or "QUOTA PERIOD", µs), memory.max
// ("max" or bytes) and cpuset.cpus; HierCPU cpu.cfs_quota_us (µs, -1 =
// none) over cpu.cfs_period_us; HierMemory memory.limit_in_bytes (bytes;
// the page-rounded maximum = none); HierCPUSet cpuset.cpus. A CPU list
// is a limit when it names fewer CPUs than the hierarchy's root has (v2
// cpuset.cpus.effective, v1 cpuset.cpus; an empty v2 list is its
// parent's). A CPU demotion counts too, in HierUnified and HierCPU:
// cpu.idle 1, or else a cpu.weight (v2) or cpu.shares (v1) giving a
// weight below the default (observe.CgroupLimit.Weight). A file that is
// missing or says "no limit" adds nothing.
func ReadLimits(mount, cgroup, hier string) ([]observe.CgroupLimit, error) {
	f, err := OpenDir(mount)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cg := strings.TrimPrefix(path.Clean("/"+cgroup), "/")
	if cg == "" {
		cg = "."
	}
	r := &limitReader{f: f, mount: mount, cgroup: cgroup, cg: cg}
	switch hier {
	case HierUnified:
		err = errors.Join(r.cpu(true), r.memory(true), r.cpuset(fileCPUSetEff), r.demotion(true))
	case HierCPU:
		err = errors.Join(r.cpu(false), r.demotion(false))
	case HierMemory:
		err = r.memory(false)
	case HierCPUSet:
		err = r.cpuset(fileCPUSetCPUs)
	default:
		err = fmt.Errorf("hierarchy %q: want %q, %q, %q or %q", hier, HierUnified, HierCPU, HierMemory, HierCPUSet)
	}
	if err != nil {
		return nil, err
	}
	return r.out, nil
}

// limitReader collects the limits ReadLimits finds on one cgroup, each
// controller's by one method; v2 says the hierarchy is cgroup v2's.
type limitReader struct {
	f      *Dir   // the hierarchy's mount
	mount  string // its path, for errors
	cgroup string // as given, for CgroupLimit.Cgroup
	cg     string // relative to the mount, "." for its root
	out    []observe.CgroupLimit
}

func (r *limitReader) add(l observe.CgroupLimit) {
	l.Cgroup = r.cgroup
	r.out = append(r.out, l)
}

// cpu adds a CPU bandwidth limit: v2 cpu.max, v1 cpu.cfs_quota_us.
func (r *limitReader) cpu(v2 bool) error {
	l, err := readCPULimit(r.f, r.cg, v2, r.mount)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !l.Limited() {
		return nil
	}
	if err != nil {
		return err
	}
	if v2 {
		r.add(observe.CgroupLimit{File: fileCPUMax, Value: l.CPUMax(), CPUs: l.VCPU()})
	} else {
		r.add(observe.CgroupLimit{File: fileCFSQuota, Value: fmt.Sprintf("%s (period %d)", l.CFSQuota(), l.PeriodUsec), CPUs: l.VCPU()})
	}
	return nil
}

// memory adds a memory limit: v2 memory.max, v1 memory.limit_in_bytes.
func (r *limitReader) memory(v2 bool) error {
	mem, err := readMemoryLimit(r.f, r.cg, v2, r.mount)
	if mem > 0 {
		r.add(observe.CgroupLimit{File: memoryLimitFile(v2), Value: strconv.FormatInt(mem, 10), MemoryBytes: mem})
	}
	return err
}

// cpuset adds a cpuset.cpus naming fewer CPUs than the root's rootFile.
func (r *limitReader) cpuset(rootFile string) error {
	set, err := readCPUSetLimit(r.f, r.cg, rootFile, r.mount)
	if err == nil && !set.IsEmpty() {
		r.add(observe.CgroupLimit{File: fileCPUSetCPUs, Value: set.String(), CPUs: float64(set.Count()), CPUSet: set})
	}
	return err
}

// demotion adds cpu.idle 1, or else a cpu.weight (v2) or cpu.shares (v1)
// below the default weight.
func (r *limitReader) demotion(v2 bool) error {
	idle, err := readIdle(r.f, r.cg)
	if err != nil || idle {
		if idle {
			r.add(observe.CgroupLimit{File: fileCPUIdle, Value: "1", Weight: cpulimit.IdleWeight})
		}
		return err
	}
	file, perDefault := fileShares, float64(cpulimit.DefaultShares)
	if v2 {
		file, perDefault = fileCPUWeight, cpulimit.DefaultWeight
	}
	n, err := readValue(r.f, r.cg, file, r.mount, parseCount)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if weight := float64(n) * cpulimit.DefaultWeight / perDefault; err == nil && n > 0 && weight < cpulimit.DefaultWeight {
		r.add(observe.CgroupLimit{File: file, Value: strconv.FormatInt(n, 10), Weight: weight})
	}
	return err
}

// readCPUSetLimit is cg's cpuset.cpus beneath the mount f when it names
// fewer CPUs than rootFile of the hierarchy's root (the CPUs all cgroups
// start from); empty without one: no file, an empty list, or every CPU.
func readCPUSetLimit(f FS, cg, rootFile, dir string) (cpulimit.CPUSet, error) {
	none := cpulimit.CPUSet{}
	set, err := readValue(f, cg, fileCPUSetCPUs, dir, cpulimit.ParseCPUSet)
	if errors.Is(err, fs.ErrNotExist) || err == nil && set.IsEmpty() {
		return none, nil
	}
	if err != nil {
		return none, err
	}
	all, err := readValue(f, ".", rootFile, dir, cpulimit.ParseCPUSet)
	if errors.Is(err, fs.ErrNotExist) || err == nil && (all.IsEmpty() || all.SubsetOf(set)) {
		return none, nil
	}
	return set, err
}
