package admission

import (
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
	arrived  time.Time
	deadline time.Time // zero: waits for ever
	elem     *list.Element
	running  bool
}

type pool struct {
	stats PoolStats
	queue list.List // of *query, oldest first
}

// Controller admits queries into pools. It is not safe for concurrent use:
// the daemon serialises calls.
type Controller struct {
	load    LoadWindow
	pools   map[string]*pool
	queries map[QueryID]*query
	lastID  QueryID
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
			p = &pool{stats: PoolStats{Name: name}}
			c.pools[name] = p
		}
		p.stats.Limits = l
		p.stats.Dropped = false
		if l.ConcurrentQueryLimit == 0 {
			events = c.failQueue(p, now, disabledError(name), events)
			continue
		}
		for p.queue.Len() > 0 && overQueue(p.stats.Running, p.queue.Len()-1, l) {
			q := p.queue.Remove(p.queue.Back()).(*query)
			events = c.fail(q, now, queueFullError(name, p.stats.Running, p.queue.Len(), l), events)
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

// Submit asks to run a query in pool. It returns the query's id and
// whether it started at once; a query that did not start waits in the
// queue until an [Event] names it. A refused query gets an [*Error] and no
// id; an unknown pool gets ErrUnknownPool.
func (c *Controller) Submit(poolName string, now time.Time) (QueryID, bool, error) {
	p, ok := c.pools[poolName]
	if !ok || p.stats.Dropped {
		return 0, false, fmt.Errorf("%w: %q", ErrUnknownPool, poolName)
	}
	l := p.stats.Limits
	if l.ConcurrentQueryLimit == 0 {
		p.stats.Rejected++
		return 0, false, disabledError(poolName)
	}
	if p.queue.Len() == 0 && c.canStart(p) {
		q := c.newQuery(p, now)
		c.start(q)
		return q.id, true, nil
	}
	if overQueue(p.stats.Running, p.queue.Len(), l) {
		p.stats.Rejected++
		return 0, false, queueFullError(poolName, p.stats.Running, p.queue.Len(), l)
	}
	q := c.newQuery(p, now)
	if l.CancelAfter > 0 {
		q.deadline = now.Add(l.CancelAfter)
	}
	q.elem = p.queue.PushBack(q)
	return q.id, false, nil
}

// overQueue reports whether one more arriving query is one too many: YDB's
// rule that running + queued + the new one may exceed the concurrency limit
// by at most QUEUE_SIZE. With no concurrency limit only the queue counts.
func overQueue(running, queued int, l Limits) bool {
	switch {
	case l.QueueSize == Unlimited:
		return false
	case l.ConcurrentQueryLimit == Unlimited:
		return queued+1 > l.QueueSize
	default:
		return running+queued+1-l.ConcurrentQueryLimit > l.QueueSize
	}
}

func (c *Controller) newQuery(p *pool, now time.Time) *query {
	c.lastID++
	q := &query{id: c.lastID, pool: p, arrived: now}
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
	q.pool.stats.Running++
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
		p.queue.Remove(q.elem)
		c.forgetIfDone(p)
		return nil
	}
	p.stats.Running--
	events := c.drain(p, now, nil)
	c.forgetIfDone(p)
	return events
}

// Tick fails the queued queries whose QUERY_CANCEL_AFTER_SECONDS deadline
// is at or before now.
func (c *Controller) Tick(now time.Time) []Event {
	var events []Event
	for _, p := range c.pools {
		for e := p.queue.Front(); e != nil; {
			next := e.Next()
			q := e.Value.(*query)
			if !q.deadline.IsZero() && !now.Before(q.deadline) {
				p.queue.Remove(e)
				events = c.fail(q, now, deadlineError(p.stats.Name), events)
			}
			e = next
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
	if !c.load.Add(now, busyPercent) {
		return nil, false
	}
	return c.drainAll(now, nil), true
}

// drain starts queued queries of one pool while they may start.
func (c *Controller) drain(p *pool, now time.Time, events []Event) []Event {
	for p.queue.Len() > 0 && c.canStart(p) {
		events = c.startHead(p, now, events)
	}
	return events
}

// drainAll starts queued queries of every pool, always the oldest head that
// may start, so that pools sharing the host's CPU reservations are served
// in arrival order.
func (c *Controller) drainAll(now time.Time, events []Event) []Event {
	for {
		var best *pool
		for _, p := range c.pools {
			if p.queue.Len() == 0 || !c.canStart(p) {
				continue
			}
			if best == nil || p.queue.Front().Value.(*query).id < best.queue.Front().Value.(*query).id {
				best = p
			}
		}
		if best == nil {
			return events
		}
		events = c.startHead(best, now, events)
	}
}

func (c *Controller) startHead(p *pool, now time.Time, events []Event) []Event {
	q := p.queue.Remove(p.queue.Front()).(*query)
	q.elem = nil
	c.start(q)
	waited := now.Sub(q.arrived)
	p.stats.QueueWait += waited
	return append(events, Event{ID: q.id, Pool: p.stats.Name, QueuedFor: waited})
}

func (c *Controller) failQueue(p *pool, now time.Time, err *Error, events []Event) []Event {
	for p.queue.Len() > 0 {
		q := p.queue.Remove(p.queue.Front()).(*query)
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
	if p.stats.Dropped && p.stats.Running == 0 && p.queue.Len() == 0 {
		delete(c.pools, p.stats.Name)
	}
}

// Position is a queued query's place in its pool's queue, 1 for the head;
// 0 when the query is not queued.
func (c *Controller) Position(id QueryID) int {
	q, ok := c.queries[id]
	if !ok || q.running {
		return 0
	}
	n := 1
	for e := q.pool.queue.Front(); e != q.elem; e = e.Next() {
		n++
	}
	return n
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
		s.Queued = p.queue.Len()
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b PoolStats) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Active returns the names of the pools with running queries, sorted: the
// set the weighted max-min planner divides the CPU among.
func (c *Controller) Active() []string {
	var out []string
	for name, p := range c.pools {
		if p.stats.Running > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Load returns the state of CPU-load admission.
func (c *Controller) Load() LoadStats { return c.load.Stats() }
