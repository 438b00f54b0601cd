package admission

import (
	"container/list"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Usage is the CPU time a user's queries used in a pool, decayed with the
// pool's half-life: what the fair order counts after the running queries.
// The zero Usage is none.
type Usage struct {
	// Seconds is the decayed CPU time as of At.
	Seconds float64
	At      time.Time
}

// forgottenSeconds is the usage below which an idle user's state is
// forgotten: a microsecond of CPU time orders nobody.
const forgottenSeconds = 1e-6

// Now is the usage decayed to now: halved every halfLife; none with a
// half-life of 0.
func (u Usage) Now(now time.Time, halfLife time.Duration) float64 {
	if halfLife <= 0 || u.Seconds == 0 {
		return 0
	}
	dt := now.Sub(u.At)
	if dt <= 0 {
		return u.Seconds
	}
	return u.Seconds * math.Exp2(-dt.Seconds()/halfLife.Seconds())
}

// Add is the usage at now with cpu more.
func (u Usage) Add(cpu time.Duration, now time.Time, halfLife time.Duration) Usage {
	if halfLife <= 0 {
		return Usage{}
	}
	return Usage{Seconds: u.Now(now, halfLife) + cpu.Seconds(), At: now}
}

// Standing is what the fair order compares of a user who has queries
// waiting: their running queries, their decayed usage and the arrival of
// their oldest waiting query (the tie-break).
type Standing struct {
	Running      int
	UsageSeconds float64
	// Oldest orders the users' oldest waiting queries by arrival: a query
	// id on one host, a create revision in fleet mode.
	Oldest int64
}

// FairBefore reports whether a user standing at a is served before one
// standing at b under QUEUE_POLICY='fair': fewer running queries first,
// then less recent usage, then the older waiting query. Under FIFO only
// the arrival counts ([Standing.Oldest]).
func FairBefore(a, b Standing) bool {
	if a.Running != b.Running {
		return a.Running < b.Running
	}
	if a.UsageSeconds != b.UsageSeconds {
		return a.UsageSeconds < b.UsageSeconds
	}
	return a.Oldest < b.Oldest
}

// UserStats are one user's queries in a pool.
type UserStats struct {
	User    string
	Running int
	Queued  int
	// Usage is the user's CPU time in the pool as the fair order counts
	// it (decay it with Usage.Now and the pool's half-life); none in a
	// FIFO pool.
	Usage Usage
}

// WithUserCounts sorts s.Users by name and counts the users running and
// queued.
func WithUserCounts(s PoolStats) PoolStats {
	slices.SortFunc(s.Users, func(a, b UserStats) int { return strings.Compare(a.User, b.User) })
	s.UsersRunning, s.UsersQueued = 0, 0
	for _, u := range s.Users {
		if u.Running > 0 {
			s.UsersRunning++
		}
		if u.Queued > 0 {
			s.UsersQueued++
		}
	}
	return s
}

// userQueue is one user's part of a pool: running queries, waiting queries
// (oldest first) and recent usage.
type userQueue struct {
	name    string
	running int
	queue   list.List // of *query
	usage   Usage
}

// oldest is the id of the user's oldest waiting query; the user has one.
func (u *userQueue) oldest() QueryID { return u.queue.Front().Value.(*query).id }

// mayStart reports whether the user is below the pool's per-user running
// limit.
func (u *userQueue) mayStart(l UserLimits) bool { return l.Running == 0 || u.running < l.Running }

// idle reports whether nothing of the user is left to remember at now.
func (u *userQueue) idle(now time.Time, l UserLimits) bool {
	return u.running == 0 && u.queue.Len() == 0 && u.usage.Now(now, l.HalfLife) < forgottenSeconds
}

func (u *userQueue) standing(now time.Time, l UserLimits) Standing {
	return Standing{Running: u.running, UsageSeconds: u.usage.Now(now, l.HalfLife), Oldest: int64(u.oldest())}
}

// overUserQueue reports whether one more waiting query of a user with
// queued waiting is one too many: QUEUE_SIZE_PER_USER counts the waiting
// queries alone.
func overUserQueue(queued int, l UserLimits) bool {
	return l.QueueLimited && queued+1 > l.Queue
}

// UserQueueFullError is the rejection of a query whose user already has
// QUEUE_SIZE_PER_USER queries waiting, in the words of YDB's rejection,
// with the user's figures beside the pool's: running and queued are the
// user's, held the pool's running plus queued queries.
func UserQueueFullError(pool, userName string, running, queued, held int, l Limits) *Error {
	return &Error{
		Pool: pool,
		Reason: fmt.Sprintf("Request was rejected, user %s has %d running and %d delayed requests, "+
			"which is the allowed limit %d of delayed requests per user (concurrent query limit per user %s) for pool %s; "+
			"the pool holds %d delayed/running requests of allowed limit %d (including concurrent query limit %d)",
			userName, running, queued, l.Users.Queue, perUserLimit(l.Users.Running), pool,
			held, l.QueueSize, l.ConcurrentQueryLimit),
		kind: ErrQueueFull,
	}
}

// perUserLimit prints CONCURRENT_QUERY_LIMIT_PER_USER as configured: -1
// when not set, as YDB prints its limits.
func perUserLimit(running int) string {
	if running == 0 {
		return "-1"
	}
	return fmt.Sprint(running)
}

// Place is where a queued query stands in its pool: what [WhyWaiting]
// explains.
type Place struct {
	// Position is 1 + Ahead: 1 for the query that starts next.
	Position int
	// Ahead counts the queries that start before it as things stand:
	// under FIFO the waiting queries that arrived before it and may
	// start (their user is below the per-user limit), under the fair
	// order one query for each user ahead of its user, and in both its
	// own user's queries ahead of it.
	Ahead int
	// Fair: the pool orders its queue fairly (UsersAhead counts).
	Fair bool
	// UsersAhead are the users whose turn comes before the query's user
	// in the fair order; OwnAhead the user's own queries ahead of it.
	UsersAhead int
	OwnAhead   int
	// User is the query's user, with their running and waiting queries in
	// the pool.
	User        string
	UserRunning int
	UserQueued  int
}
