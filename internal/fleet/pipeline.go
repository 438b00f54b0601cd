package fleet

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The pipeline: everything the node asks of etcd runs in the background,
// never under b.mu and never in a call of the daemon, so that a pool
// without a global limit admits in microseconds whatever etcd does. Each
// pump starts what can start:
//
//   - per pool, one registration transaction at a time, carrying every
//     query of the pool that arrived on this node since the last one
//     (arrivals batch while a transaction is in flight), up to maxBatch;
//   - one transaction starting every queued query of this node the views
//     allow to start, each in a nested transaction of its own;
//   - one transaction deleting the keys of ended queries;
//   - the node record after a load refresh, and the registration of
//     running queries without a key.
//
// Many transactions are in flight at once (one per pool registering, the
// starts, the deletes); etcd orders them, and every one is guarded by
// compares, so none over-admits.

// maxBatch bounds the queries of one registration transaction: k puts and
// 3 reads, within etcd's default of 128 operations per transaction.
const maxBatch = 64

// pumpLoop runs the pump each time something may have become possible.
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

// pump starts what the views allow (see above); b.mu is not held.
func (b *Backend) pump() {
	now := time.Now()
	b.lock()
	var work []func()
	// Nothing is decided on views not yet read (a start while etcd was
	// unreachable).
	lease, connected := b.session.current(now)
	live := connected && b.cluster.rev != 0
	b.releaseInheritedLocked(now)
	if live && b.publish && !b.publishing {
		b.publish, b.publishing = false, true
		work = append(work, b.publishRecord)
	}
	if live && len(b.charges) > 0 && !b.charging {
		b.charging = true
		work = append(work, b.writeCharges)
	}
	if live && !b.reregistering && b.anyLostLocked() {
		b.reregistering = true
		work = append(work, func() {
			b.reregister()
			b.mu.Lock()
			b.reregistering = false
			b.mu.Unlock()
		})
	}
	if live {
		for _, r := range b.registrationsLocked(lease) {
			work = append(work, func() { b.emit(b.register(r)) })
		}
		if as := b.startableLocked(lease); len(as) > 0 {
			work = append(work, func() { b.emit(b.start(as)) })
		}
	}
	if len(b.deletes) > 0 && !b.deleting && lease != 0 && b.deletesDueLocked(now) {
		b.deleting = true
		work = append(work, b.deleteKeys)
	}
	b.unlock()
	for _, w := range work {
		b.wg.Go(w)
	}
}

func (b *Backend) anyLostLocked() bool {
	for _, q := range b.queries {
		if q.st == running && q.lost && q.token == "" {
			return true
		}
	}
	return false
}

// registration is one pool's batch of arrivals, put into the cluster in
// one transaction: when the pool's queue is empty and the slots its view
// shows free are still free (compared on their create revision, and no
// extra registered since the view's revision), the first len(runs) take
// them and start; every other one, or all when the compares fail, puts
// its queue key. The same transaction reads, after its puts, the slots
// taken, the extras and the queue's length: the figures that decide
// whether each queued one may wait.
type registration struct {
	pool   string
	lease  clientv3.LeaseID
	qs     []*query // in arrival order
	tokens []string
	qkeys  []string
	runs   []*attempt // for qs[:len(runs)]
	// dels are keys of this node to delete (b.deletes) that go with the
	// registration, by their create revision (see deleteOps).
	dels map[string]int64
}

