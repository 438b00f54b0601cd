package planner

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// Desired is the cgroup state the planner wants below the pool root. It is
// the contract between the planner and cgroupfs: cgroupfs writes it for
// cgroup v2 or v1 and never computes limits itself.
//
// A plan's pool states are shared with the plans made from it (Replan
// copies the pointers of the pools it does not plan again), so a
// PoolState in a Desired is never changed once the plan is made: a
// change is a new PoolState.
type Desired struct {
	Node  Node
	Pools []*PoolState // "default" first, then by name
	// activeAt are the indexes in Pools of the active pools, ascending,
	// in a plan Plan or Replan made; nil in one made otherwise, of which
	// Replan then looks at every pool.
	activeAt []int
}

// Node describes the host the plan is for.
type Node struct {
	CPUs        float64 // vCPUs; fractional when the host's own cgroup is capped
	MemoryBytes int64
	PeriodUsec  int64 // default bandwidth period, microseconds
	// Online is the node's online CPUs (/sys/devices/system/cpu/online),
	// which a pool's CPUS must be within; empty means CPUs 0..n-1 for n
	// = CPUs rounded up.
	Online cpulimit.CPUSet
}

// OnlineCPUs is n.Online, or CPUs 0..n-1 for n = CPUs rounded up when it
// is not known.
func (n Node) OnlineCPUs() cpulimit.CPUSet {
	if !n.Online.IsEmpty() {
		return n.Online
	}
	return cpulimit.FirstCPUs(int(math.Ceil(n.CPUs)))
}

// Pool returns the desired state of the pool named name, and whether d
// has it.
func (d Desired) Pool(name string) (PoolState, bool) {
	for _, p := range d.Pools {
		if p.Name == name {
			return *p, true
		}
	}
	return PoolState{}, false
}

// index is the index in d.Pools of the pool named name: "default" first,
// then by name, so a binary search finds it.
func (d Desired) index(name string) (int, bool) {
	if len(d.Pools) == 0 {
		return 0, false
	}
	if d.Pools[0].Name == name {
		return 0, true
	}
	i, ok := slices.BinarySearchFunc(d.Pools[1:], name, func(p *PoolState, name string) int { return strings.Compare(p.Name, name) })
	return i + 1, ok
}

// activeIndexes are the indexes of the active pools of pools, ascending.
func activeIndexes(pools []*PoolState) []int {
	at := []int{}
	for i, p := range pools {
		if p.Active {
			at = append(at, i)
		}
	}
	return at
}

// Changed names the pools whose cgroups next asks for differently from
// prev: their own cgroup's values or their query template's. Whether a
// pool is active, and the allocation figures beside the values, change no
// file. samePools is false when the two plans are for different nodes or
// do not have the same pools in the same order; then every pool may
// differ and changed is nil.
func Changed(prev, next Desired) (changed []string, samePools bool) {
	if prev.Node != next.Node || len(prev.Pools) != len(next.Pools) {
		return nil, false
	}
	for i, a := range prev.Pools {
		b := next.Pools[i]
		if a == b {
			continue // shared by Replan: unchanged
		}
		if a.Name != b.Name {
			return nil, false
		}
		// Cgroup is comparable, and a CPUSet is canonical: == is value
		// equality.
		if a.Pool != b.Pool || a.Query != b.Query {
			changed = append(changed, a.Name)
		}
	}
	return changed, true
}

// PoolState is the desired state of one pool: its own cgroup
// (<root>/<pool>) and the template for each query cgroup beneath it
// (<root>/<pool>/<query>).
type PoolState struct {
	Name  string
	Pool  Cgroup
	Query Cgroup

	// Active is whether the pool counted as active (running queries) in
	// the plan.
	Active bool
	// Weight is the pool's RESOURCES_WEIGHT; -1 keeps it out of the
	// max-min division.
	Weight int64
	// CapCPUs is the pool's cap in vCPU: TOTAL_CPU_LIMIT_PERCENT_PER_NODE
	// of the node, or the whole node without a limit, at most the number
	// of its CPUS.
	CapCPUs float64
	// CapByCPUs is whether the count of the pool's CPUS is what set
	// CapCPUs (it is below the node's share the pool would have had).
	CapByCPUs bool
	// AllocCPUs is the vCPU rate the pool's cpu.max grants: its max-min
	// share when it takes part in the division (active, weight >= 0),
	// its cap otherwise.
	AllocCPUs float64
}

// Cgroup is the desired state of one cgroup: its CPU limit, its memory
// limit in bytes, -1 = unlimited (v2 memory.max "max", v1
// memory.limit_in_bytes -1), and its soft memory limit in bytes, 0 or -1
// = none (v2 memory.high "max", v1 memory.soft_limit_in_bytes -1), its
// memory guarantees in bytes, 0 = none, -1 = all the cgroup uses (v2
// memory.min and memory.low "max"; v1 has none), and its task limit, 0
// or -1 = none (pids.max "max", v2 and v1).
type Cgroup struct {
	CPU             cpulimit.Limit
	MemoryBytes     int64
	MemoryHighBytes int64
	MemoryMinBytes  int64
	MemoryLowBytes  int64
	PidsMax         int64
}

// PidsMaxValue renders the pids.max value: a count of tasks, or "max"
// without a limit.
func (c Cgroup) PidsMaxValue() string {
	if c.PidsMax > 0 {
		return strconv.FormatInt(c.PidsMax, 10)
	}
	return "max"
}

// MemoryMax renders the cgroup v2 memory.max value: bytes, or "max"
// when unlimited.
func (c Cgroup) MemoryMax() string {
	if c.MemoryBytes >= 0 {
		return strconv.FormatInt(c.MemoryBytes, 10)
	}
	return "max"
}
