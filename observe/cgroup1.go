package observe

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// userHZ is the tick unit of cgroup v1's cpuacct.stat, which the kernel
// reports with nsec_to_clock_t: USER_HZ, 100 on every architecture this
// project builds for (x86, arm64), whatever CONFIG_HZ is.
const userHZ = 100

// ReadCPUStatV1 reads the cpu.stat file of a directory in cgroup v1's cpu
// hierarchy, for example /sys/fs/cgroup/cpu/poolagent/olap, and converts
// its nanoseconds to microseconds:
//
//	nr_periods 100
//	nr_throttled 20
//	throttled_time 1600000000
//	nr_bursts 1
//	burst_time 20000000
//
// v1 cpu.stat has no usage; ReadUsageV1 reads it from cpuacct. Keys this
// package does not know (wait_sum, …) are skipped.
func ReadCPUStatV1(dir string) (CPUStat, error) {
	return readFile(dir, "cpu.stat", parseCPUStatV1)
}

// parseCPUStatV1 parses the text of a cgroup v1 cpu.stat file.
func parseCPUStatV1(b []byte) (CPUStat, error) {
	var st CPUStat
	var throttledNsec, burstNsec uint64
	_, err := parseKeyValues(b, map[string]*uint64{
		"nr_periods":     &st.NrPeriods,
		"nr_throttled":   &st.NrThrottled,
		"throttled_time": &throttledNsec,
		"nr_bursts":      &st.NrBursts,
		"burst_time":     &burstNsec,
	})
	if err != nil {
		return CPUStat{}, err
	}
	st.ThrottledUsec = throttledNsec / 1000
	st.BurstUsec = burstNsec / 1000
	return st, nil
}

// ReadLocalThrottledUsecV1 reads throttled_time from the cpu.stat.local
// file of a directory in cgroup v1's cpu hierarchy, the time in
// nanoseconds this group's own runnable tasks were held off the CPU by its
// own quota or an ancestor's, summed per CPU, and returns it in
// microseconds. The file format is
//
//	throttled_time 1600000000
//
// ok is false when the kernel has no cpu.stat.local (before Linux 6.6).
func ReadLocalThrottledUsecV1(dir string) (usec uint64, ok bool, err error) {
	return readLocal(dir, "throttled_time", 1000)
}

// ReadUsageV1 reads a group's CPU usage from a directory in cgroup v1's
// cpuacct hierarchy, for example /sys/fs/cgroup/cpuacct/poolagent/olap.
// UsageUsec comes from cpuacct.usage (one number, nanoseconds):
//
//	90653512357
//
// and UserUsec and SystemUsec from cpuacct.stat (USER_HZ ticks, 10 ms):
//
//	user 4886
//	system 4178
//
// The other fields of the result are zero.
func ReadUsageV1(dir string) (CPUStat, error) {
	usageNsec, err := readFile(dir, "cpuacct.usage", parseCPUAcctUsage)
	if err != nil {
		return CPUStat{}, err
	}
	st, err := readFile(dir, "cpuacct.stat", parseCPUAcctStat)
	if err != nil {
		return CPUStat{}, err
	}
	st.UsageUsec = usageNsec / 1000
	return st, nil
}

// parseCPUAcctUsage parses cpuacct.usage: one unsigned decimal, nanoseconds.
func parseCPUAcctUsage(b []byte) (uint64, error) {
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("usage %q: want one unsigned integer (nanoseconds): %w", s, err)
	}
	return v, nil
}

// parseCPUAcctStat parses cpuacct.stat into UserUsec and SystemUsec.
func parseCPUAcctStat(b []byte) (CPUStat, error) {
	var userTicks, systemTicks uint64
	if _, err := parseKeyValues(b, map[string]*uint64{
		"user":   &userTicks,
		"system": &systemTicks,
	}); err != nil {
		return CPUStat{}, err
	}
	var st CPUStat
	var err error
	if st.UserUsec, err = ticksToUsec(userTicks); err != nil {
		return CPUStat{}, fmt.Errorf("user: %w", err)
	}
	if st.SystemUsec, err = ticksToUsec(systemTicks); err != nil {
		return CPUStat{}, fmt.Errorf("system: %w", err)
	}
	return st, nil
}

// ticksToUsec converts USER_HZ ticks to microseconds, refusing values that
// overflow uint64.
func ticksToUsec(ticks uint64) (uint64, error) {
	hi, lo := bits.Mul64(ticks, 1_000_000/userHZ)
	if hi != 0 {
		return 0, fmt.Errorf("%d ticks overflow microseconds", ticks)
	}
	return lo, nil
}
