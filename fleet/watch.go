package fleet

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// loadViews reads the whole cluster prefix and makes the views match it.
func (b *Backend) loadViews(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), b.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	resp, err := b.cli.Get(rctx, b.keys.prefix, clientv3.WithPrefix())
	b.note(start, err)
	if err != nil {
		return b.unreachable(err)
	}
	b.mu.Lock()
	b.views = map[string]*view{}
	b.nodes = map[string]NodeRecord{}
	for _, kv := range resp.Kvs {
		b.applyPut(kv)
	}
	for _, v := range b.views {
		slices.SortFunc(v.queue, func(a, b entry) int { return int(a.rev - b.rev) })
	}
	b.rev = resp.Header.Revision
	b.health.WatchAt = time.Now()
	b.mu.Unlock()
	b.poke()
	return nil
}

// watchLoop keeps the views current from a watch on the cluster prefix,
// reading the prefix again whenever the watch breaks (a member without a
// leader, a compacted revision).
func (b *Backend) watchLoop(ctx context.Context) {
	for ctx.Err() == nil {
		b.mu.Lock()
		from := b.rev + 1
		b.mu.Unlock()
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
		for ctx.Err() == nil {
			if err := b.loadViews(ctx); err == nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
}

func (b *Backend) applyWatch(wr clientv3.WatchResponse) {
	var defs *Definitions
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
	b.rev = wr.Header.Revision
	b.health.WatchAt = time.Now()
	b.mu.Unlock()
	if defs != nil && b.cfg.Definitions != nil {
		b.cfg.Definitions(*defs)
	}
	b.poke()
}

func (b *Backend) view(pool string) *view {
	v, ok := b.views[pool]
	if !ok {
		v = newView()
		b.views[pool] = v
	}
	return v
}

// applyPut adds a key to the views; b.mu is held. It returns the
// definitions when the key is theirs. A query key of this node whose
// registration is no longer live (it failed or left while its request was
// under way) is an orphan, to delete.
func (b *Backend) applyPut(kv *mvccpb.KeyValue) *Definitions {
	key := string(kv.Key)
	dir, pool := b.keys.parse(key)
	switch dir {
	case nodesDir:
		var r NodeRecord
		if json.Unmarshal(kv.Value, &r) == nil {
			b.nodes[r.Node] = r
		}
		return nil
	case defsKey:
		d, err := decodeDefinitions(kv.Value, kv.ModRevision)
		if err != nil {
			b.log.Error("pool definitions in the cluster cannot be read; ignored", "key", key, "err", err)
			return nil
		}
		return &d
	case "":
		return nil
	}
	var e entry
	if err := json.Unmarshal(kv.Value, &e); err != nil {
		b.log.Error("query key cannot be read; ignored", "key", key, "err", err)
		return nil
	}
	e.key, e.rev, e.lease = key, kv.CreateRevision, kv.Lease
	v := b.view(pool)
	switch dir {
	case queueDir:
		if i := v.position(e.rev); i < 0 {
			// New keys come last; only a full read needs the sort.
			v.queue = append(v.queue, e)
		}
	case slotDir:
		v.slots[key] = e
	case extraDir:
		v.extras[key] = e
	}
	if e.Node == b.cfg.Node && clientv3.LeaseID(e.lease) == b.lease {
		if _, live := b.tokens[e.Token]; !live {
			b.deletes[key] = e.rev
		}
	}
	return nil
}

// applyDelete removes a key from the views; b.mu is held. A queue key of
// a query of this node that vanished without this node deleting it (its
// lease expired) leaves the query pending.
func (b *Backend) applyDelete(kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	dir, pool := b.keys.parse(key)
	switch dir {
	case nodesDir:
		delete(b.nodes, key[len(b.keys.node("")):])
		return
	case queueDir, slotDir, extraDir:
	default:
		return
	}
	// The key this node meant to delete is gone, unless it is a later
	// one under the same name.
	if rev, ok := b.deletes[key]; ok && rev < kv.ModRevision {
		delete(b.deletes, key)
	}
	v := b.view(pool)
	switch dir {
	case queueDir:
		v.queue = slices.DeleteFunc(v.queue, func(e entry) bool { return e.key == key })
	case slotDir:
		delete(v.slots, key)
	case extraDir:
		delete(v.extras, key)
	}
}
