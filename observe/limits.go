package observe

import (
	"fmt"
	"strconv"
	"strings"
)

// CPUMax is a cgroup v2 cpu.max: the CPU time a cgroup may use per period.
type CPUMax struct {
	// QuotaUsec is the CPU time allowed per period, µs; -1 when the
	// cgroup has no limit ("max").
	QuotaUsec int64
	// PeriodUsec is the period's length, µs (> 0).
	PeriodUsec uint64
}

// VCPU is the limit in vCPUs (quota over period); 0 without a limit
// (and for the zero CPUMax).
func (c CPUMax) VCPU() float64 {
	if c.QuotaUsec < 0 || c.PeriodUsec == 0 {
		return 0
	}
	return float64(c.QuotaUsec) / float64(c.PeriodUsec)
}

// ParseCPUMax reads cpu.max as the kernel writes it: "max PERIOD" or
// "QUOTA PERIOD", both in µs and positive.
func ParseCPUMax(s string) (CPUMax, error) {
	t := strings.TrimSpace(s)
	f := strings.Fields(t)
	if len(f) != 2 {
		return CPUMax{}, fmt.Errorf("cpu.max %q: want \"max PERIOD\" or \"QUOTA PERIOD\"", t)
	}
	period, err := strconv.ParseUint(f[1], 10, 63)
	if err != nil || period == 0 {
		return CPUMax{}, fmt.Errorf("cpu.max %q: period %q is not a positive number of µs", t, f[1])
	}
	if f[0] == "max" {
		return CPUMax{QuotaUsec: -1, PeriodUsec: period}, nil
	}
	quota, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || quota <= 0 {
		return CPUMax{}, fmt.Errorf("cpu.max %q: quota %q is neither \"max\" nor a positive number of µs", t, f[0])
	}
	return CPUMax{QuotaUsec: quota, PeriodUsec: period}, nil
}

// noMemoryLimit is where cgroup v1 memory.limit_in_bytes reads as
// unlimited: the kernel reports PAGE_COUNTER_MAX pages in bytes
// (9223372036854771712 with 4 KiB pages), never a real limit.
const noMemoryLimit = 1 << 62

// ParseMemoryLimit reads cgroup v2 memory.max ("max" or bytes) or v1
// memory.limit_in_bytes (bytes) as bytes; -1 when unlimited.
func ParseMemoryLimit(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "max" {
		return -1, nil
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memory limit %q: want \"max\" or bytes", t)
	}
	if v >= noMemoryLimit {
		return -1, nil
	}
	return int64(v), nil
}