// registrationsLocked makes the registration of every pool with arrivals
// and none in flight, on lease; b.mu is held and the node is connected.
func (b *Backend) registrationsLocked(lease clientv3.LeaseID) []*registration {
	var regs []*registration
	byPool := map[string]*registration{}
	for _, q := range b.sortedQueries() {
		if q.st != pending || q.token != "" {
			continue
		}
		p := b.pools[q.pool]
		if p.registering {
			continue
		}
		r := byPool[q.pool]
		if r == nil {
			r = &registration{pool: q.pool, lease: lease}
			byPool[q.pool] = r
			regs = append(regs, r)
		}
		if len(r.qs) == maxBatch {
			continue
		}
		q.token = b.newToken(lease)
		q.seq = b.seq
		b.tokens[q.token] = q
		r.qs = append(r.qs, q)
		r.tokens = append(r.tokens, q.token)
		r.qkeys = append(r.qkeys, b.keys.queued(q.pool, q.token))
	}
	for _, r := range regs {
		b.pools[r.pool].registering = true
		v := b.cluster.view(r.pool)
		if len(v.queue) > 0 {
			continue
		}
		perUser := b.pools[r.pool].limits.Users.Running
		running := map[string]int{}
		if perUser > 0 {
			for user, c := range userCounts(v) {
				running[user] = c[0]
			}
		}
		for i, q := range r.qs {
			if perUser > 0 && running[q.user] >= perUser {
				break // its user waits: it and the rest queue
			}
			a := b.startAttempt(q, v.slots, v.running(), b.cluster.rev, i, true, r.lease)
			if a == nil {
				break
			}
			running[q.user]++
			r.runs = append(r.runs, a)
		}
	}
	if len(regs) > 0 && len(b.deletes) > 0 && !b.deleting {
		// The keys of ended queries not taken over go with the first
		// registration.
		b.deleting = true
		regs[0].dels = b.takeDeletesLocked(maxBatchDeletes)
	}
	return regs
}

// register runs registration r and returns the events it decides; b.mu
// is not held.
func (b *Backend) register(r *registration) []admission.Event {
	resp, err := b.registerTxn(r)
	now := time.Now()
	b.lock()
	defer b.poke()
	defer b.unlock()
	b.pools[r.pool].registering = false
	if r.dels != nil {
		b.deleting = false
		b.deletedLocked(r.dels, err == nil)
	}
	started := 0
	if err == nil && resp.Succeeded && len(r.runs) > 0 {
		started = len(r.runs)
	}
	var live []int // indexes of the queries still waiting for this registration
	for i, q := range r.qs {
		if q.st == pending && q.token == r.tokens[i] {
			live = append(live, i)
			continue
		}
		// Failed or left meanwhile: its key, if the transaction put it, is
		// an orphan.
		if err == nil {
			if i < started {
				b.deletes[r.runs[i].runKey] = r.runs[i].createRev(resp.Header.Revision)
			} else {
				b.deletes[r.qkeys[i]] = resp.Header.Revision
			}
		}
	}
	if err != nil {
		// The transaction may still be carried out: its keys then carry
		// tokens no longer live, and are deleted as orphans. The queries
		// are tried again at the next pump; the daemon is told they wait.
		var events []admission.Event
		for _, a := range r.runs {
			b.release(a)
		}
		for _, i := range live {
			q := r.qs[i]
			b.forgetToken(q)
			events = b.tellQueued(q, events)
		}
		b.log.Debug("register queries", "pool", r.pool, "queries", len(r.qs), "err", err)
		return events
	}
	for i := started; i < len(r.runs); i++ {
		b.release(r.runs[i])
	}
	return b.registered(r, resp, started, live, now)
}

// registerTxn is the transaction of registration r (see registration).
func (b *Backend) registerTxn(r *registration) (*clientv3.TxnResponse, error) {
	reads := []clientv3.Op{
		clientv3.OpGet(b.keys.slots(r.pool), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(b.keys.extras(r.pool), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(b.keys.queue(r.pool), clientv3.WithPrefix(), clientv3.WithCountOnly()),
	}
	queue := func(from int) []clientv3.Op {
		ops := deleteOps(r.dels)
		for i := from; i < len(r.qs); i++ {
			ops = append(ops, clientv3.OpPut(r.qkeys[i], b.entryOf(r.qs[i]).value(), clientv3.WithLease(r.lease)))
		}
		return append(ops, reads...)
	}
	ctx, cancel := b.request()
	defer cancel()
	start := time.Now()
	txn := b.cli.Txn(ctx)
	if len(r.runs) > 0 {
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(b.keys.queue(r.pool)).WithPrefix(), "=", 0)}
		var then []clientv3.Op
		for _, a := range r.runs {
			cmps = append(cmps, a.cmps...)
			then = append(then, a.ops...)
		}
		if len(r.runs) == len(r.qs) {
			// All start when the compares hold: nothing to read.
			then = append(deleteOps(r.dels), then...)
		} else {
			then = append(then, queue(len(r.runs))...)
		}
		txn = txn.If(cmps...).Then(then...).Else(queue(0)...)
	} else {
		txn = txn.Then(queue(0)...)
	}
	resp, err := txn.Commit()
	b.session.note(start, err)
	return resp, err
}

