package fleet

import (
	"maps"
	"slices"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	clientv3 "go.etcd.io/etcd/client/v3"
)

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
// (mayLingerLocked). np.mu and the cluster's lock are held.
func (np *pipeline) deletesDueLocked(now time.Time) bool {
	if np.lingerUntil.IsZero() {
		np.lingerUntil = now.Add(np.linger)
		time.AfterFunc(np.linger, np.wakePump)
	}
	if !now.Before(np.lingerUntil) {
		return true
	}
	for k := range np.deletes {
		if !np.mayLingerLocked(k) {
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
// it once one waits. np.mu and the cluster's lock are held.
func (np *pipeline) mayLingerLocked(key string) bool {
	dir, pool := np.keys.parse(key)
	if dir != slotDir && dir != extraDir {
		return false
	}
	p, ok := np.pools[pool]
	if !ok || p.limits.StrictSlots || p.limits.Users.Running > 0 {
		return false
	}
	v := np.cluster.view(pool)
	c := p.limits.ConcurrentQueryLimit
	return len(v.queue) == 0 && (c == admission.Unlimited || v.running() < c)
}

// takeDeletesLocked returns up to n keys of b.deletes, with their create
// revisions, to delete in a transaction now in flight (b.deletingKeys
// until it returns: no arrival takes them over). np.mu is held.
func (np *pipeline) takeDeletesLocked(n int) map[string]int64 {
	np.lingerUntil = time.Time{}
	out := map[string]int64{}
	for _, k := range slices.Sorted(maps.Keys(np.deletes))[:min(n, len(np.deletes))] {
		out[k] = np.deletes[k]
	}
	np.deletingKeys = out
	return out
}

// deletedLocked ends the delete transaction of the keys dels: when it
// succeeded (ok), it forgets them, unless a later key of the same name
// was scheduled meanwhile. np.mu is held.
func (np *pipeline) deletedLocked(dels map[string]int64, ok bool) {
	np.deletingKeys = nil
	for k, rev := range dels {
		if ok && np.deletes[k] == rev {
			delete(np.deletes, k)
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
