package fleet

import (
	"encoding/json"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Users in a pool across the cluster: every queue, slot and extra key
// carries its query's user, so each node's view counts each user's running
// and queued queries cluster-wide; the users' CPU time in the pool lives in
// usage keys that every node's charges add to. From these every node
// computes the same start order (startOrder) and starts its own queries at
// their places in it, as it starts them at their places in the FIFO queue.

// startOrder is the order in which pool's queued queries start as the
// view shows the cluster, if no running query ended: by queue order under
// FIFO; by the fair order under QUEUE_POLICY='fair' (admission.FairBefore:
// fewest running, then least decayed usage, then the older query), each
// start counting as one more running query of its user; a user at
// CONCURRENT_QUERY_LIMIT_PER_USER is passed over. It maps each queue key's
// token to its place, 0 for the first; a query of a user held at the
// limit has none. Every node computes it from the same keys, so the nodes
// agree on it as they agree on the queue.
func startOrder(v *view, l admission.UserLimits, now time.Time) map[string]int {
	out := make(map[string]int, len(v.queue))
	if l == (admission.UserLimits{}) {
		for i, e := range v.queue {
			out[e.Token] = i
		}
		return out
	}
	running := map[string]int{}
	for _, e := range v.slots {
		running[e.User]++
	}
	for _, e := range v.extras {
		running[e.User]++
	}
	type waiting struct {
		user string
		idx  []int // into v.queue, in queue order
	}
	var users []*waiting
	byUser := map[string]*waiting{}
	for i, e := range v.queue {
		w := byUser[e.User]
		if w == nil {
			w = &waiting{user: e.User}
			byUser[e.User] = w
			users = append(users, w)
		}
		w.idx = append(w.idx, i)
	}
	for place := 0; ; place++ {
		var best *waiting
		var bestAt admission.Standing
		for _, w := range users {
			if len(w.idx) == 0 || l.Running > 0 && running[w.user] >= l.Running {
				continue
			}
			st := admission.Standing{Oldest: int64(w.idx[0])}
			if l.Fair {
				st.Running, st.UsageSeconds = running[w.user], v.usage[w.user].Now(now, l.HalfLife)
			}
			if best == nil || admission.FairBefore(st, bestAt) {
				best, bestAt = w, st
			}
		}
		if best == nil {
			return out
		}
		out[v.queue[best.idx[0]].Token] = place
		best.idx = best.idx[1:]
		running[best.user]++
	}
}

// userCounts returns each user's running and queued queries in the view.
func userCounts(v *view) map[string][2]int {
	out := map[string][2]int{}
	count := func(user string, i int) {
		c := out[user]
		c[i]++
		out[user] = c
	}
	for _, e := range v.slots {
		count(e.User, 0)
	}
	for _, e := range v.extras {
		count(e.User, 0)
	}
	for _, e := range v.queue {
		count(e.User, 1)
	}
	return out
}

// usageKey names one user's usage of one pool.
type usageKey struct{ pool, user string }

// Charge implements admission.Backend: the CPU time is added to the
// user's usage of the pool in the cluster (the usage key) by the pump, in
// the background; a node cut off from etcd keeps it until it reaches etcd
// again. Only a fair pool with a half-life counts usage.
func (b *Backend) Charge(id admission.QueryID, cpu time.Duration, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q, ok := b.queries[id]
	if !ok || q.st != running || q.user == "" {
		return
	}
	l := b.pools[q.pool].limits.Users
	if !l.Fair || l.HalfLife <= 0 {
		return
	}
	k := usageKey{q.pool, q.user}
	b.charges[k] = b.charges[k].Add(cpu, now, l.HalfLife)
	b.poke()
}

// writeCharges adds the charges to the usage keys, each in a transaction
// guarded by the key's revision as read (another node's charge in
// between makes it read again, up to three times); a charge not written
// is kept for a later pump. b.mu is not held.
func (b *Backend) writeCharges() {
	b.mu.Lock()
	charges := b.charges
	b.charges = map[usageKey]admission.Usage{}
	halfLife := map[string]time.Duration{}
	for k := range charges {
		if p, ok := b.pools[k.pool]; ok {
			halfLife[k.pool] = p.limits.Users.HalfLife
		}
	}
	b.mu.Unlock()
	failed := map[usageKey]admission.Usage{}
	for k, local := range charges {
		h := halfLife[k.pool]
		if h <= 0 {
			continue // no longer a fair pool with a half-life
		}
		if !b.addUsage(k, local, h) {
			failed[k] = local
		}
	}
	b.mu.Lock()
	b.charging = false
	for k, u := range failed {
		now := time.Now()
		b.charges[k] = admission.Usage{Seconds: b.charges[k].Now(now, halfLife[k.pool]) + u.Now(now, halfLife[k.pool]), At: now}
	}
	b.mu.Unlock()
}

// addUsage adds local to the usage key of k; it reports whether it did.
func (b *Backend) addUsage(k usageKey, local admission.Usage, halfLife time.Duration) bool {
	key := b.keys.usage(k.pool, k.user)
	for range 3 {
		ctx, cancel := b.request()
		start := time.Now()
		resp, err := b.cli.Get(ctx, key)
		b.session.note(start, err)
		if err != nil {
			cancel()
			return false
		}
		var remote admission.Usage
		var rev int64
		if len(resp.Kvs) > 0 {
			rev = resp.Kvs[0].ModRevision
			remote, _ = decodeUsage(resp.Kvs[0].Value) // a refused value counts as none
		}
		now := time.Now()
		v, _ := json.Marshal(usageRecord{Seconds: remote.Now(now, halfLife) + local.Now(now, halfLife), AtUnixMilli: now.UnixMilli()})
		start = time.Now()
		put, err := b.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(clientv3.OpPut(key, string(v))).Commit()
		b.session.note(start, err)
		cancel()
		if err != nil {
			return false
		}
		if put.Succeeded {
			return true
		}
	}
	return false
}

// placeLocked is where queued query q stands in its pool's start order;
// np.mu and the cluster's lock are held. It reports false when the watch
// has not shown its key.
func (np *pipeline) placeLocked(q *query, now time.Time) (admission.Place, bool) {
	v := np.cluster.view(q.pool)
	l := np.pools[q.pool].limits.Users
	if v.position(q.rev, q.seq) < 0 {
		return admission.Place{}, false
	}
	order := startOrder(v, l, now)
	counts := userCounts(v)[q.user]
	pl := admission.Place{Fair: l.Fair, User: q.user, UserRunning: counts[0], UserQueued: counts[1]}
	mine, placed := order[q.token]
	ahead := map[string]bool{}
	for _, e := range v.queue {
		at, ok := order[e.Token]
		switch {
		case e.User == q.user && e.Token != q.token && (ok && placed && at < mine || !placed && queueOrder(e, entry{rev: q.rev, seq: q.seq}) < 0):
			pl.OwnAhead++
		case e.User != q.user && ok && (!placed || at < mine):
			ahead[e.User] = true
			if !l.Fair {
				pl.Ahead++
			}
		}
	}
	if l.Fair {
		pl.UsersAhead = len(ahead)
		pl.Ahead = pl.UsersAhead
	}
	pl.Ahead += pl.OwnAhead
	pl.Position = pl.Ahead + 1
	return pl, true
}
