package fleet

import (
	"slices"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxBatch bounds the queries of one registration transaction: k puts and
// 3 reads, within etcd's default of 128 operations per transaction.
const maxBatch = 64

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
	// values are the queue keys' values, made with the tokens: a query
	// that fails meanwhile forgets its token, and the transaction is sent
	// without the lock.
	values []string
	runs   []*attempt // for qs[:len(runs)]
	// dels are keys of this node to delete (b.deletes) that go with the
	// registration, by their create revision (see deleteOps).
	dels map[string]int64
}

// registrationsLocked makes the registration of every pool with arrivals
// and none in flight, on lease; np.mu and the cluster's lock are held and
// the node is connected.
func (np *pipeline) registrationsLocked(lease clientv3.LeaseID) []*registration {
	var regs []*registration
	byPool := map[string]*registration{}
	for _, q := range np.sortedQueries() {
		if q.st != pending || q.token != "" {
			continue
		}
		p := np.pools[q.pool]
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
		q.token = np.newToken(lease)
		q.seq = np.seq
		np.tokens[q.token] = q
		r.qs = append(r.qs, q)
		r.tokens = append(r.tokens, q.token)
		r.qkeys = append(r.qkeys, np.keys.queued(q.pool, q.token))
		r.values = append(r.values, np.entryOf(q).value())
	}
	for _, r := range regs {
		np.pools[r.pool].registering = true
		v := np.cluster.view(r.pool)
		if len(v.queue) > 0 {
			continue
		}
		perUser := np.pools[r.pool].limits.Users.Running
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
			a := np.startAttempt(q, v.slots, v.running(), np.cluster.rev, i, true, r.lease)
			if a == nil {
				break
			}
			running[q.user]++
			r.runs = append(r.runs, a)
		}
	}
	if len(regs) > 0 && len(np.deletes) > 0 && !np.deleting {
		// The keys of ended queries not taken over go with the first
		// registration.
		np.deleting = true
		regs[0].dels = np.takeDeletesLocked(maxBatchDeletes)
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
	events, as := b.registered(r, resp, started, live, now)
	if len(as) > 0 {
		b.wg.Go(func() { b.emit(b.start(as)) })
	}
	return events
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
			ops = append(ops, clientv3.OpPut(r.qkeys[i], r.values[i], clientv3.WithLease(r.lease)))
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
// transaction's own reading lets it, or waits. np.mu and the cluster's
// lock are held. It returns the events it decides and the starts to send
// of the queries that may start at once.
func (np *pipeline) registered(r *registration, resp *clientv3.TxnResponse, started int, live []int, now time.Time) ([]admission.Event, []*attempt) {
	p := np.pools[r.pool]
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
			np.started(q, r.runs[i], now)
			events = append(events, admission.Event{ID: q.id, Pool: q.pool, QueuedFor: now.Sub(q.arrived)})
			continue
		}
		waiting := ahead + (i - started) // queue keys ahead of this one
		q.st, q.key, q.rev = queued, r.qkeys[i], resp.Header.Revision
		if err := np.refusal(r, live, i, running, waiting); err != nil {
			p.stats.Rejected++
			np.drop(q)
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
			events = np.tellQueued(q, events)
			continue
		}
		if a := np.startAttempt(q, slots, running, resp.Header.Revision, waiting, false, r.lease); a != nil {
			np.queuedAttempt(a)
			as = append(as, a)
			continue
		}
		events = np.tellQueued(q, events)
	}
	return events, as
}

// refusal is the error that refuses r.qs[i], just queued behind waiting
// others with running queries running, when the pool's queue or its user's
// is full; nil when it may wait. np.mu and the cluster's lock are held.
func (np *pipeline) refusal(r *registration, live []int, i, running, waiting int) *admission.Error {
	q := r.qs[i]
	p := np.pools[q.pool]
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
	v := np.cluster.view(q.pool)
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

// tellQueued adds the Queued event of a query the daemon does not know
// waits yet; np.mu is held.
func (np *pipeline) tellQueued(q *query, events []admission.Event) []admission.Event {
	if q.told {
		return events
	}
	q.told = true
	return append(events, admission.Event{ID: q.id, Pool: q.pool, Queued: true})
}
