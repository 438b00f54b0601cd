package admission

import (
	"cmp"
	"container/list"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/poolagent/poolagent/planner"
)

// QueryID names one query for its whole life in a [Controller].
type QueryID uint64

// Event is a change a call caused to a query other than the one it was
// about: a queued query started (Err nil) or failed while waiting (Err an
// [*Error]). The caller passes each event to the query's waiter.
type Event struct {
	ID   QueryID
	Pool string
	// QueuedFor is the time the query spent in the queue.
	QueuedFor time.Duration
	Err       error
	// Queued: the query, which Submit left undecided (not started, Position
	// 0), now waits in its pool's queue; its final event (started or
	// failed) follows. Only a backend that decides over the network sends
	// it (see Backend).
	Queued bool
}

// PoolStats is a pool's admission state and counters since the pool was
// created.
type PoolStats struct {
	Name    string
	Limits  Limits
	Running int
	Queued  int
	// Dropped pools stay until their running queries have left.
	Dropped  bool
	Admitted uint64 // queries started, at once or from the queue
	Rejected uint64 // refused at arrival: queue full or pool disabled
	TimedOut uint64 // left the queue at QUERY_CANCEL_AFTER_SECONDS
	// Failed counts queries that left the queue because the pool changed:
	// dropped, disabled, or its queue shortened.
	Failed uint64
	// QueueWait is the total time started queries spent queued.
	QueueWait time.Duration
	// UsersRunning and UsersQueued count the distinct users with running
	// and with queued queries; Users has each of them, sorted by name.
	UsersRunning int
	UsersQueued  int
	Users        []UserStats
}

// LoadStats is the host-wide state of CPU-load admission.
type LoadStats struct {
	AveragePercent  float64 // moving average taken at the last refresh
	ReservedPercent float64 // reservations since the last refresh
	LastRefresh     time.Time
}

type query struct {
	id       QueryID
	pool     *pool
	user     *userQueue
	arrived  time.Time
	deadline time.Time     // zero: waits for ever
	elem     *list.Element // in its user's queue while waiting
	running  bool
}

// pool is one pool's state. Its queue is kept per user, each oldest
// first; the order across users is the pool's policy (next).
type pool struct {
	stats  PoolStats
	queued int
	users  map[string]*userQueue
}

func newPool(stats PoolStats) *pool { return &pool{stats: stats, users: map[string]*userQueue{}} }

// user returns the pool's state of the named user, made when missing.
func (p *pool) user(name string) *userQueue {
	u, ok := p.users[name]
	if !ok {
		u = &userQueue{name: name}
		p.users[name] = u
	}
	return u
}

// queries returns the pool's waiting queries, oldest first.
func (p *pool) queries() []*query {
	out := make([]*query, 0, p.queued)
	for _, u := range p.users {
		for e := u.queue.Front(); e != nil; e = e.Next() {
			out = append(out, e.Value.(*query))
		}
	}
	slices.SortFunc(out, func(a, b *query) int { return cmp.Compare(a.id, b.id) })
	return out
}

// next returns the user whose oldest waiting query the pool starts next:
// among the users below the per-user limit, the oldest query under FIFO,
// the first user in FairBefore's order under the fair policy. nil when
// no waiting query may start.
func (p *pool) next(now time.Time) *userQueue {
	l := p.stats.Limits.Users
	var best *userQueue
	var bestAt Standing
	for _, u := range p.users {
		if u.queue.Len() == 0 || !u.mayStart(l) {
			continue
		}
		st := u.standing(now, l)
		if !l.Fair {
			st.Running, st.UsageSeconds = 0, 0
		}
		if best == nil || FairBefore(st, bestAt) {
			best, bestAt = u, st
		}
	}
	return best
}

// forgetIdleUsers drops the users with nothing running, nothing waiting
// and no usage left to count.
func (p *pool) forgetIdleUsers(now time.Time) {
	for name, u := range p.users {
		if u.idle(now, p.stats.Limits.Users) {
			delete(p.users, name)
		}
	}
}

// Controller admits queries into pools. It is not safe for concurrent use:
// the daemon serialises calls.
type Controller struct {
	load    LoadWindow
	pools   map[string]*pool
	queries map[QueryID]*query
	lastID  QueryID
	// active names the pools with a running query, kept as queries start
	// and leave, so that Active costs what is active rather than every
	// pool.
	active map[string]bool
}

