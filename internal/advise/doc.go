// Package advise turns a recording of a pool into advice: given a
// [history.Trace] (`poolagent record` or the daemon's history),
// [Diagnose] says why the pool is throttled, and [Advise] searches the
// smallest change of its limit (TOTAL_CPU_LIMIT_PERCENT_PER_NODE,
// CPU_BURST_PERCENT, CPU_PERIOD_USEC) that meets a [Budget], replaying
// the trace's [Demand] with simulate's kernel-faithful model. It is pure
// and deterministic: it reads no cgroup. docs/advise.md describes the
// trace format and the search.
package advise
