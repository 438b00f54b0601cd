package fleet

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// loadViews reads the whole cluster prefix and makes the views match it.
func (b *Backend) loadViews(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), b.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	resp, err := b.cli.Get(rctx, b.keys.prefix, clientv3.WithPrefix())
	b.session.note(start, err)
	if err != nil {
		return b.unreachable(err)
	}
	b.mu.Lock()
	c := b.cluster
	c.mu.Lock()
	first := c.rev == 0
	c.reset()
	c.mu.Unlock()
	for _, kv := range resp.Kvs {
		b.applyPut(kv)
	}
	c.mu.Lock()
	c.reached(resp.Header.Revision, 0, 0)
	if first {
		b.inheritLocked(time.Now())
		time.AfterFunc(b.cfg.TTL, b.poke) // releaseInheritedLocked
	}
	c.mu.Unlock()
	b.mu.Unlock()
	b.poke()
	return nil
}

// watchLoop keeps the views current from a watch on the cluster prefix,
// reading the prefix again whenever the watch breaks (a member without a
// leader, a compacted revision).
func (b *Backend) watchLoop(ctx context.Context) {
	if !b.cluster.read() {
		// Started while etcd was unreachable: the views come first.
		b.readCluster(ctx)
	}
	for ctx.Err() == nil {
		from := b.cluster.revision() + 1
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := b.cli.Watch(wctx, b.keys.prefix, clientv3.WithPrefix(), clientv3.WithRev(from))
		for wr := range wch {
			if err := wr.Err(); err != nil {
				b.log.Debug("watch broken; reading the cluster again", "err", err)
				break
			}
			b.applyWatch(wr)
		}
		cancel()
		b.readCluster(ctx)
	}
}

// readCluster reads the cluster prefix (loadViews) until it succeeds or
// ctx ends, every 250 ms.
func (b *Backend) readCluster(ctx context.Context) {
	for ctx.Err() == nil {
		if err := b.loadViews(ctx); err == nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// applyWatch applies one response of the watch to the views and to this
// node's keys.
func (b *Backend) applyWatch(wr clientv3.WatchResponse) {
	var defs *Definitions
	size := 0
	for _, ev := range wr.Events {
		size += proto.Size(ev)
	}
	b.mu.Lock()
	for _, ev := range wr.Events {
		switch ev.Type {
		case clientv3.EventTypePut:
			if d := b.applyPut(ev.Kv); d != nil {
				defs = d
			}
		case clientv3.EventTypeDelete:
			b.applyDelete(ev.Kv)
		}
	}
	b.cluster.mu.Lock()
	b.cluster.reached(wr.Header.Revision, len(wr.Events), size)
	b.cluster.mu.Unlock()
	b.mu.Unlock()
	if defs != nil && b.cfg.Definitions != nil {
		b.cfg.Definitions(*defs)
	}
	b.poke()
}

// applyPut adds a key to the views; b.mu is held, and it takes the
// cluster's. It returns the definitions when the key is theirs. A query
// key of this node whose registration is no longer live (it failed or
// left while its request was under way) is an orphan, to delete.
func (b *Backend) applyPut(kv *mvccpb.KeyValue) *Definitions {
	b.cluster.mu.Lock()
	defs, e := b.cluster.put(kv)
	b.cluster.mu.Unlock()
	if e != nil && e.Node == b.cfg.Node && clientv3.LeaseID(e.lease) == b.session.id() {
		if _, live := b.tokens[e.Token]; !live {
			b.deletes[e.key] = e.rev
		}
	}
	return defs
}

// applyDelete removes a key from the views; b.mu is held, and it takes
// the cluster's. A queue key of a query of this node that vanished
// without this node deleting it (its lease expired) leaves the query
// pending.
func (b *Backend) applyDelete(kv *mvccpb.KeyValue) {
	b.cluster.mu.Lock()
	query := b.cluster.remove(kv)
	b.cluster.mu.Unlock()
	if !query {
		return
	}
	// The key this node meant to delete is gone, unless it is a later
	// one under the same name.
	key := string(kv.Key)
	if rev, ok := b.deletes[key]; ok && rev < kv.ModRevision {
		delete(b.deletes, key)
	}
}