// NewController returns a controller for the given pools; the default pool
// is added, unlimited, when pools lacks it.
func NewController(cfg LoadConfig, pools map[string]Limits) (*Controller, error) {
	load, err := NewLoadWindow(cfg)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		load:    load,
		pools:   map[string]*pool{},
		queries: map[QueryID]*query{},
		active:  map[string]bool{},
	}
	c.Configure(pools, time.Time{})
	return c, nil
}

// Configure replaces the pools' limits, as after an ALTER or a reload. A
// pool that disappears is marked dropped: its queued queries fail with
// ErrPoolDropped and its running ones keep their slots until they leave.
// A queue above a lowered QUEUE_SIZE loses its newest queries (ErrQueueFull),
// a pool whose limit became 0 fails its queue (ErrPoolDisabled), and
// loosened limits start queued queries.
func (c *Controller) Configure(pools map[string]Limits, now time.Time) []Event {
	if _, ok := pools[planner.DefaultPool]; !ok {
		pools = cloneWithDefault(pools)
	}
	var events []Event
	for name, p := range c.pools {
		if _, ok := pools[name]; ok {
			continue
		}
		p.stats.Dropped = true
		events = c.failQueue(p, now, droppedError(name), events)
		c.forgetIfDone(p)
	}
	for name, l := range pools {
		p, ok := c.pools[name]
		if !ok {
			p = newPool(PoolStats{Name: name})
			c.pools[name] = p
		}
		p.stats.Limits = l
		p.stats.Dropped = false
		if l.ConcurrentQueryLimit == 0 {
			events = c.failQueue(p, now, disabledError(name), events)
			continue
		}
		queued := p.queries()
		for _, u := range p.users {
			for u.queue.Len() > 0 && overUserQueue(u.queue.Len()-1, l.Users) {
				q := u.queue.Back().Value.(*query)
				c.unqueue(q)
				events = c.fail(q, now, UserQueueFullError(name, u.name, u.running, u.queue.Len(), p.stats.Running+p.queued, l), events)
			}
		}
		for i := len(queued) - 1; i >= 0 && p.queued > 0 && l.OverQueue(p.stats.Running, p.queued-1); i-- {
			if q := queued[i]; q.elem != nil {
				c.unqueue(q)
				events = c.fail(q, now, queueFullError(name, p.stats.Running, p.queued, l), events)
			}
		}
	}
	return c.drainAll(now, events)
}

func cloneWithDefault(pools map[string]Limits) map[string]Limits {
	out := make(map[string]Limits, len(pools)+1)
	for k, v := range pools {
		out[k] = v
	}
	out[planner.DefaultPool] = UnlimitedLimits()
	return out
}

// Submit asks to run a query of userName in pool. It returns the query's
// id and whether it started at once; a query that did not start waits in
// the queue until an [Event] names it. A refused query gets an [*Error]
// and no id; an unknown pool gets ErrUnknownPool.
func (c *Controller) Submit(poolName, userName string, now time.Time) (QueryID, bool, error) {
	p, ok := c.pools[poolName]
	if !ok || p.stats.Dropped {
		return 0, false, fmt.Errorf("%w: %q", ErrUnknownPool, poolName)
	}
	l := p.stats.Limits
	if l.ConcurrentQueryLimit == 0 {
		p.stats.Rejected++
		return 0, false, disabledError(poolName)
	}
	u := p.user(userName)
	// After every call no waiting query of the pool may start while the
	// pool may start one (each call drains), so a query whose user is
	// below their limit starts at once when the pool has room: nobody
	// waiting is ahead of it.
	if c.canStart(p) && u.mayStart(l.Users) {
		q := c.newQuery(p, u, now)
		c.start(q)
		return q.id, true, nil
	}
	if l.OverQueue(p.stats.Running, p.queued) {
		p.stats.Rejected++
		c.forgetIfIdle(p, u, now)
		return 0, false, queueFullError(poolName, p.stats.Running, p.queued, l)
	}
	if overUserQueue(u.queue.Len(), l.Users) {
		p.stats.Rejected++
		err := UserQueueFullError(poolName, userName, u.running, u.queue.Len(), p.stats.Running+p.queued, l)
		c.forgetIfIdle(p, u, now)
		return 0, false, err
	}
	q := c.newQuery(p, u, now)
	if l.CancelAfter > 0 {
		q.deadline = now.Add(l.CancelAfter)
	}
	q.elem = u.queue.PushBack(q)
	p.queued++
	return q.id, false, nil
}

// unqueue takes a waiting query out of its pool's queue.
func (c *Controller) unqueue(q *query) {
	q.user.queue.Remove(q.elem)
	q.elem = nil
	q.pool.queued--
}

