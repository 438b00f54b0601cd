// Package cpulimit is a cgroup's CPU limit as one value: its bandwidth
// (quota, period, burst), its weight, its idle class and the CPUs it may
// run on, with the kernel's encodings of them for cgroup v2 and v1 beside
// it. The planner decides a Limit, cgroupfs writes and reads it back, the
// simulator runs on it, and compare and the metrics report it; nothing
// else renders or parses these files.
package cpulimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kernel values (kernel/sched/core.c, Documentation/admin-guide/cgroup-v2.rst).
const (
	// Max is the QuotaUsec of a cgroup without a bandwidth limit: cgroup v2
	// cpu.max "max", cgroup v1 cpu.cfs_quota_us -1.
	Max = -1
	// DefaultPeriodUsec is the period of a new cgroup, µs.
	DefaultPeriodUsec = 100000
	// MinQuotaUsec, MinPeriodUsec and MaxPeriodUsec bound quota and
	// period: at least 1 ms, a period at most 1 s.
	MinQuotaUsec  = 1000
	MinPeriodUsec = 1000
	MaxPeriodUsec = 1000000
	// DefaultWeight, MinWeight and MaxWeight are cgroup v2 cpu.weight's
	// default and range.
	DefaultWeight = 100
	MinWeight     = 1
	MaxWeight     = 10000
	// DefaultShares, MinShares and MaxShares are cgroup v1 cpu.shares'
	// default and range.
	DefaultShares = 1024
	MinShares     = 2
	MaxShares     = 262144
)

// Limit is one cgroup's CPU limit.
//
//	QuotaUsec   µs of CPU time per period, summed over CPUs; Max = none
//	            (v2 cpu.max "QUOTA PERIOD" | "max PERIOD"; v1 cpu.cfs_quota_us)
//	PeriodUsec  µs, the bandwidth window (v2 cpu.max; v1 cpu.cfs_period_us)
//	BurstUsec   µs of unused quota carried into the next period, 0 = none
//	            (v2 cpu.max.burst; v1 cpu.cfs_burst_us); the kernel wants
//	            it <= QuotaUsec
//	Weight      share among busy siblings, 1..10000 (v2 cpu.weight; v1
//	            cpu.shares, see [Limit.Shares]); 0 = the kernel's default,
//	            and cgroupfs leaves the file as it is
//	Idle        SCHED_IDLE for the whole cgroup: its tasks run only when
//	            no non-idle task of its siblings wants the CPU (v2 and v1
//	            cpu.idle "1", "0" otherwise; Linux >= 5.15). The kernel
//	            gives an idle cgroup the least weight and refuses a
//	            weight written to it, so Weight is 0 with Idle
//	CPUs        the CPUs the cgroup's tasks may run on (v2 and v1
//	            cpuset.cpus, a CPU list, see [CPUSet]); empty = not
//	            confined, every CPU its parent has
//
// The zero Limit is not valid (its period is 0); [Unlimited] is a cgroup's
// state when nothing limits it.
type Limit struct {
	QuotaUsec  int64
	PeriodUsec int64
	BurstUsec  int64
	Weight     int64
	Idle       bool
	CPUs       CPUSet
}

// Unlimited is a limit without a quota or burst, with the given period and
// the default weight: what a new cgroup has (with DefaultPeriodUsec).
func Unlimited(periodUsec int64) Limit {
	return Limit{QuotaUsec: Max, PeriodUsec: periodUsec, Weight: DefaultWeight}
}

// Limited reports whether the limit has a quota.
func (l Limit) Limited() bool { return l.QuotaUsec != Max }

// VCPU is the quota in vCPUs (quota over period); 0 without a quota (and
// for a zero period).
func (l Limit) VCPU() float64 {
	if l.QuotaUsec < 0 || l.PeriodUsec <= 0 {
		return 0
	}
	return float64(l.QuotaUsec) / float64(l.PeriodUsec)
}

// EffectiveWeight is Weight, or DefaultWeight when Weight is 0.
func (l Limit) EffectiveWeight() int64 {
	if l.Weight == 0 {
		return DefaultWeight
	}
	return l.Weight
}

// IdleWeight is the weight an idle cgroup has in the scheduler, in
// cpu.weight's units: the kernel gives it WEIGHT_IDLEPRIO, 3 where the
// default weight is NICE_0_LOAD's 1024 (kernel/sched/fair.c
// sched_group_set_idle), so 3 × 100 / 1024.
const IdleWeight = 3.0 * DefaultWeight / 1024

// SchedWeight is the weight the scheduler shares CPU by: [IdleWeight] for
// an idle cgroup, the effective weight otherwise. An idle cgroup is also
// preempted at once by a waking non-idle task, which a weight cannot say.
func (l Limit) SchedWeight() float64 {
	if l.Idle {
		return IdleWeight
	}
	return float64(l.EffectiveWeight())
}

// Ratio is the kernel's normalised bandwidth, to_ratio(period, quota) =
// quota<<20/period, with math.MaxUint64 for no quota. cgroup v1 refuses a
// child whose ratio is above its nearest limited ancestor's.
func (l Limit) Ratio() uint64 {
	if l.QuotaUsec < 0 || l.PeriodUsec <= 0 {
		return math.MaxUint64
	}
	return uint64(l.QuotaUsec) << 20 / uint64(l.PeriodUsec)
}

