package fleet

import (
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// attempt is the start of one query: its part of a start transaction.
type attempt struct {
	q        *query
	token    string
	runKey   string           // the slot or extra key it puts
	lease    clientv3.LeaseID // the session's when it was made
	claimed  bool             // runKey is a slot in b.claims
	cmps     []clientv3.Cmp
	ops      []clientv3.Op
	reserved bool
	// reused is the create revision of runKey when the attempt takes over
	// the slot key of a query of this node that ended, not yet deleted
	// (lingering); 0 when it puts a new key.
	reused int64
}

// createRev is the create revision of a's run key once a's transaction
// succeeded at revision rev.
func (a *attempt) createRev(rev int64) int64 {
	if a.reused != 0 {
		return a.reused
	}
	return rev
}

// startAttempt builds the part of a transaction that starts q, the query
// at position pos of the pool's queue, if the cluster as seen at revision
// rev (slots taken, running queries) lets it start: the pos-th free slot,
// or an extra key in a pool without a concurrency limit; CPU-load
// admission reserves its share. nil when it may not start. np.mu and the
// cluster's lock are held.
func (np *pipeline) startAttempt(q *query, slots map[string]entry, running int, rev int64, pos int, arriving bool, lease clientv3.LeaseID) *attempt {
	l := np.pools[q.pool].limits
	a := &attempt{q: q, token: q.token, lease: lease}
	if l.ConcurrentQueryLimit != admission.Unlimited {
		if pos >= l.ConcurrentQueryLimit-running {
			return nil
		}
		if arriving {
			a.runKey, a.reused = np.lingeringSlot(q.pool)
		}
		if a.runKey == "" {
			a.runKey = np.freeSlot(q.pool, l.ConcurrentQueryLimit, slots, pos, arriving)
		}
		if a.runKey == "" {
			return nil
		}
		np.claims[a.runKey] = struct{}{}
		a.claimed = true
		if a.reused != 0 {
			delete(np.deletes, a.runKey) // unless the attempt fails (release)
		}
		a.cmps = []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(a.runKey), "=", a.reused),
			// No extra registered since rev: the count of running
			// queries is at most the one read at rev.
			clientv3.Compare(clientv3.ModRevision(np.keys.extras(q.pool)).WithPrefix(), "<", rev+1),
		}
	} else {
		a.runKey = np.keys.extra(q.pool, q.token)
	}
	if arriving && l.Users.Running > 0 {
		// An arrival starts without a place in the start order: no query
		// started since rev, so its user's running count is the one the
		// view read (CONCURRENT_QUERY_LIMIT_PER_USER holds).
		a.cmps = append(a.cmps,
			clientv3.Compare(clientv3.ModRevision(np.keys.slots(q.pool)).WithPrefix(), "<", rev+1),
			clientv3.Compare(clientv3.ModRevision(np.keys.extras(q.pool)).WithPrefix(), "<", rev+1))
	}
	a.ops = []clientv3.Op{clientv3.OpPut(a.runKey, np.entryOf(q).value(), np.runLease(q.pool, lease)...)}
	if l.LoadCPUThresholdPercent > 0 {
		if pos != 0 || !np.loadAdmits(l.LoadCPUThresholdPercent) {
			np.release(a)
			return nil
		}
		np.load.Reserve()
		a.reserved = true
	}
	return a
}

// runLease is the lease of a running query's key: the session's, but
// none in a pool with strict slots, whose keys stay when the node's lease
// expires (docs/fleet.md, "Strict slots"); np.mu is held.
func (np *pipeline) runLease(pool string, lease clientv3.LeaseID) []clientv3.OpOption {
	if p, ok := np.pools[pool]; ok && p.limits.StrictSlots {
		return nil
	}
	return []clientv3.OpOption{clientv3.WithLease(lease)}
}

