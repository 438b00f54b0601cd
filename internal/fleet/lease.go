package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// renewInterval is how often a node renews its session lease: a
// twentieth of the TTL. etcd expires a lease TTL after the last renewal it
// received, so a cut between the node and etcd shorter than
// TTL − TTL/20 − one round trip never costs the node its lease
// (docs/fleet.md "Session lease"). etcd's own KeepAlive renews every
// TTL/3 from a loop that looks every 500 ms, which loses the lease to cuts
// of about TTL − TTL/3 − 0.5 s: that is why the node renews by itself (one
// LeaseKeepAlive message each time, answered by the leader without a raft
// round). The client's reconnection backoff is capped at the same
// interval, so a severed connection comes back as soon as the path does.
func renewInterval(ttl time.Duration) time.Duration { return ttl / 20 }

// newSession grants a lease and publishes the node record on it.
func (b *Backend) newSession(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	g, err := b.cli.Grant(rctx, int64(b.cfg.TTL/time.Second))
	b.session.note(start, err)
	if err != nil {
		return b.unreachable(err)
	}
	if err := b.putRecord(rctx, g.ID); err != nil {
		b.cli.Revoke(context.Background(), g.ID)
		return b.unreachable(err)
	}
	b.session.begin(g.ID, start.Add(time.Duration(g.TTL)*time.Second))
	return nil
}

// sessionLoop keeps the node's session: it renews the lease every
// renewInterval. While no renewal has been answered for a TTL the node
// does not admit to globally limited pools (its lease may be gone), but it
// keeps its queries as they are: when etcd answers again and the lease is
// still alive, everything goes on as before, queued queries in their
// places. Only when etcd says the lease is gone does the node give up its
// queue keys and take a new session (lostSession).
func (b *Backend) sessionLoop(ctx context.Context) {
	t := time.NewTicker(renewInterval(b.cfg.TTL))
	defer t.Stop()
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lease, live := b.session.current(time.Now())
		if lease == 0 {
			if err := b.newSession(ctx); err == nil {
				h := b.Health()
				if h.Sessions == 1 {
					b.log.Info("etcd answers: the node's first session, taken after a start while etcd was unreachable; running queries are registered", "lease", fmt.Sprintf("%x", h.Lease))
				} else {
					b.log.Info("etcd session back: a new lease; running queries are registered again", "lease", fmt.Sprintf("%x", h.Lease))
				}
				warned = false
				b.poke()
			}
			continue
		}
		if !live && !warned {
			warned = true
			b.log.Warn("etcd has not renewed the session lease for a TTL: globally limited pools do not admit on this node until it answers; running queries go on", "lease", fmt.Sprintf("%x", lease))
		}
		switch b.renew(ctx, lease) {
		case leaseAlive:
			if warned {
				warned = false
				b.log.Info("etcd session kept: the lease outlived the cut, every query keeps its place", "lease", fmt.Sprintf("%x", lease))
				b.poke()
			}
		case leaseGone:
			b.lostSession(lease)
		}
	}
}

type renewal int

const (
	leaseUnknown renewal = iota // no answer
	leaseAlive
	leaseGone
)

// renew sends one renewal of lease.
func (b *Backend) renew(ctx context.Context, lease clientv3.LeaseID) renewal {
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), b.cfg.TTL/3)
	defer cancel()
	start := time.Now()
	resp, err := b.cli.KeepAliveOnce(rctx, lease)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		b.session.note(start, nil)
		return leaseGone
	case err != nil:
		b.session.note(start, err)
		return leaseUnknown
	}
	b.session.note(start, nil)
	b.session.renewed(lease, start.Add(time.Duration(resp.TTL)*time.Second))
	return leaseAlive
}

// lostSession forgets the keys of a lease etcd says is gone: queued
// queries go back to pending and queue again at the back (with a fresh
// deadline if their pool has none of its own), running ones are marked
// for registration as extras on the next session.
func (b *Backend) lostSession(old clientv3.LeaseID) {
	now := time.Now()
	b.mu.Lock()
	if !b.session.end(old) {
		b.mu.Unlock()
		return
	}
	n := 0
	for _, q := range b.queries {
		if q.local {
			continue
		}
		switch q.st {
		case queued, starting:
			b.forgetToken(q)
			q.st = pending
			if q.deadline.IsZero() {
				q.unreachableBy = now.Add(b.cfg.TTL)
			}
			b.pools[q.pool].pending++
			n++
		case running:
			if b.pools[q.pool].limits.StrictSlots && q.token != "" {
				continue // its key has no lease: it still holds its slot
			}
			b.forgetToken(q)
			q.lost = true
		case pending:
			b.forgetToken(q)
		}
	}
	// The old lease's keys went with it; keys without a lease stay to
	// delete.
	maps.DeleteFunc(b.deletes, func(k string, _ int64) bool { return !b.leaseless(k) })
	b.mu.Unlock()
	b.log.Warn("etcd session lost: the lease expired; queued queries queue again at the back, running queries go on and are registered again", "lease", fmt.Sprintf("%x", old), "queued_again", n)
}

// reregister puts an extra key for every running query without a key (its
// lease was lost, or it was adopted), in transactions of up to 64.
func (b *Backend) reregister() {
	b.mu.Lock()
	lease := b.session.id()
	var ops []clientv3.Op
	var regs []*query
	var tokens []string
	if lease != 0 {
		for _, q := range b.sortedQueries() {
			if q.st != running || !q.lost || q.token != "" {
				continue
			}
			q.token = b.newToken(lease)
			q.seq = b.seq
			b.tokens[q.token] = q
			q.key = b.keys.extra(q.pool, q.token)
			ops = append(ops, clientv3.OpPut(q.key, b.entryOf(q).value(), b.runLease(q.pool, lease)...))
			regs = append(regs, q)
			tokens = append(tokens, q.token)
		}
	}
	b.mu.Unlock()
	for len(ops) > 0 {
		n := min(len(ops), 64) // etcd allows 128 operations per transaction
		ctx, cancel := b.request()
		start := time.Now()
		resp, err := b.cli.Txn(ctx).Then(ops[:n]...).Commit()
		cancel()
		b.session.note(start, err)
		b.mu.Lock()
		if err != nil {
			for i, q := range regs {
				if q.token == tokens[i] {
					b.forgetToken(q) // tried again at a later pump
				}
			}
			b.mu.Unlock()
			return
		}
		for i, q := range regs[:n] {
			if q.token != tokens[i] { // it left meanwhile: an orphan
				b.deletes[b.keys.extra(q.pool, tokens[i])] = resp.Header.Revision
				continue
			}
			q.lost, q.rev = false, resp.Header.Revision
		}
		b.mu.Unlock()
		ops, regs, tokens = ops[n:], regs[n:], tokens[n:]
	}
	if len(regs) > 0 {
		b.log.Info("running queries registered again", "lease", fmt.Sprintf("%x", lease), "running", len(regs))
	}
}
