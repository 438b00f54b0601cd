package planner

// DefaultCPUWeight is the kernel's default cgroup v2 cpu.weight.
const DefaultCPUWeight = 100

// CPUWeight maps a RESOURCES_WEIGHT to cgroup v2 cpu.weight (1..10000):
// -1 (the pool takes no part in the division) becomes the kernel's
// default 100; 0 becomes 1, the smallest weight; 1..10000 are written as
// they are, so the ratio between pools is exact; anything larger is
// capped at 10000 (Apply warns about it).
func CPUWeight(resourcesWeight int64) uint64 {
	switch {
	case resourcesWeight < 0:
		return DefaultCPUWeight
	case resourcesWeight == 0:
		return 1
	case resourcesWeight > MaxCPUWeight:
		return MaxCPUWeight
	}
	return uint64(resourcesWeight)
}

// SharesFromWeight converts a cgroup v2 cpu.weight (1..10000) to the
// cgroup v1 cpu.shares (2..262144) that gives the scheduler the same
// group weight: shares = round(weight × 1024 / 100). This is the
// kernel's own relation between the two files (kernel/sched:
// cpu.weight is read back as round(shares × 100 / 1024), written as
// round(weight × 1024 / 100)) and systemd's cgroup_cpu_weight_to_shares
// (weight × 1024 / 100, truncated, clamped). It keeps every ratio
// between pools, and 1..10000 maps into 10..102400, inside v1's range.
//
// NOTE: runc, crun and containerd/cgroups convert the other way (OCI
// shares to v2 weight) with range-fitting formulas — the OCI runtime
// spec's 1 + ((shares-2)×9999)/262142, and in newer releases
// (opencontainers/cgroups v0.0.5, containerd/cgroups v3.1.3) a quadratic
// in log2(shares) — which do not keep ratios; poolagent never needs that
// direction, as the weight is its source of truth.
func SharesFromWeight(weight uint64) uint64 {
	return (weight*1024 + 50) / 100
}
