// Package advise turns a recording of a pool into advice: [Record]
// samples a live pool into a [Trace] (it only reads), [Diagnose] says why
// the pool is throttled, and [Advise] searches the smallest change of its
// limit (TOTAL_CPU_LIMIT_PERCENT_PER_NODE, CPU_BURST_PERCENT,
// CPU_PERIOD_USEC) that meets a [Budget], replaying the trace's [Demand]
// with simulate's kernel-faithful model. Everything but the recording is
// pure and deterministic. docs/advise.md describes the trace format and
// the search.
package advise
