// Package admission decides when a query may start in its resource pool:
// a running set bounded by CONCURRENT_QUERY_LIMIT, a FIFO queue bounded by
// QUEUE_SIZE, a queue-wait deadline (QUERY_CANCEL_AFTER_SECONDS) and
// CPU-load admission (DATABASE_LOAD_CPU_THRESHOLD) with YDB's 10%
// reservation per admitted query until the next load refresh.
//
// The package is pure: it does no I/O and never reads the clock. Every
// method takes the current time, and host load arrives through
// [Controller.Sample], so tests drive it with a fake clock and a fake load.
// docs/admission.md states the exact rules.
package admission

import (
	"time"

	"github.com/poolagent/poolagent/planner"
)

// Unlimited is the value of a limit that is not set (YDB's -1).
const Unlimited = -1

// Limits are one pool's admission parameters, in YDB's terms.
type Limits struct {
	// ConcurrentQueryLimit is CONCURRENT_QUERY_LIMIT: queries running at
	// once. Unlimited (-1) for no limit; 0 refuses every query.
	ConcurrentQueryLimit int
	// QueueSize is QUEUE_SIZE: queries allowed to wait. Unlimited (-1) for
	// no limit.
	QueueSize int
	// LoadCPUThresholdPercent is DATABASE_LOAD_CPU_THRESHOLD, percent of
	// the host's CPU: a query starts only while the measured load plus the
	// reservations is below it. Unlimited (-1) disables the check; 0 also
	// disables it, as in YDB, whose quota manager treats a zero threshold
	// as "no threshold".
	LoadCPUThresholdPercent float64
	// CancelAfter is QUERY_CANCEL_AFTER_SECONDS: how long a query may wait
	// in the queue before it fails. 0 waits for ever.
	CancelAfter time.Duration
	// Users are the pool's per-user limits and queue order, poolagent's
	// extension; the zero value limits no user and orders FIFO.
	Users UserLimits
	// StrictSlots is GLOBAL_SLOTS='strict' (poolagent's extension): in
	// fleet mode a node's running queries keep their slots when its
	// session lease expires. One host has no lease: it changes nothing
	// there.
	StrictSlots bool
}

// UserLimits are the rules for each user of a pool (poolagent's own
// parameters, docs/pools.md). The zero value has no per-user limit and
// keeps YDB's FIFO order.
type UserLimits struct {
	// Running is CONCURRENT_QUERY_LIMIT_PER_USER: queries one user may run
	// at once; 0 for no limit (the parameter is -1 or at least 1).
	Running int
	// Queue is QUEUE_SIZE_PER_USER when QueueLimited: queries one user may
	// have waiting; without QueueLimited there is no such limit.
	Queue        int
	QueueLimited bool
	// Fair is QUEUE_POLICY='fair': the next start goes to the user with
	// the least recent usage (see [FairBefore]); false is FIFO.
	Fair bool
	// HalfLife is USAGE_HALF_LIFE_SECONDS: how fast a user's CPU time in
	// the pool is forgotten by the fair order; 0 counts running queries
	// only.
	HalfLife time.Duration
}

// UnlimitedLimits are the limits of the default pool and of any pool that
// sets nothing: every query starts at once.
func UnlimitedLimits() Limits {
	return Limits{
		ConcurrentQueryLimit:    Unlimited,
		QueueSize:               Unlimited,
		LoadCPUThresholdPercent: Unlimited,
	}
}

// Global reports whether the pool has a database-wide limit
// (CONCURRENT_QUERY_LIMIT, QUEUE_SIZE or DATABASE_LOAD_CPU_THRESHOLD):
// in fleet mode such a pool admits against the whole cluster, one without
// admits on each node alone.
func (l Limits) Global() bool {
	return l.ConcurrentQueryLimit != Unlimited || l.QueueSize != Unlimited || l.checksLoad() || l.Users != UserLimits{}
}

// checksLoad reports whether admission in this pool waits for CPU load.
func (l Limits) checksLoad() bool { return l.LoadCPUThresholdPercent > 0 }

// LimitsFromModel takes every pool's admission parameters from the pool
// model: the one place where the planner's pools become admission limits.
// QUERY_CANCEL_AFTER_SECONDS of -1 or 0 waits for ever, as in YDB.
func LimitsFromModel(m *planner.Model) map[string]Limits {
	out := map[string]Limits{}
	for _, p := range m.Pools() {
		l := Limits{
			ConcurrentQueryLimit:    int(p.ConcurrentQueryLimit),
			QueueSize:               int(p.QueueSize),
			LoadCPUThresholdPercent: p.DatabaseLoadCPUThresholdPercent,
		}
		if p.QueryCancelAfterSeconds > 0 {
			l.CancelAfter = time.Duration(p.QueryCancelAfterSeconds) * time.Second
		}
		l.Users = userLimitsFromPool(p)
		l.StrictSlots = p.GlobalSlots == planner.SlotsStrict
		out[p.Name] = l
	}
	return out
}

// userLimitsFromPool is the per-user part of LimitsFromModel. A half-life
// of -1 takes planner.DefaultUsageHalfLifeSeconds; it matters only to a
// fair pool, so a FIFO pool keeps the zero UserLimits when it has no
// per-user limit.
func userLimitsFromPool(p planner.Pool) UserLimits {
	var u UserLimits
	if p.ConcurrentQueryLimitPerUser > 0 {
		u.Running = int(p.ConcurrentQueryLimitPerUser)
	}
	if p.QueueSizePerUser >= 0 {
		u.Queue, u.QueueLimited = int(p.QueueSizePerUser), true
	}
	if p.QueuePolicy == planner.QueueFair {
		u.Fair = true
		halfLife := p.UsageHalfLifeSeconds
		if halfLife < 0 {
			halfLife = planner.DefaultUsageHalfLifeSeconds
		}
		u.HalfLife = time.Duration(halfLife) * time.Second
	}
	return u
}
