package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/poolagent/poolagent/admission"
	"github.com/poolagent/poolagent/planner"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	b.mu.Lock()
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
			v := b.view(q.pool)
			if pos := v.position(q.rev); pos >= 0 && overQueue(v.running(), pos, p.limits) {
				err = admission.QueueFullError(q.pool, 1, v.running()+pos, p.limits)
			}
		}
		if err != nil {
			events = append(events, b.fail(q, now, err))
		}
	}
	b.forgetDropped()
	b.mu.Unlock()
	b.poke()
	return events
}

// overQueue is YDB's rule (admission's): one more arriving query is one too
// many when running + queued + 1 − C > QUEUE_SIZE.
func overQueue(running, queued int, l admission.Limits) bool {
	switch {
	case l.QueueSize == admission.Unlimited:
		return false
	case l.ConcurrentQueryLimit == admission.Unlimited:
		return queued+1 > l.QueueSize
	default:
		return running+queued+1-l.ConcurrentQueryLimit > l.QueueSize
	}
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

// forgetDropped deletes dropped pools nothing of this node refers to; b.mu
// is held.
func (b *Backend) forgetDropped() {
	for name, p := range b.pools {
		if !p.dropped {
			continue
		}
		used := false
		for _, q := range b.queries {
			used = used || q.pool == name
		}
		if !used {
			delete(b.pools, name)
		}
	}
}

func (b *Backend) sortedQueries() []*query {
	out := slices.Collect(maps.Values(b.queries))
	slices.SortFunc(out, func(x, y *query) int { return int(x.id) - int(y.id) })
	return out
}

// fail ends a waiting query with err; b.mu is held.
func (b *Backend) fail(q *query, now time.Time, err *admission.Error) admission.Event {
	p := b.pools[q.pool]
	if errors.Is(err, admission.ErrDelayDeadline) {
		p.stats.TimedOut++
	} else {
		p.stats.Failed++
	}
	b.drop(q)
	return admission.Event{ID: q.id, Pool: q.pool, QueuedFor: now.Sub(q.arrived), Err: err}
}

// drop forgets q and schedules its key for deletion; b.mu is held.
func (b *Backend) drop(q *query) {
	if q.st == pending {
		b.pools[q.pool].pending--
	}
	if q.key != "" {
		b.deletes[q.key] = q.rev
	}
	b.forgetToken(q)
	delete(b.queries, q.id)
}

// Submit asks to run a query in pool, as admission.Controller.Submit: it
// returns the query's id and whether it started at once; a query that did
// not start waits until an event names it. A pool with a global limit
// needs one or two etcd round trips; when etcd does not answer, the query
// waits (as queued) until the node reaches etcd again or its deadline
// passes, and then fails with ErrClusterUnreachable. A pool without a
// global limit admits at once on this node without etcd. While the last
// etcd request failed, Submit does not wait for etcd at all: the query
// waits as queued and the backend registers it in the background.
//
// Per-user limits and the fair order are not kept across the cluster:
// the user is not used, and the pool's queue is FIFO (docs/fleet.md).
func (b *Backend) Submit(pool, _ string, now time.Time) (admission.QueryID, bool, error) {
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
	q := &query{id: b.lastID, pool: pool, arrived: now}
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
	wait := b.lease != 0 && b.health.LastError == ""
	b.mu.Unlock()
	if !wait {
		b.poke()
		return q.id, false, nil
	}
	started, err := b.register(q)
	if err != nil {
		return 0, false, err
	}
	return q.id, started, nil
}

// Charge implements admission.Backend: the cluster keeps no per-user
// usage, so it records nothing.
func (b *Backend) Charge(admission.QueryID, time.Duration, time.Time) {}

// Adopt counts a query of an earlier daemon, found running at start, as
// running in pool: it registers it as an extra (it may exceed the limit;
// new queries wait until the pool is back under it).
func (b *Backend) Adopt(pool string, now time.Time) admission.QueryID {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.pools[pool]
	if !ok {
		p = &poolState{limits: admission.UnlimitedLimits(), dropped: true, stats: admission.PoolStats{Name: pool, Dropped: true}}
		b.pools[pool] = p
	}
	b.lastID++
	q := &query{id: b.lastID, pool: pool, arrived: now, st: running}
	b.queries[q.id] = q
	if !p.limits.Global() {
		q.local = true
		p.local++
		return q.id
	}
	q.lost = true
	if b.lease != 0 {
		q.token = b.newToken()
		b.tokens[q.token] = q
		q.key = b.keys.extra(pool, q.token)
		e := entry{Node: b.cfg.Node, Token: q.token, ArrivedUnixMilli: q.arrived.UnixMilli()}
		lease := b.lease
		b.wg.Go(func() {
			ctx, cancel := b.request()
			defer cancel()
			if _, err := b.cli.Put(ctx, q.key, e.value(), clientv3.WithLease(lease)); err == nil {
				b.mu.Lock()
				q.lost = false
				b.mu.Unlock()
			}
		})
	}
	return q.id
}

// attempt is a start the pump or Submit tries: one transaction.
type attempt struct {
	q        *query
	token    string
	runKey   string // the slot or extra key it puts
	rev      int64  // the run key's create revision, once it started
	claimed  bool   // runKey is a slot in b.claims
	cmps     []clientv3.Cmp
	ops      []clientv3.Op
	reserved bool
}

// register puts a pending query into the cluster: straight into a slot
// when the pool's queue is empty and a slot looks free, else into the
// queue, reading in the same transaction the figures that decide whether
// it may wait; a query first in the queue then tries its start at once.
// It reports whether the query started.
func (b *Backend) register(q *query) (bool, error) {
	b.mu.Lock()
	if q.st != pending || b.lease == 0 {
		b.mu.Unlock()
		return false, nil
	}
	p := b.pools[q.pool]
	l := p.limits
	lease := b.lease
	q.token = b.newToken()
	b.tokens[q.token] = q
	token := q.token
	e := entry{Node: b.cfg.Node, Token: token, ArrivedUnixMilli: q.arrived.UnixMilli()}
	qkey := b.keys.queued(q.pool, token)
	v := b.view(q.pool)
	var a *attempt
	if len(v.queue) == 0 {
		a = b.startAttempt(q, v.slots, v.running(), b.rev, 0, true, lease, e)
	}
	b.mu.Unlock()

	queue := []clientv3.Op{
		clientv3.OpPut(qkey, e.value(), clientv3.WithLease(lease)),
		clientv3.OpGet(b.keys.slots(q.pool), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(b.keys.extras(q.pool), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(b.keys.queue(q.pool), clientv3.WithPrefix(), clientv3.WithCountOnly()),
	}
	ctx, cancel := b.request()
	start := time.Now()
	var resp *clientv3.TxnResponse
	var err error
	if a != nil {
		cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(b.keys.queue(q.pool)).WithPrefix(), "=", 0)}, a.cmps...)
		resp, err = b.cli.Txn(ctx).If(cmps...).Then(a.ops...).Else(queue...).Commit()
	} else {
		resp, err = b.cli.Txn(ctx).Then(queue...).Commit()
	}
	cancel()
	b.note(start, err)
	if err != nil {
		// The request may still be carried out: its key then carries a
		// token no longer live, and is deleted as an orphan.
		b.mu.Lock()
		if a != nil {
			b.release(a)
		}
		if q.st == pending && q.token == token {
			b.forgetToken(q)
		}
		b.mu.Unlock()
		b.log.Debug("register query", "pool", q.pool, "err", err)
		return false, nil
	}
	now := time.Now()
	b.mu.Lock()
	if q.token != token {
		// Failed meanwhile (deadline): its keys are orphans now.
		if resp.Succeeded && a != nil {
			b.deletes[a.runKey] = resp.Header.Revision
		} else {
			b.deletes[qkey] = resp.Header.Revision
		}
		b.mu.Unlock()
		return false, nil
	}
	p.pending--
	if a != nil && resp.Succeeded {
		a.rev = resp.Header.Revision
		b.started(q, a, now)
		b.mu.Unlock()
		return true, nil
	}
	if a != nil {
		b.release(a)
	}
	r := resp.Responses
	slotKVs := r[1].GetResponseRange().Kvs
	running := len(slotKVs) + int(r[2].GetResponseRange().Count)
	waiting := int(r[3].GetResponseRange().Count) - 1
	if overQueue(running, waiting, l) {
		p.stats.Rejected++
		n := p.pending + 1 // the requests of this node not registered, and this one
		q.st, q.key = queued, qkey
		b.drop(q)
		b.mu.Unlock()
		return false, admission.QueueFullError(q.pool, n, held(running, waiting, l), l)
	}
	q.st, q.key, q.rev = queued, qkey, resp.Header.Revision
	// At position waiting in the queue: start now if the transaction's
	// own reading lets it (waiting < the free slots, so every query ahead
	// of it may start too, each in the slot before its own), rather than
	// wait for the watch to show the key and the pump to start it.
	slots := map[string]entry{}
	for _, kv := range slotKVs {
		slots[string(kv.Key)] = entry{}
	}
	a = b.startAttempt(q, slots, running, resp.Header.Revision, waiting, false, lease, e)
	if a == nil {
		b.mu.Unlock()
		return false, nil
	}
	b.queuedAttempt(a)
	b.mu.Unlock()
	ok := b.try(a)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.settle(a, ok, time.Now()), nil
}

