package fleet

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Strict slots (GLOBAL_SLOTS='strict', docs/fleet.md): the slot and extra
// keys of a pool with strict slots are put without a lease, so a node
// that vanishes keeps its slots. When it comes back under the same name,
// the daemon adopts the queries still running in their cgroups (Adopt):
// each takes one of the node's keys left from its earlier run; the keys
// left over once the daemon has adopted (one TTL after the node first
// read the cluster) are of
// queries that ended meanwhile, and go. A node that does not come back
// keeps its slots until an administrator releases them (ReleaseNode).

// inheritLocked collects this node's keys without a lease, left by its
// earlier run, from the views; np.mu and the cluster's lock are held.
func (np *pipeline) inheritLocked(now time.Time) {
	for pool, v := range np.cluster.views {
		for _, m := range []map[string]entry{v.slots, v.extras} {
			for _, e := range m {
				if e.Node == np.node && e.lease == 0 {
					np.inherited[pool] = append(np.inherited[pool], e)
				}
			}
		}
	}
	np.inheritedUntil = now.Add(np.ttl)
	// Queries adopted before the cluster could be read (a start while
	// etcd was unreachable) take their keys now.
	for _, q := range np.sortedQueries() {
		if q.st == running && q.lost && q.token == "" && np.pools[q.pool].limits.StrictSlots && np.inheritedKey(q) {
			q.lost = false
		}
	}
}

// inheritedKey hands an adopted query of a pool with strict slots one of
// the node's keys left from its earlier run; false when none is left.
// np.mu is held.
func (np *pipeline) inheritedKey(q *query) bool {
	es := np.inherited[q.pool]
	if len(es) == 0 {
		return false
	}
	e := es[0]
	np.inherited[q.pool] = es[1:]
	q.token, q.key, q.rev = e.Token, e.key, e.rev
	np.tokens[q.token] = q
	return true
}

// releaseInheritedLocked deletes, once the daemon has had a TTL to adopt
// what still runs, the node's keys from its earlier run that no adopted
// query took; np.mu is held.
func (np *pipeline) releaseInheritedLocked(now time.Time) {
	if len(np.inherited) == 0 || now.Before(np.inheritedUntil) {
		return
	}
	n := 0
	for _, es := range np.inherited {
		for _, e := range es {
			np.deletes[e.key] = e.rev
			n++
		}
	}
	clear(np.inherited)
	if n > 0 {
		np.log.Info("strict slots of this node's earlier run released: their queries are no longer running", "slots", n)
	}
}

// leaseless reports whether key is a slot or extra key of a pool with
// strict slots; np.mu is held.
func (np *pipeline) leaseless(key string) bool {
	dir, pool := np.keys.parse(key)
	p, ok := np.pools[pool]
	return ok && p.limits.StrictSlots && (dir == slotDir || dir == extraDir)
}

// ReleaseNode deletes the keys without a lease (slots and extras of pools
// with strict slots) of node, a node that vanished and will not come back
// to say what still runs, and returns how many it deleted: their slots go
// to the queries waiting for them. It is an administrator's decision: the
// node's queries, if any still run, then run beside the slots given away.
func (b *Backend) ReleaseNode(ctx context.Context, node string) (int, error) {
	if err := validNodeName("node", node); err != nil {
		return 0, err
	}
	if node == b.cfg.Node {
		return 0, fmt.Errorf("node %s is this node: its strict slots are freed as its queries end", node)
	}
	var ops []clientv3.Op
	for _, dir := range []string{slotDir, extraDir} {
		rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), b.cfg.RequestTimeout)
		resp, err := b.cli.Get(rctx, b.keys.prefix+dir, clientv3.WithPrefix())
		cancel()
		if err != nil {
			return 0, b.unreachable(err)
		}
		for _, kv := range resp.Kvs {
			key := string(kv.Key)
			d, pool := b.keys.parse(key)
			if d != dir || kv.Lease != 0 {
				continue
			}
			e, err := decodeEntry(dir, b.keys.name(key, dir, pool), kv.Value)
			if err != nil || e.Node != node {
				continue
			}
			ops = append(ops, clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", kv.CreateRevision)},
				[]clientv3.Op{clientv3.OpDelete(key)}, nil))
		}
	}
	done := 0
	for len(ops) > 0 {
		n := min(len(ops), 64)
		rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), b.cfg.RequestTimeout)
		_, err := b.cli.Txn(rctx).Then(ops[:n]...).Commit()
		cancel()
		if err != nil {
			return done, b.unreachable(err)
		}
		done += n
		ops = ops[n:]
	}
	b.log.Warn("strict slots of another node released by an administrator", "released_node", node, "slots", done)
	return done, nil
}
