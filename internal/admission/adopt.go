package admission

import "time"

// Adopt counts a query that is already running in pool without admitting
// it: a query the daemon finds in its cgroup when it starts (an earlier
// daemon admitted it and was restarted while it ran). It takes a running
// slot so that no slot is counted twice or lost, but it is not counted as
// admitted and reserves no host load. A pool the model no longer has is
// kept as dropped until its adopted queries leave. It counts as user's
// running query (the owner of its processes, for the per-user limits and
// the fair order), or, when user is "" (not known), towards the pool's
// limits and no user's. The query ends with [Controller.Leave] like any
// other.
func (c *Controller) Adopt(poolName, user string, now time.Time) QueryID {
	p, ok := c.pools[poolName]
	if !ok {
		p = newPool(PoolStats{Name: poolName, Limits: UnlimitedLimits(), Dropped: true})
		c.pools[poolName] = p
	}
	q := c.newQuery(p, p.user(user), now)
	q.running = true
	q.user.running++
	c.running(p, +1)
	return q.id
}

// adoptedUser holds the adopted queries of a pool whose user is not
// known: no user a daemon admits has an empty name.
const adoptedUser = ""