// registered decides, after registration r's transaction succeeded, the
// queries live still waiting for it: the first started ones run; each
// other one is refused (the queue is full), starts at once when the
// transaction's own reading lets it, or waits. b.mu is held.
func (b *Backend) registered(r *registration, resp *clientv3.TxnResponse, started int, live []int, now time.Time) []admission.Event {
	p := b.pools[r.pool]
	l := p.limits
	var running, ahead int
	slots := map[string]entry{}
	if started < len(r.qs) {
		reads := resp.Responses[len(resp.Responses)-3:]
		slotKVs := reads[0].GetResponseRange().Kvs
		running = len(slotKVs) + int(reads[1].GetResponseRange().Count)
		ahead = int(reads[2].GetResponseRange().Count) - (len(r.qs) - started) // queued before this batch
		for _, kv := range slotKVs {
			slots[string(kv.Key)] = entry{}
		}
	}
	var events []admission.Event
	var as []*attempt
	for _, i := range live {
		q := r.qs[i]
		p.pending--
		if i < started {
			q.rev = r.runs[i].createRev(resp.Header.Revision)
			b.started(q, r.runs[i], now)
			events = append(events, admission.Event{ID: q.id, Pool: q.pool, QueuedFor: now.Sub(q.arrived)})
			continue
		}
		waiting := ahead + (i - started) // queue keys ahead of this one
		q.st, q.key, q.rev = queued, r.qkeys[i], resp.Header.Revision
		if err := b.refusal(r, live, i, running, waiting); err != nil {
			p.stats.Rejected++
			b.drop(q)
			events = append(events, admission.Event{ID: q.id, Pool: q.pool, QueuedFor: now.Sub(q.arrived), Err: err})
			continue
		}
		q.placed = waiting + 1
		// At position waiting in the queue: start now if the transaction's
		// own reading lets it (waiting < the free slots, so every query
		// ahead of it may start too, each in the slot before its own),
		// rather than wait for the watch to show the key. The reading has
		// no users: with a per-user limit, or others waiting in a fair
		// pool, it starts in the start order the watch shows.
		if l.Users.Running > 0 || l.Users.Fair && waiting > 0 {
			events = b.tellQueued(q, events)
			continue
		}
		if a := b.startAttempt(q, slots, running, resp.Header.Revision, waiting, false, r.lease); a != nil {
			b.queuedAttempt(a)
			as = append(as, a)
			continue
		}
		events = b.tellQueued(q, events)
	}
	if len(as) > 0 {
		b.wg.Go(func() { b.emit(b.start(as)) })
	}
	return events
}

// refusal is the error that refuses r.qs[i], just queued behind waiting
// others with running queries running, when the pool's queue or its
// user's is full; nil when it may wait. b.mu is held.
func (b *Backend) refusal(r *registration, live []int, i, running, waiting int) *admission.Error {
	q := r.qs[i]
	p := b.pools[q.pool]
	l := p.limits
	if l.OverQueue(running, waiting) {
		n := p.pending + 1 // the requests of this node not registered, and this one
		return admission.QueueFullError(q.pool, n, held(running, waiting, l), l)
	}
	if !l.Users.QueueLimited {
		return nil
	}
	// The user's queries waiting as the view shows them, other than this
	// batch's, and this batch's before this one.
	v := b.cluster.view(q.pool)
	mine := userCounts(v)[q.user]
	for _, e := range v.queue {
		if e.User == q.user && slices.Contains(r.tokens, e.Token) {
			mine[1]--
		}
	}
	for _, j := range live {
		if j < i && r.qs[j].user == q.user && r.qs[j].st == queued {
			mine[1]++
		}
	}
	if mine[1]+1 > l.Users.Queue {
		return admission.UserQueueFullError(q.pool, q.user, mine[0], mine[1], held(running, waiting, l), l)
	}
	return nil
}

