// Package history is a pool's CPU history: the [Trace] (the file format
// `poolagent advise` reads, docs/advise.md), and the sampler that takes
// one from a live pool tree, reading through a small reader interface
// and never writing: what a pool's counters grew by in each interval,
// what its threads and its queries' cgroups did. [Record] samples one
// pool for `poolagent record` ([PoolReader]); a [Rolling] history keeps
// the last window of every pool the daemon plans for `advise --pool`
// ([Reader]). Both take their samples the same way (one function makes a
// sample of two reads of a pool's counters), so a trace means the same
// whichever took it.
package history