// forgetIfIdle drops u's state when nothing of it is left to count.
func (c *Controller) forgetIfIdle(p *pool, u *userQueue, now time.Time) {
	if u.idle(now, p.stats.Limits.Users) {
		delete(p.users, u.name)
	}
}

// OverQueue reports whether one more arriving query is one too many: YDB's
// rule that running + queued + the new one may exceed the concurrency limit
// by at most QUEUE_SIZE. With no concurrency limit only the queue counts.
// The fleet applies the same rule to a pool's cluster-wide counts.
func (l Limits) OverQueue(running, queued int) bool {
	switch {
	case l.QueueSize == Unlimited:
		return false
	case l.ConcurrentQueryLimit == Unlimited:
		return queued+1 > l.QueueSize
	default:
		return running+queued+1-l.ConcurrentQueryLimit > l.QueueSize
	}
}

func (c *Controller) newQuery(p *pool, u *userQueue, now time.Time) *query {
	c.lastID++
	q := &query{id: c.lastID, pool: p, user: u, arrived: now}
	c.queries[q.id] = q
	return q
}

func (c *Controller) canStart(p *pool) bool {
	l := p.stats.Limits
	if l.ConcurrentQueryLimit != Unlimited && p.stats.Running >= l.ConcurrentQueryLimit {
		return false
	}
	return !l.checksLoad() || c.load.Admits(l.LoadCPUThresholdPercent)
}

func (c *Controller) start(q *query) {
	q.running = true
	q.user.running++
	c.running(q.pool, +1)
	q.pool.stats.Admitted++
	if q.pool.stats.Limits.checksLoad() {
		c.load.Reserve()
	}
}

// Leave ends a query: a running one frees its slot (which may start the
// next queued query), a queued one leaves the queue. Unknown ids are
// ignored, so a query may leave twice.
func (c *Controller) Leave(id QueryID, now time.Time) []Event {
	q, ok := c.queries[id]
	if !ok {
		return nil
	}
	delete(c.queries, id)
	p := q.pool
	if !q.running {
		c.unqueue(q)
		c.forgetIfIdle(p, q.user, now)
		c.forgetIfDone(p)
		return nil
	}
	c.running(p, -1)
	q.user.running--
	events := c.drain(p, now, nil)
	c.forgetIfIdle(p, q.user, now)
	c.forgetIfDone(p)
	return events
}

// Charge adds cpu, CPU time a running query used, to its user's usage of
// the pool, which the fair order counts. The daemon charges a query at
// its end with its cgroup's usage. Unknown ids are ignored.
func (c *Controller) Charge(id QueryID, cpu time.Duration, now time.Time) {
	q, ok := c.queries[id]
	if !ok || !q.running {
		return
	}
	q.user.usage = q.user.usage.Add(cpu, now, q.pool.stats.Limits.Users.HalfLife)
}

// Tick fails the queued queries whose QUERY_CANCEL_AFTER_SECONDS deadline
// is at or before now.
func (c *Controller) Tick(now time.Time) []Event {
	var events []Event
	for _, p := range c.pools {
		if p.queued == 0 {
			continue
		}
		for _, q := range p.queries() {
			if !q.deadline.IsZero() && !now.Before(q.deadline) {
				c.unqueue(q)
				events = c.fail(q, now, deadlineError(p.stats.Name), events)
				c.forgetIfIdle(p, q.user, now)
			}
		}
	}
	return events
}

// Sample records the host's CPU load, percent busy over the last sample
// interval, and reports whether it refreshed. A refresh (the first sample,
// then once per RefreshInterval) makes the load the window's mean, drops
// the reservations and starts queued queries as far as the thresholds
// allow, oldest first across pools.
func (c *Controller) Sample(now time.Time, busyPercent float64) (events []Event, refreshed bool) {
	// Idle users' usage decays while nobody asks: a sample (every second
	// in the daemon) is where they are forgotten.
	for _, p := range c.pools {
		p.forgetIdleUsers(now)
	}
	if !c.load.Add(now, busyPercent) {
		return nil, false
	}
	return c.drainAll(now, nil), true
}

// drain starts queued queries of one pool while they may start.
func (c *Controller) drain(p *pool, now time.Time, events []Event) []Event {
	for p.queued > 0 && c.canStart(p) {
		u := p.next(now)
		if u == nil {
			break
		}
		events = c.startNext(u, now, events)
	}
	return events
}