// queuedAttempt makes a the start of the queued query a.q: its queue key
// must still be there, and goes. b.mu is held.
func (b *Backend) queuedAttempt(a *attempt) {
	q := a.q
	a.cmps = append(a.cmps, clientv3.Compare(clientv3.CreateRevision(q.key), "=", q.rev))
	a.ops = append([]clientv3.Op{clientv3.OpDelete(q.key)}, a.ops...)
	q.st = starting
}

// try runs a's transaction and reports whether it started the query;
// a.rev is then the revision it ran at, its run key's create revision.
// b.mu is not held, and a is not shared until try returns.
func (b *Backend) try(a *attempt) bool {
	ctx, cancel := b.request()
	defer cancel()
	start := time.Now()
	resp, err := b.cli.Txn(ctx).If(a.cmps...).Then(a.ops...).Commit()
	b.note(start, err)
	if err != nil || !resp.Succeeded {
		return false
	}
	a.rev = resp.Header.Revision
	return true
}

// settle records the outcome of a queued query's start; b.mu is held. It
// reports whether the query is now running.
func (b *Backend) settle(a *attempt, ok bool, now time.Time) bool {
	q := a.q
	if q.token != a.token || q.st != starting {
		// Failed (deadline) or lost meanwhile.
		if ok {
			b.deletes[a.runKey] = a.rev
		}
		b.release(a)
		return false
	}
	if !ok {
		q.st = queued
		b.release(a)
		return false
	}
	b.started(q, a, now)
	return true
}

