package fleet

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
)

// Pools returns every pool's state, sorted by name. Running and Queued are
// the cluster's for a pool with a global limit (as the watch last showed
// them) and this node's for a pool without; the counters (Admitted,
// Rejected, ...) are this node's.
func (b *Backend) Pools() []admission.PoolStats {
	b.lock()
	defer b.unlock()
	out := make([]admission.PoolStats, 0, len(b.pools))
	for name, p := range b.pools {
		s := p.stats
		s.Dropped = p.dropped
		if p.limits.Global() {
			v := b.cluster.view(name)
			s.Running, s.Queued = v.running(), len(v.queue)
			for user, c := range userCounts(v) {
				if user != "" {
					s.Users = append(s.Users, admission.UserStats{User: user, Running: c[0], Queued: c[1], Usage: v.usage[user]})
				}
			}
			s = admission.WithUserCounts(s)
		} else {
			s.Running = p.local
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b admission.PoolStats) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Query is one query of a globally limited pool somewhere in the cluster.
type Query struct {
	// Token names the query's registration in the cluster.
	Token   string
	Pool    string
	Node    string
	Running bool
	// Position is a queued query's place in its pool's start order (the
	// queue's under FIFO, startOrder), 1 for the next; 0 for a running
	// one.
	Position int
	Arrived  time.Time
}

// Queries returns the queries of the globally limited pools across the
// cluster, running ones first, then the queue in arrival order, each with
// its place in the pool's start order, pool by pool.
func (b *Backend) Queries() []Query {
	now := time.Now()
	b.lock()
	defer b.unlock()
	var out []Query
	for _, name := range slices.Sorted(maps.Keys(b.cluster.views)) {
		v := b.cluster.views[name]
		var run []Query
		for _, e := range v.slots {
			run = append(run, Query{Token: e.Token, Pool: name, Node: e.Node, Running: true, Arrived: time.UnixMilli(e.ArrivedUnixMilli)})
		}
		for _, e := range v.extras {
			run = append(run, Query{Token: e.Token, Pool: name, Node: e.Node, Running: true, Arrived: time.UnixMilli(e.ArrivedUnixMilli)})
		}
		slices.SortFunc(run, func(x, y Query) int { return x.Arrived.Compare(y.Arrived) })
		out = append(out, run...)
		// Positions in the start order (the queue's under FIFO); the
		// queries of users held at their limit after every other.
		var order map[string]int
		if p, ok := b.pools[name]; ok {
			order = startOrder(v, p.limits.Users, now)
		}
		held := len(order)
		for i, e := range v.queue {
			pos, ok := order[e.Token]
			switch {
			case order == nil:
				pos = i
			case !ok:
				pos, held = held, held+1
			}
			out = append(out, Query{Token: e.Token, Pool: name, Node: e.Node, Position: pos + 1, Arrived: time.UnixMilli(e.ArrivedUnixMilli)})
		}
	}
	return out
}

// Place is where a waiting query stands in its pool's cluster-wide queue:
// its position, 1 for the head; false when it runs, or is not decided yet
// (the daemon has not been told it waits).
// Once the watch shows its key, it stands in the pool's start order
// (startOrder: the queue's, or the fair order among users); until then it
// is at the place its registration read, or, waiting for etcd, behind the
// queue and the pool's earlier arrivals on this node.
func (b *Backend) Place(id admission.QueryID, now time.Time) (admission.Place, bool) {
	b.lock()
	defer b.unlock()
	q, ok := b.queries[id]
	if !ok || !q.told {
		return admission.Place{}, false
	}
	if q.st == queued || q.st == starting {
		if pl, ok := b.placeLocked(q, now); ok {
			return pl, true
		}
	}
	pos := b.positionLocked(q)
	return admission.Place{Position: pos, Ahead: pos - 1, User: q.user}, pos > 0
}

// positionLocked is the place of a waiting query whose key the watch has
// not shown; 0 when it runs. np.mu and the cluster's lock are held.
func (np *pipeline) positionLocked(q *query) int {
	v := np.cluster.view(q.pool)
	switch q.st {
	case queued, starting:
		return max(q.placed, 1)
	case pending:
		ahead := 0
		for _, o := range np.queries {
			if o.pool == q.pool && o.st == pending && o.id < q.id {
				ahead++
			}
		}
		return len(v.queue) + ahead + 1
	}
	return 0
}

// Node names this node in the cluster.
func (b *Backend) Node() string { return b.cfg.Node }

// PoolLimits returns the limits of a pool that exists and is not dropped.
func (b *Backend) PoolLimits(name string) (admission.Limits, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.pools[name]
	if !ok || p.dropped {
		return admission.Limits{}, false
	}
	return p.limits, true
}

// Active returns the names of the pools with queries running on this
// node, sorted: the set this node's weighted max-min planner divides its
// CPU among (RESOURCES_WEIGHT is per node).
func (b *Backend) Active() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	set := map[string]bool{}
	for _, q := range b.queries {
		if q.st == running {
			set[q.pool] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
