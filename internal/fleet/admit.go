package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/planner"
)

// Configure replaces the pools' limits, as after a change of the shared
// definitions. A pool that disappears fails this node's queued queries
// with admission.ErrPoolDropped (running ones keep their slots until they
// leave); a pool whose limit became 0 fails them with ErrPoolDisabled; a
// queue above a lowered QUEUE_SIZE loses the queries of this node beyond
// it (ErrQueueFull).
func (b *Backend) Configure(pools map[string]admission.Limits, now time.Time) []admission.Event {
	if _, ok := pools[planner.DefaultPool]; !ok {
		pools = maps.Clone(pools)
		if pools == nil {
			pools = map[string]admission.Limits{}
		}
		pools[planner.DefaultPool] = admission.UnlimitedLimits()
	}
	b.lock()
	for name, l := range pools {
		p, ok := b.pools[name]
		if !ok {
			p = &poolState{stats: admission.PoolStats{Name: name}}
			b.pools[name] = p
		}
		p.limits, p.dropped = l, false
		p.stats.Limits = l
	}
	var events []admission.Event
	for name, p := range b.pools {
		if _, ok := pools[name]; !ok {
			p.dropped = true
		}
	}
	for _, q := range b.sortedQueries() {
		p := b.pools[q.pool]
		if q.st == running || q.st == starting {
			continue
		}
		var err *admission.Error
		switch {
		case p.dropped:
			err = admission.DroppedError(q.pool)
		case p.limits.ConcurrentQueryLimit == 0:
			err = admission.DisabledError(q.pool)
		case q.st == queued:
			v := b.cluster.view(q.pool)
			if pos := v.position(q.rev, q.seq); pos >= 0 && p.limits.OverQueue(v.running(), pos) {
				err = admission.QueueFullError(q.pool, 1, v.running()+pos, p.limits)
			}
		}
		if err != nil {
			events = append(events, b.fail(q, now, err))
		}
	}
	b.forgetDropped()
	b.unlock()
	b.poke()
	return events
}

// held is the "global delayed/running" figure of a rejection: the queries
// the pool holds. Keys of other requests being rejected at the same moment
// are still in the queue when they are counted; a pool never holds more
// than C + QUEUE_SIZE (QUEUE_SIZE queued without a concurrency limit), so
// the figure is capped there and reads as on one host.
func held(running, waiting int, l admission.Limits) int {
	switch {
	case l.QueueSize == admission.Unlimited:
		return running + waiting
	case l.ConcurrentQueryLimit == admission.Unlimited:
		return running + min(waiting, l.QueueSize)
	default:
		return min(running+waiting, max(running, l.ConcurrentQueryLimit+l.QueueSize))
	}
}

// forgetDropped deletes dropped pools nothing of this node refers to; np.mu
// is held.
func (np *pipeline) forgetDropped() {
	for name, p := range np.pools {
		if !p.dropped {
			continue
		}
		used := false
		for _, q := range np.queries {
			used = used || q.pool == name
		}
		if !used {
			delete(np.pools, name)
		}
	}
}

func (np *pipeline) sortedQueries() []*query {
	out := slices.Collect(maps.Values(np.queries))
	slices.SortFunc(out, func(x, y *query) int { return int(x.id) - int(y.id) })
	return out
}

// fail ends a waiting query with err; np.mu is held.
func (np *pipeline) fail(q *query, now time.Time, err *admission.Error) admission.Event {
	p := np.pools[q.pool]
	if errors.Is(err, admission.ErrDelayDeadline) {
		p.stats.TimedOut++
	} else {
		p.stats.Failed++
	}
	np.drop(q)
	return admission.Event{ID: q.id, Pool: q.pool, QueuedFor: now.Sub(q.arrived), Err: err}
}

// drop forgets q and schedules its key for deletion; np.mu is held.
func (np *pipeline) drop(q *query) {
	if q.st == pending {
		np.pools[q.pool].pending--
	}
	if q.key != "" {
		np.deletes[q.key] = q.rev
	}
	np.forgetToken(q)
	delete(np.queries, q.id)
}

// Submit asks to run a query in pool, as admission.Controller.Submit, but
// never waits for etcd. A pool without a global limit admits at once on
// this node. A query of a pool with a global limit is left undecided (not
// started, Position 0): the pipeline registers it, batched with the
// pool's other arrivals, and its start, its refusal or its place in the
// queue (an Event with Queued) comes as an event (admission.Backend,
// "Deciding over the network"). While the node's lease is not certainly
// alive the query waits as queued at once, until the node reaches etcd
// again or its deadline passes, and then fails with ErrClusterUnreachable.
// The user's queries count towards the pool's per-user limits and fair
// order across the cluster (users.go).
func (b *Backend) Submit(pool, user string, now time.Time) (admission.QueryID, bool, error) {
	b.mu.Lock()
	p, ok := b.pools[pool]
	if !ok || p.dropped {
		b.mu.Unlock()
		return 0, false, fmt.Errorf("%w: %q", admission.ErrUnknownPool, pool)
	}
	l := p.limits
	if l.ConcurrentQueryLimit == 0 {
		p.stats.Rejected++
		b.mu.Unlock()
		return 0, false, admission.DisabledError(pool)
	}
	b.lastID++
	q := &query{id: b.lastID, pool: pool, user: user, arrived: now}
	b.queries[q.id] = q
	if !l.Global() {
		q.local, q.st = true, running
		p.local++
		p.stats.Admitted++
		b.mu.Unlock()
		return q.id, true, nil
	}
	if l.CancelAfter > 0 {
		q.deadline = now.Add(l.CancelAfter)
	} else {
		q.unreachableBy = now.Add(b.cfg.TTL)
	}
	q.st = pending
	p.pending++
	q.told = !b.session.connected(now)
	b.mu.Unlock()
	b.poke()
	return q.id, false, nil
}