// runLease is the lease of a running query's key: the session's, but
// none in a pool with strict slots, whose keys stay when the node's lease
// expires (docs/fleet.md, "Strict slots"); b.mu is held.
func (b *Backend) runLease(pool string, lease clientv3.LeaseID) []clientv3.OpOption {
	if p, ok := b.pools[pool]; ok && p.limits.StrictSlots {
		return nil
	}
	return []clientv3.OpOption{clientv3.WithLease(lease)}
}

// tellQueued adds the Queued event of a query the daemon does not know
// waits yet; b.mu is held.
func (b *Backend) tellQueued(q *query, events []admission.Event) []admission.Event {
	if q.told {
		return events
	}
	q.told = true
	return append(events, admission.Event{ID: q.id, Pool: q.pool, Queued: true})
}

// attempt is the start of one query: its part of a start transaction.
type attempt struct {
	q        *query
	token    string
	runKey   string // the slot or extra key it puts
	claimed  bool   // runKey is a slot in b.claims
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
// admission reserves its share. nil when it may not start. b.mu is held.
func (b *Backend) startAttempt(q *query, slots map[string]entry, running int, rev int64, pos int, arriving bool, lease clientv3.LeaseID) *attempt {
	l := b.pools[q.pool].limits
	a := &attempt{q: q, token: q.token}
	if l.ConcurrentQueryLimit != admission.Unlimited {
		if pos >= l.ConcurrentQueryLimit-running {
			return nil
		}
		if arriving {
			a.runKey, a.reused = b.lingeringSlot(q.pool)
		}
		if a.runKey == "" {
			a.runKey = b.freeSlot(q.pool, l.ConcurrentQueryLimit, slots, pos, arriving)
		}
		if a.runKey == "" {
			return nil
		}
		b.claims[a.runKey] = struct{}{}
		a.claimed = true
		if a.reused != 0 {
			delete(b.deletes, a.runKey) // unless the attempt fails (release)
		}
		a.cmps = []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(a.runKey), "=", a.reused),
			// No extra registered since rev: the count of running
			// queries is at most the one read at rev.
			clientv3.Compare(clientv3.ModRevision(b.keys.extras(q.pool)).WithPrefix(), "<", rev+1),
		}
	} else {
		a.runKey = b.keys.extra(q.pool, q.token)
	}
	if arriving && l.Users.Running > 0 {
		// An arrival starts without a place in the start order: no query
		// started since rev, so its user's running count is the one the
		// view read (CONCURRENT_QUERY_LIMIT_PER_USER holds).
		a.cmps = append(a.cmps,
			clientv3.Compare(clientv3.ModRevision(b.keys.slots(q.pool)).WithPrefix(), "<", rev+1),
			clientv3.Compare(clientv3.ModRevision(b.keys.extras(q.pool)).WithPrefix(), "<", rev+1))
	}
	a.ops = []clientv3.Op{clientv3.OpPut(a.runKey, b.entryOf(q).value(), b.runLease(q.pool, lease)...)}
	if l.LoadCPUThresholdPercent > 0 {
		if pos != 0 || !b.loadAdmits(l.LoadCPUThresholdPercent) {
			b.release(a)
			return nil
		}
		b.load.Reserve()
		a.reserved = true
	}
	return a
}