// drainAll starts queued queries of every pool, always the oldest of the
// queries the pools would start next, so that pools sharing the host's
// CPU reservations are served in arrival order.
func (c *Controller) drainAll(now time.Time, events []Event) []Event {
	for {
		var best *userQueue
		for _, p := range c.pools {
			if p.queued == 0 || !c.canStart(p) {
				continue
			}
			if u := p.next(now); u != nil && (best == nil || u.oldest() < best.oldest()) {
				best = u
			}
		}
		if best == nil {
			return events
		}
		events = c.startNext(best, now, events)
	}
}

// startNext starts u's oldest waiting query.
func (c *Controller) startNext(u *userQueue, now time.Time, events []Event) []Event {
	q := u.queue.Front().Value.(*query)
	c.unqueue(q)
	p := q.pool
	c.start(q)
	waited := now.Sub(q.arrived)
	p.stats.QueueWait += waited
	return append(events, Event{ID: q.id, Pool: p.stats.Name, QueuedFor: waited})
}

func (c *Controller) failQueue(p *pool, now time.Time, err *Error, events []Event) []Event {
	for _, q := range p.queries() {
		c.unqueue(q)
		events = c.fail(q, now, err, events)
	}
	return events
}

func (c *Controller) fail(q *query, now time.Time, err *Error, events []Event) []Event {
	delete(c.queries, q.id)
	if errors.Is(err, ErrDelayDeadline) {
		q.pool.stats.TimedOut++
	} else {
		q.pool.stats.Failed++
	}
	return append(events, Event{ID: q.id, Pool: q.pool.stats.Name, QueuedFor: now.Sub(q.arrived), Err: err})
}

// forgetIfDone deletes a dropped pool once nothing refers to it.
func (c *Controller) forgetIfDone(p *pool) {
	if p.stats.Dropped && p.stats.Running == 0 && p.queued == 0 {
		delete(c.pools, p.stats.Name)
	}
}

// Place is where a queued query stands in its pool (see [Place]); false
// when the query is not queued.
func (c *Controller) Place(id QueryID, now time.Time) (Place, bool) {
	q, ok := c.queries[id]
	if !ok || q.running {
		return Place{}, false
	}
	p, me := q.pool, q.user
	l := p.stats.Limits.Users
	pl := Place{Fair: l.Fair, User: me.name, UserRunning: me.running, UserQueued: me.queue.Len()}
	for e := me.queue.Front(); e != q.elem; e = e.Next() {
		pl.OwnAhead++
	}
	mine := me.standing(now, l)
	for _, u := range p.users {
		if u == me || u.queue.Len() == 0 || !u.mayStart(l) {
			continue
		}
		if l.Fair {
			if !me.mayStart(l) || FairBefore(u.standing(now, l), mine) {
				pl.UsersAhead++
			}
			continue
		}
		for e := u.queue.Front(); e != nil && e.Value.(*query).id < q.id; e = e.Next() {
			pl.Ahead++
		}
	}
	pl.Ahead += pl.UsersAhead + pl.OwnAhead
	pl.Position = pl.Ahead + 1
	return pl, true
}

// PoolLimits returns the limits of a pool that exists and is not dropped.
func (c *Controller) PoolLimits(name string) (Limits, bool) {
	p, ok := c.pools[name]
	if !ok || p.stats.Dropped {
		return Limits{}, false
	}
	return p.stats.Limits, true
}

// Pools returns every pool's state, sorted by name.
func (c *Controller) Pools() []PoolStats {
	out := make([]PoolStats, 0, len(c.pools))
	for _, p := range c.pools {
		s := p.stats
		s.Queued = p.queued
		for _, u := range p.users {
			if u.name == adoptedUser || u.running == 0 && u.queue.Len() == 0 {
				continue
			}
			s.Users = append(s.Users, UserStats{User: u.name, Running: u.running, Queued: u.queue.Len(), Usage: u.usage})
		}
		out = append(out, WithUserCounts(s))
	}
	slices.SortFunc(out, func(a, b PoolStats) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Active returns the names of the pools with running queries, sorted: the
// set the weighted max-min planner divides the CPU among.
func (c *Controller) Active() []string {
	var out []string
	for name := range c.active {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// running counts a query starting (by +1) or leaving (-1) p's running
// ones, and keeps the active set.
func (c *Controller) running(p *pool, by int) {
	p.stats.Running += by
	if p.stats.Running > 0 {
		c.active[p.stats.Name] = true
	} else {
		delete(c.active, p.stats.Name)
	}
}

// Load returns the state of CPU-load admission.
func (c *Controller) Load() LoadStats { return c.load.Stats() }