// Adopt counts a query of an earlier daemon, found running at start, as
// running in pool: it registers it as an extra (it may exceed the limit;
// new queries wait until the pool is back under it).
func (b *Backend) Adopt(pool, user string, now time.Time) admission.QueryID {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.poke()
	p, ok := b.pools[pool]
	if !ok {
		p = &poolState{limits: admission.UnlimitedLimits(), dropped: true, stats: admission.PoolStats{Name: pool, Dropped: true}}
		b.pools[pool] = p
	}
	b.lastID++
	q := &query{id: b.lastID, pool: pool, user: user, arrived: now, st: running}
	b.queries[q.id] = q
	if !p.limits.Global() {
		q.local = true
		p.local++
		return q.id
	}
	if p.limits.StrictSlots && b.inheritedKey(q) {
		return q.id // it still holds the slot its earlier daemon took
	}
	q.lost = true // the pump registers it
	return q.id
}

// Leave ends a query: a running one frees its slot (which may start the
// head of the queue on any node), a queued one leaves the queue. Unknown
// ids are ignored. The key goes in the background, so the queries it lets
// start (on any node) are sent on Events.
func (b *Backend) Leave(id admission.QueryID, now time.Time) []admission.Event {
	b.mu.Lock()
	q, ok := b.queries[id]
	if !ok {
		b.mu.Unlock()
		return nil
	}
	if q.local {
		b.pools[q.pool].local--
		delete(b.queries, id)
	} else {
		b.drop(q)
	}
	b.forgetDropped()
	b.mu.Unlock()
	b.poke()
	return nil
}

// tickInterval is how often the tick loop looks for waiting queries past
// their deadline.
const tickInterval = 100 * time.Millisecond

// tickLoop fails waiting queries past their deadline, every tickInterval
// while this node has a query waiting; with none it sleeps until poked, so
// an idle node does not wake ten times a second.
func (b *Backend) tickLoop(ctx context.Context) {
	t := time.NewTicker(tickInterval)
	defer t.Stop()
	for {
		if !b.anyWaiting() {
			t.Stop()
			select {
			case <-ctx.Done():
				return
			case <-b.wake:
			}
			t.Reset(tickInterval)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			b.emit(b.Tick(now))
		}
	}
}

// anyWaiting reports whether a query of this node waits for a slot: not
// yet registered, queued, or starting (a lost session sends it back).
func (np *pipeline) anyWaiting() bool {
	np.mu.Lock()
	defer np.mu.Unlock()
	for _, q := range np.queries {
		if q.st == pending || q.st == queued || q.st == starting {
			return true
		}
	}
	return false
}

// Tick fails this node's waiting queries whose deadline is at or before
// now: QUERY_CANCEL_AFTER_SECONDS (YDB's "Delay deadline exceeded", or
// the cut-off error when etcd failed before the query was registered), or,
// for a query that could not be registered because etcd is unreachable and
// whose pool sets no deadline, one TTL after it arrived. The backend also
// ticks by itself every 100 ms and sends what it finds on Events.
func (b *Backend) Tick(now time.Time) []admission.Event {
	var events []admission.Event
	b.mu.Lock()
	connected := b.session.connected(now)
	for _, q := range b.sortedQueries() {
		if q.st != pending && q.st != queued {
			continue
		}
		switch {
		case !q.deadline.IsZero() && !now.Before(q.deadline):
			// Never registered, and etcd failed: the cause is the
			// cluster, not the queue.
			if q.st == pending && (!connected || b.session.failing()) {
				events = append(events, b.fail(q, now, b.cutOffError(q.pool)))
			} else {
				events = append(events, b.fail(q, now, admission.DeadlineError(q.pool)))
			}
		case q.st == pending && !q.unreachableBy.IsZero() && !now.Before(q.unreachableBy):
			events = append(events, b.fail(q, now, b.cutOffError(q.pool)))
		}
	}
	retry := false
	for _, q := range b.queries {
		retry = retry || (q.st == pending && q.token == "" && connected)
	}
	b.mu.Unlock()
	if len(events) > 0 || retry {
		b.poke()
	}
	return events
}

func (b *Backend) cutOffError(pool string) *admission.Error {
	return admission.NewError(pool, fmt.Sprintf(
		"Resource pool %s has a cluster-wide limit and node %s cannot reach the cluster's etcd (%s); "+
			"the query was not admitted, running queries go on; it is admitted again once etcd answers",
		pool, b.cfg.Node, strings.Join(b.cfg.Endpoints, ",")), ErrClusterUnreachable)
}
