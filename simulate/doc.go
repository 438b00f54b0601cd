// Package simulate predicts CPU bandwidth throttling without a kernel. It is
// pure and deterministic: the same input always gives the same output, and
// nothing here reads a clock or a file.
//
// # The chapter's model
//
// [Run] is the reference model of cgroup v2 cpu.max ("QUOTA PERIOD") and
// cpu.max.burst as a fixed window, in abstract ticks: one tick is one CPU
// running for one unit of time, so a TickLimit of Quota 40 and Period 100 means
// "40 CPU-ticks every 100 ticks of wall time". At every period start
// (tick 0, Period, 2*Period, ...) the group gets Quota plus what it carried
// over, where the carry is min(leftover, Burst); with Burst 0 leftovers
// vanish. Within a tick, runnable tasks (arrived, not done) are served in
// slice order, at most ncpu of them, while quota remains. When the quota runs
// out part-way through a tick, every remaining runnable task in slice order
// is counted throttled for that tick, even beyond ncpu; when ncpu tasks ran
// first, the rest simply wait for a CPU and are not throttled.
//
// Inputs are checked: a TickLimit with Period <= 0, Quota <= 0 or Burst < 0,
// ncpu < 1, or a task with Need < 0 or Arrive < 0 is rejected, as is an
// input whose run would not end within the int range of ticks. [RunChecked]
// and [Validate] say why with an [*InputError]; [Run] returns nil, nil for
// such input. A task with Need 0 is done at its arrival (Latency 0,
// Throttled 0) and takes no part in the schedule: it neither runs nor
// extends the reported periods. Periods are reported from tick 0 until the
// last task with Need > 0 is done, idle ones included; with no such task
// there are no periods.
//
// [Run] jumps from event to event instead of stepping tick by tick; the
// tests keep the chapter's per-tick loop as the reference and hold the two
// to identical output.
//
// # Beyond the chapter
//
// [RunHost] models a node with several groups, weights and nested caps,
// and reduces to [Run] for one group on ncpu CPUs; [RunKernel] adds the
// kernel's own bandwidth mechanics on the same [Host].
package simulate