// freeSlot picks the slot key a query at position pos of pool's queue (or
// arriving) takes among the c slots, as the view's slots show them; ""
// when none is free. A queued query takes the pos-th free slot, as every
// node counts them, so that the queries ahead of it on other nodes do not
// race it for the same one; an arriving query, the first free slot from
// this node's own offset. Either skips the slots this node's other
// attempts have claimed and the keys it is deleting. It looks at the slots
// one by one from where it starts, not at all c of them. np.mu and the
// cluster's lock are held.
func (np *pipeline) freeSlot(pool string, c int, slots map[string]entry, pos int, arriving bool) string {
	usable := func(k string) bool { return !hasKey(slots, k) && !hasKey(np.claims, k) && !hasKey(np.deletes, k) }
	if !arriving {
		seen := 0
		for i := range c {
			k := np.keys.slot(pool, i)
			if hasKey(slots, k) {
				continue
			}
			if seen == pos {
				if usable(k) {
					return k
				}
				break
			}
			seen++
		}
	}
	for j := range c {
		if k := np.keys.slot(pool, (np.offset+j)%c); usable(k) {
			return k
		}
	}
	return ""
}

// lingeringSlot is a slot key of pool that a query of this node held and
// that waits to be deleted (deleteLinger), with its create revision, for
// an arrival to take over: one write instead of a delete and a put, and
// one key event instead of two. "" when there is none. np.mu and the
// cluster's lock are held.
func (np *pipeline) lingeringSlot(pool string) (string, int64) {
	best, rev := "", int64(0)
	for k, r := range np.deletes {
		if dir, p := np.keys.parse(k); dir != slotDir || p != pool || r == 0 || hasKey(np.claims, k) || hasKey(np.deletingKeys, k) {
			continue
		}
		if e, ok := np.cluster.view(pool).slots[k]; !ok || e.Node != np.node || e.rev != r {
			continue
		}
		if best == "" || k < best {
			best, rev = k, r
		}
	}
	return best, rev
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// queuedAttempt makes a the start of the queued query a.q: its queue key
// must still be there, and goes. np.mu is held.
func (np *pipeline) queuedAttempt(a *attempt) {
	q := a.q
	a.cmps = append(a.cmps, clientv3.Compare(clientv3.CreateRevision(q.key), "=", q.rev))
	a.ops = append([]clientv3.Op{clientv3.OpDelete(q.key)}, a.ops...)
	q.st = starting
}

// startableLocked returns the start attempts of every queued query of this
// node the views allow to start: at place p of its pool's start order
// (startOrder: the queue's under FIFO) when p < the free slots (all before
// it may start too, so the order holds); with a CPU-load threshold only
// the first, once the load allows. np.mu and the cluster's lock are held
// and the node is connected on lease.
func (np *pipeline) startableLocked(lease clientv3.LeaseID) []*attempt {
	var as []*attempt
	now := time.Now()
	orders := map[string]map[string]int{}
	for _, q := range np.sortedQueries() {
		if q.st != queued {
			continue
		}
		v := np.cluster.view(q.pool)
		if v.position(q.rev, q.seq) < 0 {
			continue
		}
		order, ok := orders[q.pool]
		if !ok {
			order = startOrder(v, np.pools[q.pool].limits.Users, now)
			orders[q.pool] = order
		}
		pos, ok := order[q.token]
		if !ok {
			continue
		}
		if a := np.startAttempt(q, v.slots, v.running(), np.cluster.rev, pos, false, lease); a != nil {
			np.queuedAttempt(a)
			as = append(as, a)
		}
	}
	return as
}

// start runs start attempts, each a nested transaction of one transaction
// (64 to a transaction), and returns the events of the queries that
// started; b.mu is not held. A lost race changes nothing: the watch shows
// why, and the query is tried again.
func (b *Backend) start(as []*attempt) []admission.Event {
	var events []admission.Event
	for len(as) > 0 {
		n := min(len(as), 64)
		ops := make([]clientv3.Op, n)
		for i, a := range as[:n] {
			ops[i] = clientv3.OpTxn(a.cmps, a.ops, nil)
		}
		ctx, cancel := b.request()
		start := time.Now()
		resp, err := b.cli.Txn(ctx).Then(ops...).Commit()
		cancel()
		b.session.note(start, err)
		var revs []int64 // each start's revision, 0 when it did not start
		if err == nil {
			revs = make([]int64, n)
			for i := range n {
				if resp.Responses[i].GetResponseTxn().Succeeded {
					revs[i] = resp.Header.Revision
				}
			}
		} else {
			revs = b.startedAfterAll(as[:n])
		}
		now := time.Now()
		b.lock()
		for i, a := range as[:n] {
			ok := revs != nil && revs[i] != 0
			var rev int64
			if ok {
				rev = revs[i]
			}
			if b.settle(a, ok, rev, now) {
				events = append(events, admission.Event{ID: a.q.id, Pool: a.q.pool, QueuedFor: now.Sub(a.q.arrived)})
			} else if a.q.st == queued {
				events = b.tellQueued(a.q, events)
			}
		}
		b.unlock()
		as = as[n:]
	}
	return events
}

// startedAfterAll finds out, for start transactions whose outcome etcd
// did not tell (a timeout, a connection lost after the request left: etcd
// may have applied it, as after a quorum comes back), which took place: a
// start took place when its run key holds its token. It reads until etcd
// answers and returns each one's revision, 0 when it did not start; nil
// when the backend closed first. Taking the transactions for failed would
// leave a query queued whose queue key is gone, waiting for ever, beside
// its own slot key.
func (b *Backend) startedAfterAll(as []*attempt) []int64 {
	gets := make([]clientv3.Op, len(as))
	for i, a := range as {
		gets[i] = clientv3.OpGet(a.runKey)
	}
	for {
		ctx, cancel := b.request()
		start := time.Now()
		resp, err := b.cli.Txn(ctx).Then(gets...).Commit()
		cancel()
		b.session.note(start, err)
		if err == nil {
			revs := make([]int64, len(as))
			for i, a := range as {
				for _, kv := range resp.Responses[i].GetResponseRange().Kvs {
					dir, pool := b.keys.parse(a.runKey)
					e, err := decodeEntry(dir, b.keys.name(a.runKey, dir, pool), kv.Value)
					if err == nil && e.Token == a.token {
						revs[i] = kv.ModRevision
					}
				}
			}
			return revs
		}
		select {
		case <-b.ctx.Done():
			return nil
		case <-time.After(renewInterval(b.cfg.TTL)):
		}
	}
}

// settle records the outcome of a queued query's start (rev: the revision
// it ran at, its run key's create revision); np.mu and the cluster's lock
// are held. It reports whether the query is now running.
func (np *pipeline) settle(a *attempt, ok bool, rev int64, now time.Time) bool {
	q := a.q
	if q.token != a.token || q.st != starting {
		// Failed (deadline) or lost meanwhile.
		if ok {
			np.deletes[a.runKey] = rev
		}
		np.release(a)
		return false
	}
	if !ok {
		q.st = queued
		np.release(a)
		return false
	}
	q.rev = rev
	np.started(q, a, now)
	return true
}

// release ends a's claims: its slot and its share of the node's CPU.
func (np *pipeline) release(a *attempt) {
	if a.reused != 0 {
		np.deletes[a.runKey] = a.reused // still to delete
		a.reused = 0
	}
	if a.claimed {
		delete(np.claims, a.runKey)
		a.claimed = false
	}
	if a.reserved {
		np.load.Unreserve()
		a.reserved = false
	}
}

// started marks q running under attempt a, whose key was created at
// revision rev; np.mu and the cluster's lock are held. The view holds its
// key at once, before the watch shows it, so that this node's next
// attempts count it.
func (np *pipeline) started(q *query, a *attempt, now time.Time) {
	rev := q.rev
	a.reused = 0       // its key is q's now
	a.reserved = false // its share of the node's CPU stays reserved until the next refresh
	np.release(a)
	q.st = running
	q.key = a.runKey
	e := np.entryOf(q)
	// a's lease is the session's still: a lost session fails the
	// attempts made on it (lostSession forgets their tokens).
	e.key, e.rev, e.lease = a.runKey, rev, int64(a.lease)
	if dir, _ := np.keys.parse(a.runKey); dir == slotDir {
		np.cluster.view(q.pool).slots[a.runKey] = e
	} else {
		np.cluster.view(q.pool).extras[a.runKey] = e
	}
	p := np.pools[q.pool]
	p.stats.Admitted++
	p.stats.QueueWait += now.Sub(q.arrived)
}
