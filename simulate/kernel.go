package simulate

import "fmt"

// KernelParams are the kernel settings the kernel-faithful mode needs
// beyond the scenario itself. Times are microseconds. The simulator never
// reads them from the host: the caller does (the CLI reads
// /proc/sys/kernel/sched_cfs_bandwidth_slice_us and CONFIG_HZ).
type KernelParams struct {
	// SliceUsec is sched_cfs_bandwidth_slice_us: how much quota a CPU's
	// runqueue takes from its group's pool at a time. Kernel default 5000.
	SliceUsec int64
	// TickUsec is the scheduler tick, 1e6/CONFIG_HZ: 4000 at HZ=250. A
	// runqueue that spent its silo keeps running until its CPU's next
	// tick, so the tick bounds how far a group overruns its quota.
	TickUsec int64
	// TickPhaseUsec is the time of the first tick after the scenario's
	// time 0, in [0, TickUsec). Ticks of all CPUs are aligned.
	TickPhaseUsec int64
	// PeriodPhaseUsec gives, per group path ("olap", "olap/q1"), the
	// phase of its period timer: the timer expires at phase + k*period.
	// A group not listed has phase 0 (a boundary at time 0). The kernel
	// picks each phase at random when the cgroup is created.
	PeriodPhaseUsec map[string]int64
	// WindowUsec, when > 0, asks for a timeline: every group's run and
	// throttled time in consecutive windows of this length from time 0.
	WindowUsec int64
}

// DefaultKernelParams are the kernel's defaults: a 5 ms slice and
// HZ=250, every phase 0, no timeline.
func DefaultKernelParams() KernelParams {
	return KernelParams{SliceUsec: 5000, TickUsec: 4000}
}

// Validate reports the first parameter the kernel model cannot use as an
// [*InputError], or nil.
func (p KernelParams) Validate() error {
	switch {
	case p.SliceUsec < 1:
		return &InputError{Field: "KernelParams.SliceUsec", Value: int(p.SliceUsec), Want: ">= 1 (sched_cfs_bandwidth_slice_us, kernel default 5000)"}
	case p.TickUsec < 1:
		return &InputError{Field: "KernelParams.TickUsec", Value: int(p.TickUsec), Want: ">= 1 (1e6/CONFIG_HZ, 4000 at HZ=250)"}
	case p.TickPhaseUsec < 0 || p.TickPhaseUsec >= p.TickUsec:
		return &InputError{Field: "KernelParams.TickPhaseUsec", Value: int(p.TickPhaseUsec), Want: fmt.Sprintf("in [0, %d)", p.TickUsec)}
	case p.WindowUsec < 0:
		return &InputError{Field: "KernelParams.WindowUsec", Value: int(p.WindowUsec), Want: ">= 0 (0: no timeline)"}
	}
	for name, ph := range p.PeriodPhaseUsec {
		if ph < 0 {
			return &InputError{Field: fmt.Sprintf("KernelParams.PeriodPhaseUsec[%q]", name), Value: int(ph), Want: ">= 0"}
		}
	}
	return nil
}
