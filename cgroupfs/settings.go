package cgroupfs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// Cgroup interface files poolagent manages.
//
//	v2 cpu.max               "max 100000" | "QUOTA PERIOD", µs
//	v2 cpu.max.burst         "0", µs
//	v2 cpu.weight            "100", 1..10000
//	v2 memory.max            "max" | bytes (read back rounded down to a page)
//	v2 cgroup.subtree_control "cpu memory"; written as "+cpu"
//	v2, v1 cpu.idle          "0" | "1" (Linux >= 5.15; not on a root)
//	v2, v1 cpuset.cpus       CPU list "0-3,8"; "" = v2: its parent's CPUs,
//	                         v1: none (no process may enter)
//	v1 cpuset.mems           memory node list "0"; "" = none, as for cpus
//	v2 cpuset.cpus.effective the CPUs the cgroup's tasks may use
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
	fileCPUIdle        = "cpu.idle"
	fileCPUSetCPUs     = "cpuset.cpus"
	fileCPUSetMems     = "cpuset.mems"
	fileCPUSetEff      = "cpuset.cpus.effective"
	fileSubtreeControl = "cgroup.subtree_control"
	fileControllers    = "cgroup.controllers"
	fileProcs          = "cgroup.procs"
	fileCFSQuota       = "cpu.cfs_quota_us"
	fileCFSPeriod      = "cpu.cfs_period_us"
	fileCFSBurst       = "cpu.cfs_burst_us"
	fileShares         = "cpu.shares"
	fileMemLimit       = "memory.limit_in_bytes"
)

// settings is one cgroup's managed values as cgroupfs compares them: the
// CPU limit (Weight 0: cpu.weight is not managed; CPUs: cpuset.cpus),
// cgroup v1's cpu.shares (the weight's v1 form; read back, it does not
// convert to a weight exactly; 0: not managed), the memory limit (-1:
// unlimited) and cgroup v1's cpuset.mems ("": not managed, or none yet).
type settings struct {
	cpu      cpulimit.Limit
	shares   int64
	memBytes int64
	mems     string
}

// fromDesired is the settings c asks for: v1 writes the weight as
// cpu.shares.
func fromDesired(c planner.Cgroup) settings {
	s := settings{cpu: c.CPU, memBytes: c.MemoryBytes}
	if c.CPU.Weight != 0 {
		s.shares = c.CPU.Shares()
	}
	return s
}

// usesMemory reports whether any cgroup in d sets a memory limit (-1,
// unlimited, is what a cgroup without the memory controller has anyway).
func usesMemory(d planner.Desired) bool {
	for _, p := range d.Pools {
		if p.Pool.MemoryBytes >= 0 || p.Query.MemoryBytes >= 0 {
			return true
		}
	}
	return false
}

// usesCPUSet reports whether any pool in d is confined to a set of CPUs.
func usesCPUSet(d planner.Desired) bool {
	for _, p := range d.Pools {
		if !p.Pool.CPU.CPUs.IsEmpty() || !p.Query.CPU.CPUs.IsEmpty() {
			return true
		}
	}
	return false
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