// freeSlot picks the slot key a query at position pos of pool's queue (or
// arriving) takes among the c slots, as the view's slots show them; ""
// when none is free. A queued query takes the pos-th free slot, as every
// node counts them, so that the queries ahead of it on other nodes do not
// race it for the same one; an arriving query, the first free slot from
// this node's own offset. Either skips the slots this node's other
// attempts have claimed and the keys it is deleting. It looks at the
// slots one by one from where it starts, not at all c of them. b.mu is
// held.
func (b *Backend) freeSlot(pool string, c int, slots map[string]entry, pos int, arriving bool) string {
	usable := func(k string) bool { return !hasKey(slots, k) && !hasKey(b.claims, k) && !hasKey(b.deletes, k) }
	if !arriving {
		seen := 0
		for i := range c {
			k := b.keys.slot(pool, i)
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
		if k := b.keys.slot(pool, (b.offset+j)%c); usable(k) {
			return k
		}
	}
	return ""
}

// lingeringSlot is a slot key of pool that a query of this node held and
// that waits to be deleted (deleteLinger), with its create revision, for
// an arrival to take over: one write instead of a delete and a put, and
// one key event instead of two. "" when there is none. b.mu is held.
func (b *Backend) lingeringSlot(pool string) (string, int64) {
	best, rev := "", int64(0)
	for k, r := range b.deletes {
		if dir, p := b.keys.parse(k); dir != slotDir || p != pool || r == 0 || hasKey(b.claims, k) || hasKey(b.deletingKeys, k) {
			continue
		}
		if e, ok := b.cluster.view(pool).slots[k]; !ok || e.Node != b.cfg.Node || e.rev != r {
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
// must still be there, and goes. b.mu is held.
func (b *Backend) queuedAttempt(a *attempt) {
	q := a.q
	a.cmps = append(a.cmps, clientv3.Compare(clientv3.CreateRevision(q.key), "=", q.rev))
	a.ops = append([]clientv3.Op{clientv3.OpDelete(q.key)}, a.ops...)
	q.st = starting
}

// startableLocked returns the start attempts of every queued query of this
// node the views allow to start: at place p of its pool's start order
// (startOrder: the queue's under FIFO) when p < the free slots (all
// before it may start too, so the order holds); with a CPU-load threshold
// only the first, once the load allows. b.mu is held and the node is
// connected on lease.
func (b *Backend) startableLocked(lease clientv3.LeaseID) []*attempt {
	var as []*attempt
	now := time.Now()
	orders := map[string]map[string]int{}
	for _, q := range b.sortedQueries() {
		if q.st != queued {
			continue
		}
		v := b.cluster.view(q.pool)
		if v.position(q.rev, q.seq) < 0 {
			continue
		}
		order, ok := orders[q.pool]
		if !ok {
			order = startOrder(v, b.pools[q.pool].limits.Users, now)
			orders[q.pool] = order
		}
		pos, ok := order[q.token]
		if !ok {
			continue
		}
		if a := b.startAttempt(q, v.slots, v.running(), b.cluster.rev, pos, false, lease); a != nil {
			b.queuedAttempt(a)
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

// settle records the outcome of a queued query's start (rev: the
// revision it ran at, its run key's create revision); b.mu is held. It
// reports whether the query is now running.
func (b *Backend) settle(a *attempt, ok bool, rev int64, now time.Time) bool {
	q := a.q
	if q.token != a.token || q.st != starting {
		// Failed (deadline) or lost meanwhile.
		if ok {
			b.deletes[a.runKey] = rev
		}
		b.release(a)
		return false
	}
	if !ok {
		q.st = queued
		b.release(a)
		return false
	}
	q.rev = rev
	b.started(q, a, now)
	return true
}

// release ends a's claims: its slot and its share of the node's CPU.
func (b *Backend) release(a *attempt) {
	if a.reused != 0 {
		b.deletes[a.runKey] = a.reused // still to delete
		a.reused = 0
	}
	if a.claimed {
		delete(b.claims, a.runKey)
		a.claimed = false
	}
	if a.reserved {
		b.load.Unreserve()
		a.reserved = false
	}
}

// started marks q running under attempt a, whose key was created at
// revision rev; b.mu is held. The view holds its key at once, before the
// watch shows it, so that this node's next attempts count it.
func (b *Backend) started(q *query, a *attempt, now time.Time) {
	rev := q.rev
	a.reused = 0       // its key is q's now
	a.reserved = false // its share of the node's CPU stays reserved until the next refresh
	b.release(a)
	q.st = running
	q.key = a.runKey
	e := b.entryOf(q)
	e.key, e.rev, e.lease = a.runKey, rev, int64(b.session.id())
	if dir, _ := b.keys.parse(a.runKey); dir == slotDir {
		b.cluster.view(q.pool).slots[a.runKey] = e
	} else {
		b.cluster.view(q.pool).extras[a.runKey] = e
	}
	p := b.pools[q.pool]
	p.stats.Admitted++
	p.stats.QueueWait += now.Sub(q.arrived)
}

// deleteLinger is how long the key of a query that ended may wait for
// this node's next registration, to be deleted in its transaction rather
// than in one of its own: at most one etcd write per admission in a
// steady stream of short queries, instead of two. Only keys that hold
// nothing another node waits for linger (mayLingerLocked).
const deleteLinger = 50 * time.Millisecond

// maxBatchDeletes bounds the deletes a registration carries: with its
// maxBatch puts and 3 reads, within etcd's 128 operations.
const maxBatchDeletes = 32

// deletesDueLocked reports whether the keys to delete go now in a
// transaction of their own: the oldest has waited deleteLinger for a
// registration to carry it, or one of them may hold back another query
// (mayLingerLocked). b.mu is held.
func (b *Backend) deletesDueLocked(now time.Time) bool {
	if b.lingerUntil.IsZero() {
		b.lingerUntil = now.Add(b.linger)
		time.AfterFunc(b.linger, b.poke)
	}
	if !now.Before(b.lingerUntil) {
		return true
	}
	for k := range b.deletes {
		if !b.mayLingerLocked(k) {
			return true
		}
	}
	return false
}

// mayLingerLocked reports whether key, to delete, may wait for a
// registration: a slot or extra key of a pool whose view shows no queue,
// a free slot, no per-user limit and no strict slots. Such a key holds
// back no other query (an arrival elsewhere finds a free slot, and with
// no queue no query is refused for a full one), and the next pump deletes
// it once one waits. b.mu is held.
func (b *Backend) mayLingerLocked(key string) bool {
	dir, pool := b.keys.parse(key)
	if dir != slotDir && dir != extraDir {
		return false
	}
	p, ok := b.pools[pool]
	if !ok || p.limits.StrictSlots || p.limits.Users.Running > 0 {
		return false
	}
	v := b.cluster.view(pool)
	c := p.limits.ConcurrentQueryLimit
	return len(v.queue) == 0 && (c == admission.Unlimited || v.running() < c)
}

// takeDeletesLocked returns up to n keys of b.deletes, with their create
// revisions, to delete in a transaction now in flight (b.deletingKeys
// until it returns: no arrival takes them over). b.mu is held.
func (b *Backend) takeDeletesLocked(n int) map[string]int64 {
	b.lingerUntil = time.Time{}
	out := map[string]int64{}
	for _, k := range slices.Sorted(maps.Keys(b.deletes))[:min(n, len(b.deletes))] {
		out[k] = b.deletes[k]
	}
	b.deletingKeys = out
	return out
}

// deletedLocked ends the delete transaction of the keys dels: when it
// succeeded (ok), it forgets them, unless a later key of the same name
// was scheduled meanwhile. b.mu is held.
func (b *Backend) deletedLocked(dels map[string]int64, ok bool) {
	b.deletingKeys = nil
	for k, rev := range dels {
		if ok && b.deletes[k] == rev {
			delete(b.deletes, k)
		}
	}
}

// deleteOps are the operations that delete keys: a key known by its
// create revision goes only if it is still that key (a slot key another
// node has taken since stays; the watch may show this node's own put
// after the query left).
func deleteOps(keys map[string]int64) []clientv3.Op {
	var ops []clientv3.Op
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if keys[k] == 0 {
			ops = append(ops, clientv3.OpDelete(k))
			continue
		}
		ops = append(ops, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", keys[k])},
			[]clientv3.Op{clientv3.OpDelete(k)}, nil))
	}
	return ops
}

// deleteKeys deletes the keys of ended queries and orphans, in one
// transaction per 64.
func (b *Backend) deleteKeys() {
	var err error
	defer func() {
		b.mu.Lock()
		b.deleting = false
		more := len(b.deletes) > 0
		b.mu.Unlock()
		if more && err == nil {
			b.poke() // ended while this ran; on an error, the next pump
		}
	}()
	for {
		b.mu.Lock()
		dels := b.takeDeletesLocked(64)
		b.mu.Unlock()
		if len(dels) == 0 {
			return
		}
		ctx, cancel := b.request()
		start := time.Now()
		_, err = b.cli.Txn(ctx).Then(deleteOps(dels)...).Commit()
		cancel()
		b.session.note(start, err)
		b.mu.Lock()
		b.deletedLocked(dels, err == nil)
		b.mu.Unlock()
		if err != nil {
			return // kept for a later pump; the lease expiry removes them at worst
		}
		if len(dels) < 64 {
			return
		}
	}
}