// startAttempt builds the transaction that starts q, the query at
// position pos of the pool's queue, if the cluster as seen at revision rev
// (slots taken, running queries) lets it start: the pos-th free slot, or
// an extra key in a pool without a concurrency limit; CPU-load admission
// reserves its share. nil when it may not start. b.mu is held.
func (b *Backend) startAttempt(q *query, slots map[string]entry, running int, rev int64, pos int, arriving bool, lease clientv3.LeaseID, e entry) *attempt {
	l := b.pools[q.pool].limits
	a := &attempt{q: q, token: q.token}
	if l.ConcurrentQueryLimit != admission.Unlimited {
		if pos >= l.ConcurrentQueryLimit-running {
			return nil
		}
		var free []string
		for i := range l.ConcurrentQueryLimit {
			if k := b.keys.slot(q.pool, i); !hasKey(slots, k) {
				free = append(free, k)
			}
		}
		// A queued query takes the pos-th free slot, as every node counts
		// them, so that the queries ahead of it on other nodes do not
		// race it for the same one; an arriving query, any free slot from
		// this node's own offset. Either skips the slots this node's
		// other attempts have claimed.
		if !arriving && pos < len(free) && !hasKey(b.claims, free[pos]) {
			a.runKey = free[pos]
		}
		for j := 0; a.runKey == "" && j < len(free); j++ {
			if k := free[(b.offset+j)%len(free)]; !hasKey(b.claims, k) {
				a.runKey = k
			}
		}
		if a.runKey == "" {
			return nil
		}
		b.claims[a.runKey] = struct{}{}
		a.claimed = true
		a.cmps = []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(a.runKey), "=", 0),
			// No extra registered since rev: the count of running
			// queries is at most the one read at rev.
			clientv3.Compare(clientv3.ModRevision(b.keys.extras(q.pool)).WithPrefix(), "<", rev+1),
		}
	} else {
		a.runKey = b.keys.extra(q.pool, q.token)
	}
	a.ops = []clientv3.Op{clientv3.OpPut(a.runKey, e.value(), clientv3.WithLease(lease))}
	if l.LoadCPUThresholdPercent > 0 {
		if pos != 0 || !b.loadAdmits(l.LoadCPUThresholdPercent) {
			return nil
		}
		b.load.Reserve()
		a.reserved = true
	}
	return a
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// release ends a's claims: its slot and its share of the node's CPU.
func (b *Backend) release(a *attempt) {
	if a.claimed {
		delete(b.claims, a.runKey)
		a.claimed = false
	}
	if a.reserved {
		b.load.Unreserve()
		a.reserved = false
	}
}

// started marks q running under attempt a; b.mu is held. The view holds
// its key at once, before the watch shows it, so that this node's next
// attempts count it.
func (b *Backend) started(q *query, a *attempt, now time.Time) {
	b.release(a)
	q.st = running
	q.key, q.rev = a.runKey, a.rev
	e := entry{Node: b.cfg.Node, Token: q.token, ArrivedUnixMilli: q.arrived.UnixMilli(), key: a.runKey, rev: a.rev, lease: int64(b.lease)}
	if dir, _ := b.keys.parse(a.runKey); dir == slotDir {
		b.view(q.pool).slots[a.runKey] = e
	} else {
		b.view(q.pool).extras[a.runKey] = e
	}
	p := b.pools[q.pool]
	p.stats.Admitted++
	p.stats.QueueWait += now.Sub(q.arrived)
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

// pumpLoop carries out what the views allow: deletes the keys of ended
// queries and orphans, registers pending queries, starts queued ones.
func (b *Backend) pumpLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		}
		b.pump()
	}
}

