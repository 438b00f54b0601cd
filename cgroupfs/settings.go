package cgroupfs

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup2"

	"github.com/poolagent/poolagent/planner"
)

// Cgroup interface files poolagent manages.
//
//	v2 cpu.max               "max 100000" | "QUOTA PERIOD", µs
//	v2 cpu.max.burst         "0", µs
//	v2 cpu.weight            "100", 1..10000
//	v2 memory.max            "max" | bytes (read back rounded down to a page)
//	v2 cgroup.subtree_control "cpu memory"; written as "+cpu"
//	v1 cpu.cfs_quota_us      "-1" | µs
//	v1 cpu.cfs_period_us     µs, 1000..1000000
//	v1 cpu.cfs_burst_us      µs
//	v1 cpu.shares            2..262144
//	v1 memory.limit_in_bytes "-1" to write; unlimited reads 9223372036854771712
const (
	fileCPUMax         = "cpu.max"
	fileCPUMaxBurst    = "cpu.max.burst"
	fileCPUWeight      = "cpu.weight"
	fileMemoryMax      = "memory.max"
	fileSubtreeControl = "cgroup.subtree_control"
	fileControllers    = "cgroup.controllers"
	fileProcs          = "cgroup.procs"
	fileCFSQuota       = "cpu.cfs_quota_us"
	fileCFSPeriod      = "cpu.cfs_period_us"
	fileCFSBurst       = "cpu.cfs_burst_us"
	fileShares         = "cpu.shares"
	fileMemLimit       = "memory.limit_in_bytes"
)

// Kernel limits on CPU bandwidth values (kernel/sched/core.c): quota and
// period at least 1 ms, period at most 1 s, burst at most quota.
const (
	minQuotaUsec  = 1000
	minPeriodUsec = 1000
	maxPeriodUsec = 1000000
	minShares     = 2
	maxShares     = 262144
	maxWeight     = 10000
)

// settings is one cgroup's managed values in version-neutral terms. A nil
// field is not managed: it is neither read as a difference nor written.
type settings struct {
	QuotaUsec  *int64 // -1 = unlimited
	PeriodUsec *uint64
	BurstUsec  *uint64
	Weight     *uint64 // v2 cpu.weight
	Shares     *uint64 // v1 cpu.shares
	MemBytes   *int64  // -1 = unlimited
}

// fromDesired takes the fields of c the backend writes: v2 writes
// CPUWeight as cpu.weight, v1 writes Shares as cpu.shares.
func fromDesired(c planner.Cgroup, v2 bool) settings {
	var s settings
	if cpu := c.Resources.CPU; cpu != nil {
		s.QuotaUsec, s.PeriodUsec, s.BurstUsec = cpu.Quota, cpu.Period, cpu.Burst
		if !v2 {
			s.Shares = cpu.Shares
		}
	}
	if v2 && c.CPUWeight != 0 {
		w := c.CPUWeight
		s.Weight = &w
	}
	if m := c.Resources.Memory; m != nil {
		s.MemBytes = m.Limit
	}
	return s
}

// usesMemory reports whether any cgroup in d sets a memory limit (-1,
// unlimited, is what a cgroup without the memory controller has anyway).
func usesMemory(d planner.Desired) bool {
	for _, p := range d.Pools {
		for _, c := range []planner.Cgroup{p.Pool, p.Query} {
			if c.Resources.Memory != nil && c.Resources.Memory.Limit != nil && *c.Resources.Memory.Limit >= 0 {
				return true
			}
		}
	}
	return false
}

// ratio is the kernel's normalised bandwidth, to_ratio(period, quota) =
// quota<<20/period, with math.MaxUint64 for unlimited. cgroup v1 refuses a
// child whose ratio is above its nearest limited ancestor's.
func ratio(quotaUsec int64, periodUsec uint64) uint64 {
	if quotaUsec < 0 || periodUsec == 0 {
		return math.MaxUint64
	}
	return uint64(quotaUsec) << 20 / periodUsec
}

// formatCPUMax renders cpu.max with containerd's value type: "max PERIOD"
// for an unlimited quota, else "QUOTA PERIOD".
func formatCPUMax(quotaUsec int64, periodUsec uint64) string {
	var q *int64
	if quotaUsec >= 0 {
		q = &quotaUsec
	}
	return string(cgroup2.NewCPUMax(q, &periodUsec))
}

func parseUint(file, s string) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want an unsigned integer", file, strings.TrimSpace(s))
	}
	return v, nil
}

func parseInt(file, s string) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want an integer", file, strings.TrimSpace(s))
	}
	return v, nil
}

// pageDown is the memory limit the kernel reads back after b is written:
// memory limits are kept in pages.
func pageDown(b, pageSize int64) int64 {
	if b < 0 {
		return -1
	}
	return b / pageSize * pageSize
}

func ptr[T any](v T) *T { return &v }
