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

// ParseCPUStatV1 parses the cpu.stat file of a cgroup in v1's cpu
// hierarchy and converts its nanoseconds to microseconds:
//
//	nr_periods 100
//	nr_throttled 20
//	throttled_time 1600000000
//	nr_bursts 1
//	burst_time 20000000
//
// v1 cpu.stat has no usage: it is in cpuacct ([ParseCPUAcctUsage],
// [ParseCPUAcctStat]). Keys this package does not know (wait_sum, …) are
// skipped.
func ParseCPUStatV1(b []byte) (CPUStat, error) {
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

// ParseCPUAcctUsage parses cgroup v1 cpuacct.usage: one unsigned decimal,
// nanoseconds ("90653512357").
func ParseCPUAcctUsage(b []byte) (uint64, error) {
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("usage %q: want one unsigned integer (nanoseconds): %w", s, err)
	}
	return v, nil
}

// ParseCPUAcctStat parses cgroup v1 cpuacct.stat (USER_HZ ticks, 10 ms)
// into UserUsec and SystemUsec; the other fields are zero:
//
//	user 4886
//	system 4178
func ParseCPUAcctStat(b []byte) (CPUStat, error) {
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