func (b *Backend) pump() {
	b.publishRecord()
	b.deleteKeys()
	b.mu.Lock()
	var pend []*query
	for _, q := range b.sortedQueries() {
		if q.st == pending && q.token == "" && b.lease != 0 {
			pend = append(pend, q)
		}
	}
	b.mu.Unlock()
	for _, q := range pend {
		started, err := b.register(q)
		b.mu.Lock()
		var ev []admission.Event
		if err != nil {
			ev = append(ev, admission.Event{ID: q.id, Pool: q.pool, QueuedFor: time.Since(q.arrived), Err: err})
		} else if started {
			ev = append(ev, admission.Event{ID: q.id, Pool: q.pool, QueuedFor: time.Since(q.arrived)})
		}
		b.mu.Unlock()
		b.emit(ev)
	}
	b.startQueued()
}

// deleteKeys deletes the keys of ended queries and orphans, in one
// transaction per 64. A key known by its create revision goes only if it
// is still that key: a slot key another node has taken since (the watch
// may show this node's own put after the query left) stays.
func (b *Backend) deleteKeys() {
	b.mu.Lock()
	keys := slices.Sorted(maps.Keys(b.deletes))
	revs := maps.Clone(b.deletes)
	b.mu.Unlock()
	for len(keys) > 0 {
		n := min(len(keys), 64)
		var ops []clientv3.Op
		for _, k := range keys[:n] {
			if revs[k] == 0 {
				ops = append(ops, clientv3.OpDelete(k))
				continue
			}
			ops = append(ops, clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", revs[k])},
				[]clientv3.Op{clientv3.OpDelete(k)}, nil))
		}
		ctx, cancel := b.request()
		start := time.Now()
		_, err := b.cli.Txn(ctx).Then(ops...).Commit()
		cancel()
		b.note(start, err)
		if err != nil {
			return // kept for the next pump; the lease expiry removes them at worst
		}
		b.mu.Lock()
		for _, k := range keys[:n] {
			if b.deletes[k] == revs[k] {
				delete(b.deletes, k)
			}
		}
		b.mu.Unlock()
		keys = keys[n:]
	}
}

// startQueued tries to start every queued query of this node the views
// allow to start: at position p of its pool's queue when p < the free
// slots (all ahead of it may start too, so FIFO holds); with a CPU-load
// threshold only the head, once the load allows. The transactions run at
// once; each is guarded so that none over-admits, and one that loses a
// race waits for the watch to show why.
func (b *Backend) startQueued() {
	b.mu.Lock()
	var as []*attempt
	if b.lease != 0 {
		for _, q := range b.sortedQueries() {
			if q.st != queued {
				continue
			}
			v := b.view(q.pool)
			pos := v.position(q.rev)
			if pos < 0 {
				continue
			}
			e := entry{Node: b.cfg.Node, Token: q.token, ArrivedUnixMilli: q.arrived.UnixMilli()}
			if a := b.startAttempt(q, v.slots, v.running(), b.rev, pos, false, b.lease, e); a != nil {
				b.queuedAttempt(a)
				as = append(as, a)
			}
		}
	}
	b.mu.Unlock()
	if len(as) == 0 {
		return
	}
	var wg sync.WaitGroup
	results := make([]bool, len(as))
	for i, a := range as {
		wg.Go(func() { results[i] = b.try(a) })
	}
	wg.Wait()
	now := time.Now()
	var events []admission.Event
	b.mu.Lock()
	for i, a := range as {
		if b.settle(a, results[i], now) {
			events = append(events, admission.Event{ID: a.q.id, Pool: a.q.pool, QueuedFor: now.Sub(a.q.arrived)})
		}
	}
	b.mu.Unlock()
	b.emit(events)
}

// tickLoop fails waiting queries past their deadline, every 100 ms.
func (b *Backend) tickLoop(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			b.emit(b.Tick(now))
		}
	}
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
	for _, q := range b.sortedQueries() {
		if q.st != pending && q.st != queued {
			continue
		}
		switch {
		case !q.deadline.IsZero() && !now.Before(q.deadline):
			// Never registered, and etcd failed: the cause is the
			// cluster, not the queue.
			if q.st == pending && (b.lease == 0 || b.health.LastError != "") {
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
		retry = retry || (q.st == pending && q.token == "" && b.lease != 0)
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
