// Package observe is what the kernel reports, as values: the parsers of
// cgroup files (cpu.stat of cgroup v2 and v1, PSI, memory) that package
// cgroupfs reads and hands over as bytes, and the readers of host-wide
// /proc and /sys (host load, memory, online CPUs, threads, kernel
// settings). It never opens a cgroup file. WriteTable prints samples as
// `poolagent stat` shows them. The simulator produces the same CPUStat
// type, so predictions and measurements compare field by field.
package observe

// CPUStat is one cgroup's CPU accounting, shaped like cgroup v2's cpu.stat:
//
//	usage_usec 12345
//	user_usec 10000
//	system_usec 2345
//	nr_periods 100
//	nr_throttled 20
//	throttled_usec 160000
//	nr_bursts 1
//	burst_usec 20000
//
// All times are in microseconds. cgroup v1 reports throttled_time and
// burst_time in nanoseconds and usage in cpuacct; readers convert them.
type CPUStat struct {
	UsageUsec     uint64 `json:"usage_usec"`
	UserUsec      uint64 `json:"user_usec"`
	SystemUsec    uint64 `json:"system_usec"`
	NrPeriods     uint64 `json:"nr_periods"`
	NrThrottled   uint64 `json:"nr_throttled"`
	ThrottledUsec uint64 `json:"throttled_usec"`
	NrBursts      uint64 `json:"nr_bursts"`
	BurstUsec     uint64 `json:"burst_usec"`
}
