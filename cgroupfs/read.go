package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cpulimit"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// current is the pool tree as it is, read before anything is decided:
// everything [diff] needs to turn it into the desired tree. Every read
// goes through an [FS], beneath the pool root or, for what lies above it
// (the root's parent, its ancestors' limits), beneath the hierarchy's
// mount.
type current struct {
	v2       bool
	pageSize int64
	roots    map[string]string // hierarchy name -> pool root directory
	// hiers are the hierarchies the change touches, cpu's first: on v1
	// the memory hierarchy only when a memory limit is wanted or
	// poolagent's memory root exists.
	hiers []string
	// rootIn says in which hierarchies the pool root exists.
	rootIn map[string]bool
	// nodes are the cgroups below the root, by path relative to it.
	nodes map[string]*node
	// values are the managed values of the existing pools and of the
	// cgroups directly below them, by path; a cgroup without an entry is
	// new and has the kernel's defaults.
	values map[string]settings
	// enabled is, on v2, the controllers in the cgroup.subtree_control
	// of the root (".") and of each existing pool.
	enabled map[string][]string
	// rootHi is, on v1, the ratio of the pool root's nearest limited
	// ancestor-or-self (math.MaxUint64: none), the bound for pools.
	rootHi uint64
	// top is, when CPU sets are in use, the pool root's parent's cpuset:
	// on v1 its cpuset.cpus and cpuset.mems, which the root copies (a
	// cpuset cgroup starts with neither); on v2 its effective CPUs. Every
	// pool's CPUS must be within its CPUs.
	top settings
}

// readCurrent reads what [diff] needs to reach d. It refuses a tree whose
// controllers will not be available (ErrNoController) or whose root cannot
// be made (ErrBadRoot).
func (t *Tree) readCurrent(d planner.Desired) (*current, error) {
	mem, sets := usesMemory(d), usesCPUSet(d)
	hiers, err := t.hiers(mem, sets)
	if err != nil {
		return nil, fmt.Errorf("read pool tree: %w", err)
	}
	if err := t.checkControllers(mem, sets, hiers); err != nil {
		return nil, err
	}
	if err := t.checkIdle(d); err != nil {
		return nil, err
	}
	cur := &current{v2: t.v2, pageSize: t.pageSize, roots: t.roots, hiers: hiers, rootIn: map[string]bool{},
		nodes: map[string]*node{}, values: map[string]settings{}, enabled: map[string][]string{}, rootHi: math.MaxUint64}
	for _, h := range hiers {
		if err := t.readHier(cur, h); err != nil {
			return nil, fmt.Errorf("read pool tree: %w", err)
		}
	}
	if !t.v2 {
		if cur.rootHi, err = t.v1RootBound(); err != nil {
			return nil, err
		}
	}
	desired := map[string]bool{}
	for _, p := range d.Pools {
		desired[p.Name] = true
	}
	for p, n := range cur.nodes {
		top, _, _ := strings.Cut(p, "/")
		if !desired[top] || strings.Count(p, "/") > 1 || !n.in[hiers[0]] {
			continue
		}
		s, err := t.readSettings(p, hiers)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		cur.values[p] = s
	}
	if t.v2 {
		cgs := []string{}
		if cur.rootIn[HierUnified] {
			cgs = append(cgs, ".")
		}
		for _, p := range d.Pools {
			if n, ok := cur.nodes[p.Name]; ok && n.in[HierUnified] {
				cgs = append(cgs, p.Name)
			}
		}
		f, err := t.fs(HierUnified)
		for _, cg := range cgs {
			if err != nil {
				return nil, err
			}
			raw, err := f.ReadFile(path.Join(cg, fileSubtreeControl))
			if err != nil {
				return nil, err
			}
			cur.enabled[cg] = strings.Fields(string(raw))
		}
	}
	if err := t.readCPUSetTop(cur, d); err != nil {
		return nil, err
	}
	return cur, nil
}

// readHier reads hierarchy h's pool root, if it exists, into cur: its
// cgroups and their processes. A root that does not exist will be made,
// which needs its parent: only the pool root itself is created, never its
// parents, which are not poolagent's.
func (t *Tree) readHier(cur *current, h string) error {
	mf, err := t.mountFS(h)
	if err != nil {
		return err
	}
	rel := t.inMount(h, t.roots[h])
	ok, err := isDir(mf, rel)
	if err != nil {
		return err
	}
	if !ok {
		parent := path.Dir(rel)
		if ok, err := isDir(mf, parent); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("%w: %s does not exist, so %s cannot be made in the %s hierarchy; create it or choose a root whose parent exists in every hierarchy",
				ErrBadRoot, filepath.Dir(t.roots[h]), filepath.Base(t.roots[h]), h)
		}
		return nil
	}
	cur.rootIn[h] = true
	f, err := t.fs(h)
	if err != nil {
		return err
	}
	return cur.walk(f, h, ".")
}