// CPUMax renders the cgroup v2 cpu.max line: "QUOTA PERIOD", or
// "max PERIOD" without a quota.
func (l Limit) CPUMax() string {
	period := strconv.FormatInt(l.PeriodUsec, 10)
	if l.QuotaUsec < 0 {
		return "max " + period
	}
	return strconv.FormatInt(l.QuotaUsec, 10) + " " + period
}

// ParseCPUMax reads cgroup v2 cpu.max as the kernel writes it: "max PERIOD"
// or "QUOTA PERIOD", both in µs and positive. Burst and Weight of the
// result are 0: they live in files of their own.
func ParseCPUMax(s string) (Limit, error) {
	t := strings.TrimSpace(s)
	f := strings.Fields(t)
	if len(f) != 2 {
		return Limit{}, fmt.Errorf("cpu.max %q: want \"max PERIOD\" or \"QUOTA PERIOD\"", t)
	}
	period, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || period <= 0 {
		return Limit{}, fmt.Errorf("cpu.max %q: period %q is not a positive number of µs", t, f[1])
	}
	if f[0] == "max" {
		return Limit{QuotaUsec: Max, PeriodUsec: period}, nil
	}
	quota, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || quota <= 0 {
		return Limit{}, fmt.Errorf("cpu.max %q: quota %q is neither \"max\" nor a positive number of µs", t, f[0])
	}
	return Limit{QuotaUsec: quota, PeriodUsec: period}, nil
}

// CPUIdle renders cpu.idle (cgroup v2 and v1 alike): "1" for an idle
// cgroup, "0" otherwise.
func (l Limit) CPUIdle() string {
	if l.Idle {
		return "1"
	}
	return "0"
}

// ParseCPUIdle reads cpu.idle as the kernel writes it: "0" or "1".
func ParseCPUIdle(s string) (bool, error) {
	switch t := strings.TrimSpace(s); t {
	case "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("cpu.idle %q: want 0 or 1", t)
	}
}

// CFSQuota renders cgroup v1 cpu.cfs_quota_us: the quota in µs, "-1"
// without one.
func (l Limit) CFSQuota() string { return strconv.FormatInt(max(l.QuotaUsec, Max), 10) }

// ParseCFSQuota reads cgroup v1 cpu.cfs_quota_us as the kernel writes
// it: "-1" (no quota, [Max]) or a positive number of µs.
func ParseCFSQuota(s string) (int64, error) {
	t := strings.TrimSpace(s)
	q, err := strconv.ParseInt(t, 10, 64)
	if err != nil || q < Max || q == 0 {
		return 0, fmt.Errorf("cpu.cfs_quota_us %q: want -1 or a positive number of µs", t)
	}
	return q, nil
}

// ParseCFSPeriod reads cgroup v1 cpu.cfs_period_us: a positive number of
// µs.
func ParseCFSPeriod(s string) (int64, error) {
	t := strings.TrimSpace(s)
	p, err := strconv.ParseInt(t, 10, 64)
	if err != nil || p <= 0 {
		return 0, fmt.Errorf("cpu.cfs_period_us %q: want a positive number of µs", t)
	}
	return p, nil
}

// Shares is the cgroup v1 cpu.shares that gives the scheduler the same
// group weight as Weight: [SharesFromWeight] of the effective weight.
func (l Limit) Shares() int64 { return SharesFromWeight(l.EffectiveWeight()) }

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
func SharesFromWeight(weight int64) int64 {
	return (weight*1024 + 50) / 100
}

// Check applies the kernel's rules to the values set (tg_set_cfs_bandwidth,
// cpu_weight_write_u64): a quota of Max or at least MinQuotaUsec, a period
// of MinPeriodUsec..MaxPeriodUsec, a burst at most the quota, a weight of 0
// (left as it is) or MinWeight..MaxWeight, and weight 0 when idle.
func (l Limit) Check() error {
	if l.QuotaUsec != Max && l.QuotaUsec < MinQuotaUsec {
		return fmt.Errorf("quota %d µs: want -1 (unlimited) or at least %d µs", l.QuotaUsec, MinQuotaUsec)
	}
	if l.PeriodUsec < MinPeriodUsec || l.PeriodUsec > MaxPeriodUsec {
		return fmt.Errorf("period %d µs: want %d..%d µs", l.PeriodUsec, MinPeriodUsec, MaxPeriodUsec)
	}
	if l.BurstUsec < 0 {
		return fmt.Errorf("burst %d µs: want 0 or more", l.BurstUsec)
	}
	if l.BurstUsec > 0 && l.QuotaUsec >= 0 && l.BurstUsec > l.QuotaUsec {
		return fmt.Errorf("burst %d µs is above the quota %d µs; the kernel wants burst <= quota", l.BurstUsec, l.QuotaUsec)
	}
	if l.Weight != 0 && (l.Weight < MinWeight || l.Weight > MaxWeight) {
		return fmt.Errorf("cpu.weight %d: want %d..%d", l.Weight, MinWeight, MaxWeight)
	}
	if l.Idle && l.Weight != 0 {
		return fmt.Errorf("cpu.weight %d on an idle cgroup: the kernel refuses a weight for a cgroup with cpu.idle 1; want weight 0 (left as it is)", l.Weight)
	}
	return nil
}
