package admission

import "github.com/poolagent/poolagent/protocol"

// WhyWaiting explains a queued query from its place in the queue (1 for
// the head), its pool's state and the load admission's state, by the rules
// a queued query starts by: strict FIFO per pool, and the head starts once
// the pool runs fewer than CONCURRENT_QUERY_LIMIT queries and, in a pool
// with a threshold, load + reservations is below it. The answer is the
// wire's [protocol.Wait], what `poolagent run` and `poolagent queries`
// show.
func WhyWaiting(position int, p PoolStats, load LoadStats) protocol.Wait {
	l := p.Limits
	w := protocol.Wait{
		Ahead: max(position-1, 0), Running: p.Running, Limit: l.ConcurrentQueryLimit,
		LoadPercent: load.AveragePercent, ReservedPercent: load.ReservedPercent,
		ThresholdPercent: Unlimited,
	}
	if l.checksLoad() {
		w.ThresholdPercent = l.LoadCPUThresholdPercent
	}
	switch {
	case l.ConcurrentQueryLimit != Unlimited && p.Running >= l.ConcurrentQueryLimit:
		w.HeadReason = protocol.WaitConcurrency
	case l.checksLoad() && load.AveragePercent+load.ReservedPercent >= l.LoadCPUThresholdPercent:
		w.HeadReason = protocol.WaitLoad
	default:
		w.HeadReason = protocol.WaitStarting
	}
	w.Reason = w.HeadReason
	if w.Ahead > 0 {
		w.Reason = protocol.WaitBehindHead
	}
	return w
}
