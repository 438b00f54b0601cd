package cgroupfs

// The cpuset controller: a pool's CPUs (CPUS), and on v1 the cpuset
// twins of the root, the pools and the queries.

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// The cpuset controller's files.
//
//	v2, v1 cpuset.cpus       CPU list "0-3,8"; "" = v2: its parent's CPUs,
//	                         v1: none (no process may enter)
//	v1 cpuset.mems           memory node list "0"; "" = none, as for cpus
//	v2 cpuset.cpus.effective the CPUs the cgroup's tasks may use
const (
	fileCPUSetCPUs = "cpuset.cpus"
	fileCPUSetMems = "cpuset.mems"
	fileCPUSetEff  = "cpuset.cpus.effective"
)

// cpusetController manages a pool's CPUs (cpuset.cpus) and, on v1,
// every cgroup's cpuset twin. Only the pools get its files on v2: their
// queries run on their pool's CPUs.
var cpusetController = controller{
	name:      HierCPUSet,
	need:      func(s settings, use *uses) { use.cpuset = use.cpuset || !s.cpu.CPUs.IsEmpty() },
	in:        func(use uses) bool { return use.cpuset },
	poolsOnly: true,
	unmounted: "CPUS set: %w: no v1 cpuset hierarchy is mounted beside the cpu hierarchy; accepted here: CPUS=-1",
	read:      readCPUSet,
	top:       (*Tree).readCPUSetTop,
	before:    func(b *builder, pools, queries []target) { b.cpusets(b.cpusetTargets(pools, queries)) },
	after:     func(b *builder, _ planner.Desired, queries []target) { b.join(queries) },
}

// readCPUSet reads cg's cpuset.cpus beneath f into s, and on v1 its
// cpuset.mems; a cgroup without them (not there yet in a hierarchy that
// just came into use, the controller not enabled for it on v2) is not
// confined and has no memory nodes, as a new one.
func readCPUSet(f FS, cg string, v2 bool, _ string, s *settings) error {
	var err error
	if s.cpu.CPUs, err = readCPUs(f, cg); err != nil || v2 {
		return err
	}
	b, err := f.ReadFile(path.Join(cg, fileCPUSetMems))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	s.mems = strings.TrimSpace(string(b))
	return nil
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
		h, file, on = HierUnified, fileCPUSetEff, cur.use.cpuset || slices.Contains(cur.enabled["."], "cpuset")
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
		f, err := t.fs(h)
		if err != nil {
			return err
		}
		var root settings
		if err := readCPUSet(f, ".", false, t.roots[h], &root); err != nil {
			return err
		}
		cur.values["."] = root
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

// cpusetWant is s with the cpuset files a cgroup should read, given its
// parent's wanted ones. On v2 a pool has its own CPUS (empty: every CPU
// the root has) and a query nothing, as it inherits its pool's. On v1,
// where a new cpuset cgroup has neither CPUs nor memory nodes and takes
// no process until it has both, every cgroup holds its CPUs or else its
// parent's, and its parent's memory nodes. Without the v1 cpuset
// hierarchy, nothing.
func (cur *current) cpusetWant(s settings, query bool, parent settings) settings {
	switch {
	case cur.v2 && query:
		s.cpu.CPUs = cpulimit.CPUSet{}
	case !cur.v2 && !slices.Contains(cur.hiers, HierCPUSet):
		s.cpu.CPUs, s.mems = cpulimit.CPUSet{}, ""
	case !cur.v2:
		if s.cpu.CPUs.IsEmpty() {
			s.cpu.CPUs = parent.cpu.CPUs
		}
		s.mems = parent.mems
	}
	return s
}

// cpusetTargets are the cgroups whose cpuset files the change manages,
// parents first: on v1 the pool root (copying its parent's) and every
// pool and query; on v2 the pools.
func (b *builder) cpusetTargets(pools, queries []target) []target {
	if b.cur.v2 {
		return pools
	}
	if !slices.Contains(b.cur.hiers, HierCPUSet) {
		return nil
	}
	root, ok := b.cur.values["."]
	if !ok {
		root = defaults()
	}
	return append(append([]target{{path: ".", want: b.cur.top, cur: root}}, pools...), queries...)
}

// cpusets writes the cpuset files of tgs (parents first) that differ. On
// v1 (validate_change_legacy) a cpuset must stay within its parent's and
// hold its children's, and one with processes may not become empty, at
// every write: so each changed cgroup first goes to the union of its
// current and wanted CPUs, parents first, and then to the wanted ones,
// children first. Memory nodes, the same everywhere, go with the first
// pass. On v2 the kernel keeps no subset rules: one write each.
func (b *builder) cpusets(tgs []target) {
	h := HierUnified
	if !b.cur.v2 {
		h = HierCPUSet
	}
	mid := make([]cpulimit.CPUSet, len(tgs))
	for i := range tgs {
		tg := &tgs[i]
		// NOTE: v2 refuses to empty a populated cgroup's cpuset.cpus as
		// v1 does (ENOSPC, Linux 6.1): a pool that leaves its CPUS keeps
		// a list, every CPU of the pool root's parent.
		if b.cur.v2 && tg.want.cpu.CPUs.IsEmpty() && !tg.cur.cpu.CPUs.IsEmpty() {
			tg.want.cpu.CPUs = b.cur.top.cpu.CPUs
		}
		mid[i] = tg.want.cpu.CPUs
		if !b.cur.v2 {
			mid[i] = tg.cur.cpu.CPUs.Union(mid[i])
		}
		if mid[i] != tg.cur.cpu.CPUs {
			b.add(h, tg.path, OpWrite, fileCPUSetCPUs, cpusValue(mid[i]))
		}
		if tg.want.mems != tg.cur.mems {
			b.add(h, tg.path, OpWrite, fileCPUSetMems, tg.want.mems)
		}
	}
	for i := len(tgs) - 1; i >= 0; i-- {
		if tgs[i].want.cpu.CPUs != mid[i] {
			b.add(h, tgs[i].path, OpWrite, fileCPUSetCPUs, cpusValue(tgs[i].want.cpu.CPUs))
		}
	}
}

// join moves, on v1, the processes of each query cgroup in the cpu
// hierarchy that are not in its cpuset twin into it (an OpMove into the
// cgroup itself): a query running when its pool's CPU sets came into use,
// or a process it forked while it was being placed. It comes after the
// twin's CPUs and memory nodes are written.
func (b *builder) join(queries []target) {
	if b.cur.v2 || !slices.Contains(b.cur.hiers, HierCPUSet) {
		return
	}
	for _, q := range queries {
		n := b.cur.nodes[q.path]
		if n == nil {
			continue
		}
		var pids []int
		for _, pid := range n.procs[HierCPU] {
			if !slices.Contains(n.procs[HierCPUSet], pid) {
				pids = append(pids, pid)
			}
		}
		if len(pids) > 0 {
			b.ops = append(b.ops, Op{Kind: OpMove, Hier: HierCPUSet, Dir: b.cur.roots[HierCPUSet], Path: q.path, To: q.path, PIDs: pids})
		}
	}
}

// cpusValue is what is written to cpuset.cpus for set: its list, or a
// newline for the empty set (a write of no bytes never reaches the
// kernel's handler, so "" would leave the file as it was).
func cpusValue(set cpulimit.CPUSet) string {
	if set.IsEmpty() {
		return "\n"
	}
	return set.String()
}
