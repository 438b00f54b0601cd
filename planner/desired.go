package planner

import (
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Desired is the cgroup state the planner wants below the pool root. It is
// the contract between the planner and cgroupfs: cgroupfs writes it for
// cgroup v2 or v1 and never computes limits itself.
type Desired struct {
	Node  Node
	Pools []PoolState // "default" first, then by name
}

// Node describes the host the plan is for.
type Node struct {
	CPUs        float64 // vCPUs; fractional when the host's own cgroup is capped
	MemoryBytes int64
	PeriodUsec  uint64 // default bandwidth period, microseconds
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
	// of the node, or the whole node without a limit.
	CapCPUs float64
	// AllocCPUs is the vCPU rate the pool's cpu.max grants: its max-min
	// share when it takes part in the division (active, weight >= 0),
	// its cap otherwise.
	AllocCPUs float64
}

// Cgroup is the desired state of one cgroup. Resources uses the ecosystem's
// type (what containerd/cgroups consumes for v1 and v2):
//
//	CPU.Quota  µs per period, -1 = unlimited ("max" / cfs_quota_us -1)
//	CPU.Period µs
//	CPU.Burst  µs, 0 = none (cpu.max.burst / cpu.cfs_burst_us)
//	CPU.Shares cgroup v1 cpu.shares, derived from CPUWeight
//	Memory.Limit bytes, -1 = unlimited ("max")
//
// A nil pointer leaves the file as it is. CPUWeight is kept exact beside it
// because a round trip through shares loses precision.
type Cgroup struct {
	Resources specs.LinuxResources
	CPUWeight uint64 // cgroup v2 cpu.weight, 1..10000; 0 = leave unset
}

// CPUMax renders the cgroup v2 cpu.max line: "QUOTA PERIOD", or
// "max PERIOD" when the quota is unlimited; "" when CPU is left unset.
func (c Cgroup) CPUMax() string {
	cpu := c.Resources.CPU
	if cpu == nil || cpu.Quota == nil || cpu.Period == nil {
		return ""
	}
	period := strconv.FormatUint(*cpu.Period, 10)
	if *cpu.Quota < 0 {
		return "max " + period
	}
	return strconv.FormatInt(*cpu.Quota, 10) + " " + period
}

// BurstUsec is the cpu.max.burst (v1: cpu.cfs_burst_us) value in µs; 0
// when none is set.
func (c Cgroup) BurstUsec() uint64 {
	if cpu := c.Resources.CPU; cpu != nil && cpu.Burst != nil {
		return *cpu.Burst
	}
	return 0
}

// MemoryMax renders the cgroup v2 memory.max value: bytes, or "max"
// when unlimited or unset.
func (c Cgroup) MemoryMax() string {
	if m := c.Resources.Memory; m != nil && m.Limit != nil && *m.Limit >= 0 {
		return strconv.FormatInt(*m.Limit, 10)
	}
	return "max"
}