// hiers lists the hierarchies a change touches: on v1 the memory hierarchy
// only when a memory limit is wanted, the cpuset hierarchy only when CPU
// sets are, or poolagent's root exists there.
func (t *Tree) hiers(memory, cpuset bool) ([]string, error) {
	var out []string
	for _, h := range t.order {
		if h == HierMemory && !memory || h == HierCPUSet && !cpuset {
			f, err := t.mountFS(h)
			if err != nil {
				return nil, err
			}
			ok, err := isDir(f, t.inMount(h, t.roots[h]))
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// inMount is dir's path below hierarchy h's mount ("." for the mount
// itself); Open made sure every root is below its mount.
func (t *Tree) inMount(h, dir string) string {
	rel, err := filepath.Rel(t.mounts[h], dir)
	if err != nil {
		return dir // not reached: Open checked the root
	}
	return filepath.ToSlash(rel)
}

// isDir reports whether name is a directory beneath f.
func isDir(f FS, name string) (bool, error) {
	_, err := f.ReadDir(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// node is what the tree holds at one cgroup path.
type node struct {
	in    map[string]bool  // hierarchy -> directory exists
	procs map[string][]int // hierarchy -> PIDs directly in it
}

// walk lists the cgroups below dir in hierarchy h and their processes.
func (cur *current) walk(f FS, h, dir string) error {
	subs, err := f.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, s := range subs {
		p := path.Join(dir, s)
		n := cur.nodes[p]
		if n == nil {
			n = &node{in: map[string]bool{}, procs: map[string][]int{}}
			cur.nodes[p] = n
		}
		n.in[h] = true
		pids, err := readProcs(f, p)
		if err != nil {
			return err
		}
		n.procs[h] = pids
		if err := cur.walk(f, h, p); err != nil {
			return err
		}
	}
	return nil
}

// readProcs reads the PIDs in cg's cgroup.procs.
func readProcs(f FS, cg string) ([]int, error) {
	b, err := f.ReadFile(path.Join(cg, fileProcs))
	if err != nil {
		return nil, err
	}
	pids, err := parseProcs(b)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", cg, fileProcs, err)
	}
	return pids, nil
}

// parseProcs parses cgroup.procs: one PID (a positive decimal) per line.
func parseProcs(b []byte) ([]int, error) {
	var out []int
	for _, l := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(l)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("%q is not a PID", l)
		}
		out = append(out, pid)
	}
	return out, nil
}

// children lists the existing direct children of dir, sorted.
func (cur *current) children(dir string) []string {
	var out []string
	for p := range cur.nodes {
		if path.Dir(p) == dir {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// subtree lists dir and every cgroup below it, parents first.
func (cur *current) subtree(dir string) []string {
	var out []string
	for p := range cur.nodes {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	slices.Sort(out) // "a" < "a/b": parents sort first
	return out
}

// busy reports whether dir or any cgroup below it holds a process in any
// hierarchy.
func (cur *current) busy(dir string) bool {
	for _, p := range cur.subtree(dir) {
		for _, pids := range cur.nodes[p].procs {
			if len(pids) > 0 {
				return true
			}
		}
	}
	return false
}

// readSettings reads the managed values of cgroup cg (which exists). On
// v1, memory is read only when the memory hierarchy is in use.
func (t *Tree) readSettings(cg string, hiers []string) (settings, error) {
	s := defaults() // what a file a kernel lacks reads as
	if t.v2 {
		f, err := t.fs(HierUnified)
		if err != nil {
			return s, err
		}
		b, err := f.ReadFile(path.Join(cg, fileCPUMax))
		if err != nil {
			return s, err
		}
		m, err := cpulimit.ParseCPUMax(string(b))
		if err != nil {
			return s, fmt.Errorf("%s: %w", path.Join(cg, fileCPUMax), err)
		}
		s.cpu.QuotaUsec, s.cpu.PeriodUsec = m.QuotaUsec, m.PeriodUsec
		if s.cpu.BurstUsec, err = readOr(f, cg, fileCPUMaxBurst, s.cpu.BurstUsec, parseCount); err != nil {
			return s, err
		}
		if s.cpu.Weight, err = readOr(f, cg, fileCPUWeight, s.cpu.Weight, parseCount); err != nil {
			return s, err
		}
		if s.memBytes, err = readOr(f, cg, fileMemoryMax, -1, observe.ParseMemoryLimit); err != nil {
			return s, err
		}
		if s.cpu.Idle, err = readIdle(f, cg); err != nil {
			return s, err
		}
		s.cpu.CPUs, err = readCPUs(f, cg)
		return s, err
	}
	f, err := t.fs(HierCPU)
	if err != nil {
		return s, err
	}
	b, err := f.ReadFile(path.Join(cg, fileCFSQuota))
	if err != nil {
		return s, err
	}
	if s.cpu.QuotaUsec, err = parseInt(fileCFSQuota, string(b)); err != nil {
		return s, fmt.Errorf("%s: %w", cg, err)
	}
	for _, x := range []struct {
		file string
		dst  *int64
	}{{fileCFSPeriod, &s.cpu.PeriodUsec}, {fileCFSBurst, &s.cpu.BurstUsec}, {fileShares, &s.shares}} {
		if *x.dst, err = readOr(f, cg, x.file, *x.dst, parseCount); err != nil {
			return s, err
		}
	}
	if s.cpu.Idle, err = readIdle(f, cg); err != nil {
		return s, err
	}
	if slices.Contains(hiers, HierMemory) {
		mf, err := t.fs(HierMemory)
		if err != nil {
			return s, err
		}
		if s.memBytes, err = readOr(mf, cg, fileMemLimit, -1, observe.ParseMemoryLimit); err != nil {
			return s, err
		}
	}
	if slices.Contains(hiers, HierCPUSet) {
		return readCPUSet(t.fs, cg, s)
	}
	return s, nil
}

// readCPUSet reads cg's cpuset.cpus and cpuset.mems in the v1 cpuset
// hierarchy into s; a cgroup not there yet (the hierarchy just came into
// use) has neither, as a new one.
func readCPUSet(open func(string) (FS, error), cg string, s settings) (settings, error) {
	f, err := open(HierCPUSet)
	if err == nil {
		s.cpu.CPUs, err = readCPUs(f, cg)
	}
	var b []byte
	if err == nil {
		b, err = f.ReadFile(path.Join(cg, fileCPUSetMems))
	}
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	s.mems = strings.TrimSpace(string(b))
	return s, err
}

// readCPUs reads cg's cpuset.cpus; a cgroup without the file (the cpuset
// controller not enabled for it on v2) is not confined.
func readCPUs(f FS, cg string) (cpulimit.CPUSet, error) {
	b, err := f.ReadFile(path.Join(cg, fileCPUSetCPUs))
	if errors.Is(err, fs.ErrNotExist) {
		return cpulimit.CPUSet{}, nil
	}
	if err != nil {
		return cpulimit.CPUSet{}, err
	}
	set, err := cpulimit.ParseCPUSet(string(b))
	if err != nil {
		return set, fmt.Errorf("%s: %w", path.Join(cg, fileCPUSetCPUs), err)
	}
	return set, nil
}

// readCPUSetTop reads, when CPU sets are in use (v2: wanted, or enabled
// at the root from an earlier apply), the cpuset of the pool root's
// parent into cur.top (v1: cpus and mems; v2: effective CPUs) and
// on v1 the root's own into cur.values["."], and refuses a pool whose
// CPUS the parent does not have: v1 would refuse the write, v2 would
// quietly run the pool on the parent's CPUs instead.
func (t *Tree) readCPUSetTop(cur *current, d planner.Desired) error {
	h, file, on := HierCPUSet, fileCPUSetCPUs, slices.Contains(cur.hiers, HierCPUSet)
	if t.v2 {
		h, file, on = HierUnified, fileCPUSetEff, usesCPUSet(d) || slices.Contains(cur.enabled["."], "cpuset")
	}
	if !on {
		return nil
	}
	parent := path.Dir(t.inMount(h, t.roots[h]))
	var err error
	if cur.top, err = t.readParentCPUSet(h, parent, file); err != nil {
		return err
	}
	if !t.v2 && cur.rootIn[h] {
		if cur.values["."], err = readCPUSet(t.fs, ".", settings{}); err != nil {
			return err
		}
	}
	where := filepath.Join(t.mounts[h], parent, file)
	for _, p := range d.Pools {
		if off := p.Pool.CPU.CPUs.Minus(cur.top.cpu.CPUs); !off.IsEmpty() {
			return fmt.Errorf("%w: pool %q: CPUS='%s': CPUs %s are not among the CPUs of %s (%s), which the pool root's cpuset takes its CPUs from; accepted: CPUs within %s",
				ErrInvalid, p.Name, p.Pool.CPU.CPUs, off, where, cur.top.cpu.CPUs, cur.top.cpu.CPUs)
		}
	}
	return nil
}

// readParentCPUSet reads file (a CPU list) of the pool root's parent in
// hierarchy h, and on v1 its cpuset.mems.
func (t *Tree) readParentCPUSet(h, parent, file string) (settings, error) {
	var s settings
	mf, err := t.mountFS(h)
	if err != nil {
		return s, err
	}
	b, err := mf.ReadFile(path.Join(parent, file))
	if err != nil {
		return s, fmt.Errorf("read cpuset of the pool root's parent: %w", err)
	}
	if s.cpu.CPUs, err = cpulimit.ParseCPUSet(string(b)); err != nil {
		return s, fmt.Errorf("%s: %w", filepath.Join(t.mounts[h], parent, file), err)
	}
	if t.v2 {
		return s, nil
	}
	if b, err = mf.ReadFile(path.Join(parent, fileCPUSetMems)); err != nil {
		return s, fmt.Errorf("read cpuset of the pool root's parent: %w", err)
	}
	s.mems = strings.TrimSpace(string(b))
	return s, nil
}

// readOr reads cg's file with parse; a missing file (a kernel without
// that feature, a controller not enabled here) reads as def. A value parse
// refuses is an error naming the file.
func readOr(f FS, cg, file string, def int64, parse func(string) (int64, error)) (int64, error) {
	b, err := f.ReadFile(path.Join(cg, file))
	if errors.Is(err, fs.ErrNotExist) {
		return def, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := parse(string(b))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path.Join(cg, file), err)
	}
	return v, nil
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

// parseCount parses a file holding an unsigned number (µs, a weight,
// shares) that fits an int64.
func parseCount(s string) (int64, error) {
	t := strings.TrimSpace(s)
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil || v > math.MaxInt64 {
		return 0, fmt.Errorf("%q: want an unsigned integer up to %d", t, int64(math.MaxInt64))
	}
	return int64(v), nil
}

// defaults are a new cgroup's values, as the kernel creates it.
func defaults() settings {
	return settings{cpu: cpulimit.Unlimited(cpulimit.DefaultPeriodUsec), shares: cpulimit.DefaultShares, memBytes: -1}
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
			q, err := f.ReadFile(path.Join(dir, fileCFSQuota))
			if err != nil {
				return 0, err
			}
			p, err := f.ReadFile(path.Join(dir, fileCFSPeriod))
			if err != nil {
				return 0, err
			}
			qv, err := parseInt(fileCFSQuota, string(q))
			if err != nil {
				return 0, fmt.Errorf("%s: %w", filepath.Join(t.mounts[HierCPU], dir), err)
			}
			pv, err := parseUint(fileCFSPeriod, string(p))
			if err != nil {
				return 0, fmt.Errorf("%s: %w", filepath.Join(t.mounts[HierCPU], dir), err)
			}
			if qv >= 0 {
				return cpulimit.Limit{QuotaUsec: qv, PeriodUsec: int64(pv)}.Ratio(), nil
			}
		}
		if dir == "." {
			return math.MaxUint64, nil
		}
	}
}

// checkControllers refuses a tree where the cpu controller (or memory, when
// a limit is set, or cpuset, when a pool has CPUS) will not be available
// to the pools.
func (t *Tree) checkControllers(mem, sets bool, hiers []string) error {
	if !t.v2 {
		if mem && !slices.Contains(hiers, HierMemory) {
			return fmt.Errorf("memory limit set: %w: no v1 memory hierarchy is mounted", ErrNoController)
		}
		if sets && !slices.Contains(hiers, HierCPUSet) {
			return fmt.Errorf("CPUS set: %w: no v1 cpuset hierarchy is mounted beside the cpu hierarchy; accepted here: CPUS=-1", ErrNoController)
		}
		return nil
	}
	// The pool root gets the controllers its parent enables in
	// cgroup.subtree_control; cgroup.controllers lists them once it exists.
	root := t.roots[HierUnified]
	f, err := t.mountFS(HierUnified)
	if err != nil {
		return fmt.Errorf("check controllers: %w", err)
	}
	rel := t.inMount(HierUnified, root)
	file := path.Join(rel, fileControllers)
	if ok, err := isDir(f, rel); err != nil {
		return fmt.Errorf("check controllers: %w", err)
	} else if !ok {
		file = path.Join(path.Dir(rel), fileSubtreeControl)
	}
	raw, err := f.ReadFile(file)
	if err != nil {
		return fmt.Errorf("check controllers: %w", err)
	}
	file = filepath.Join(t.mounts[HierUnified], file)
	have := strings.Fields(string(raw))
	need := []string{"cpu"}
	if mem {
		need = append(need, "memory")
	}
	if sets {
		need = append(need, "cpuset")
	}
	for _, c := range need {
		if !slices.Contains(have, c) {
			return fmt.Errorf("%s: %w: %s lists %q; enable it with \"+%s\" in %s",
				c, ErrNoController, file, strings.Join(have, " "), c, filepath.Join(filepath.Dir(root), fileSubtreeControl))
		}
	}
	return nil
}
