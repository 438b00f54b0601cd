package pooltree

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// limited are the hierarchies whose limits count where a query is placed;
// cpuacct has none.
var limited = map[string]bool{cgroupfs.HierUnified: true, cgroupfs.HierCPU: true, cgroupfs.HierMemory: true, cgroupfs.HierCPUSet: true}

// LimitsLeft returns the CPU and memory limits and CPU demotions (see
// observe.ReadCgroupLimits) process pid would leave by
// being placed in the query cgroup <pool>/<query>: in every hierarchy
// PlaceQuery moves it in, the limits on the cgroups from the process's
// own up to, not including, the first that also holds the query cgroup
// (read from /proc/PID/cgroup and the cgroups' limit files). Limits the
// query cgroup stays below are kept by the move and are not listed, nor
// is a CPU set the pool's own CPUS lie within, nor a demotion the pool's
// own weight is no better than. It writes nothing.
func (h *Handle) LimitsLeft(ps planner.PoolState, query string, pid int) ([]observe.CgroupLimit, error) {
	h.mu.Lock()
	places, err := h.writer.QueryPlaces(ps, query)
	h.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("where query %s/%s goes: %w", ps.Name, query, err)
	}
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	groups, err := proc.Cgroups()
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	var out []observe.CgroupLimit
	for _, hier := range slices.Sorted(maps.Keys(places)) {
		if !limited[hier] {
			continue
		}
		from, ok := cgroupOf(groups, hier)
		if !ok {
			continue
		}
		for _, cg := range leftCgroups(from, places[hier].Path) {
			limits, err := cgroupfs.ReadLimits(places[hier].Mount, cg, hier)
			if err != nil {
				return nil, fmt.Errorf("limits of cgroup %s holding process %d: %w", cg, pid, err)
			}
			out = append(out, slices.DeleteFunc(limits, func(l observe.CgroupLimit) bool { return keptBy(ps, l) })...)
		}
	}
	return out, nil
}

// keptBy reports whether the pool keeps a query within limit l, so that
// leaving the cgroup frees it from nothing: the pool's CPUS lie within CPU
// set l, or, for a CPU demotion l (cpu.idle, a low weight), the pool's own
// scheduler weight is no higher (an idle pool for an idle cgroup).
func keptBy(ps planner.PoolState, l observe.CgroupLimit) bool {
	if l.Weight > 0 {
		return ps.Pool.CPU.SchedWeight() <= l.Weight
	}
	cpus := ps.Pool.CPU.CPUs
	return !l.CPUSet.IsEmpty() && !cpus.IsEmpty() && cpus.SubsetOf(l.CPUSet)
}

// cgroupOf is the process's cgroup in hierarchy hier, from its
// /proc/PID/cgroup lines: the v2 line (hierarchy 0) for the unified
// hierarchy, the v1 line listing the controller otherwise.
func cgroupOf(groups []procfs.Cgroup, hier string) (string, bool) {
	for _, g := range groups {
		switch {
		case hier == cgroupfs.HierUnified && g.HierarchyID == 0,
			hier != cgroupfs.HierUnified && g.HierarchyID != 0 && slices.Contains(g.Controllers, hier):
			return g.Path, true
		}
	}
	return "", false
}

// leftCgroups lists the cgroups a process in from leaves when it moves to
// to ("/"-rooted paths in one hierarchy): from and its ancestors, up to
// and not including the first that is to or an ancestor of to. The root
// "/" is never left.
func leftCgroups(from, to string) []string {
	var out []string
	for c := path.Clean(from); c != "/" && c != "."; c = path.Dir(c) {
		if c == to || strings.HasPrefix(to, c+"/") {
			break
		}
		out = append(out, c)
	}
	return out
}
