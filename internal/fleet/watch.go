package fleet

import (
	"context"
	"net/url"
	"slices"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
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
	first := b.rev == 0
	b.views = map[string]*view{}
	b.nodes = map[string]NodeRecord{}
	for _, kv := range resp.Kvs {
		b.applyPut(kv)
	}
	b.rev = resp.Header.Revision
	b.health.WatchAt = time.Now()
	if first {
		b.inheritLocked(time.Now())
		time.AfterFunc(b.cfg.TTL, b.poke) // releaseInheritedLocked
	}
	b.mu.Unlock()
	b.poke()
	return nil
}

// read reports whether the node has read the cluster: false from a start
// while etcd was unreachable until it answers.
func (b *Backend) read() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rev != 0
}

// watchLoop keeps the views current from a watch on the cluster prefix,
// reading the prefix again whenever the watch breaks (a member without a
// leader, a compacted revision).
func (b *Backend) watchLoop(ctx context.Context) {
	if !b.read() {
		// Started while etcd was unreachable: the views come first.
		b.readCluster(ctx)
	}
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

func (b *Backend) applyWatch(wr clientv3.WatchResponse) {
	var defs *Definitions
	size := 0
	for _, ev := range wr.Events {
		size += proto.Size(ev)
	}
	b.mu.Lock()
	b.health.WatchEvents += int64(len(wr.Events))
	b.health.WatchBytes += int64(size)
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
		name := key[len(b.keys.node("")):]
		r, err := decodeNodeRecord(name, kv.Value)
		if err != nil {
			// Not counted: a record out of range must not steer the
			// cluster's load.
			delete(b.nodes, name)
			b.invalid(key, err)
			return nil
		}
		b.nodes[name] = r
		return nil
	case defsKey:
		d, err := decodeDefinitions(kv.Value, kv.ModRevision)
		if err != nil {
			b.invalid(key, err)
			return nil
		}
		return &d
	case "":
		return nil
	case usageDir:
		user, err := url.PathUnescape(b.keys.name(key, dir, pool))
		if err == nil {
			var u admission.Usage
			if u, err = decodeUsage(kv.Value); err == nil {
				b.view(pool).usage[user] = u
				return nil
			}
		}
		b.invalid(key, err)
		return nil
	}
	e, err := decodeEntry(dir, b.keys.name(key, dir, pool), kv.Value)
	if err != nil {
		b.invalid(key, err)
		if dir == queueDir {
			return nil // no node's query: it never starts, so it holds no place
		}
		// A slot or extra key holds its slot whatever its value says (the
		// start transactions compare on the key itself): counted, with no
		// node.
		e = entry{}
	}
	e.key, e.rev, e.lease = key, kv.CreateRevision, kv.Lease
	v := b.view(pool)
	switch dir {
	case queueDir:
		if i, found := slices.BinarySearchFunc(v.queue, e, queueOrder); !found {
			// New keys come last, but a full read comes in key order.
			v.queue = slices.Insert(v.queue, i, e)
		}
	case slotDir:
		v.slots[key] = e
	case extraDir:
		v.extras[key] = e
	}
	if e.Node == b.cfg.Node && clientv3.LeaseID(e.lease) == b.session.id() {
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
	case usageDir:
		if user, err := url.PathUnescape(b.keys.name(key, dir, pool)); err == nil {
			delete(b.view(pool).usage, user)
		}
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

// invalid logs a value read from etcd that is not used, at most once a
// second (with the count of those not logged); b.mu is held.
func (b *Backend) invalid(key string, err error) {
	now := time.Now()
	if now.Sub(b.invalidAt) < time.Second {
		b.invalidQuiet++
		return
	}
	b.log.Error("value in etcd refused: not used", "key", clip(key), "err", err, "refused_since_last", b.invalidQuiet)
	b.invalidAt, b.invalidQuiet = now, 0
}
