package planner

import specs "github.com/opencontainers/runtime-spec/specs-go"

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
