package admission

import "github.com/poolagent/poolagent/internal/protocol"

// WhyWaiting explains a queued query from where it stands in its pool
// (pl), its pool's state and the load admission's state, by the rules a
// queued query starts by: the next start is chosen among the users below
// CONCURRENT_QUERY_LIMIT_PER_USER, by arrival (FIFO) or by the fair
// order, and happens once the pool runs fewer than CONCURRENT_QUERY_LIMIT
// queries and, in a pool with a threshold, load + reservations is below
// it. The answer is the wire's [protocol.Wait], what `poolagent run` and
// `poolagent queries` show.
func WhyWaiting(pl Place, p PoolStats, load LoadStats) protocol.Wait {
	l := p.Limits
	w := protocol.Wait{
		Ahead: pl.Ahead, Running: p.Running, Limit: l.ConcurrentQueryLimit,
		LoadPercent: load.AveragePercent, ReservedPercent: load.ReservedPercent,
		ThresholdPercent: Unlimited,
		UserRunning:      pl.UserRunning, UserLimit: Unlimited,
		UsersAhead: pl.UsersAhead, OwnAhead: pl.OwnAhead,
	}
	if l.Users.Running > 0 {
		w.UserLimit = l.Users.Running
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
	switch {
	case w.UserLimit != Unlimited && pl.UserRunning >= w.UserLimit:
		w.Reason = protocol.WaitUserLimit
	case pl.Fair && pl.UsersAhead > 0:
		w.Reason = protocol.WaitFairOrder
	case pl.Fair && pl.OwnAhead > 0:
		w.Reason = protocol.WaitBehindOwn
	case !pl.Fair && pl.Ahead > 0:
		w.Reason = protocol.WaitBehindHead
	default:
		w.Reason = w.HeadReason
	}
	return w
}
