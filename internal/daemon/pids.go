package daemon

import (
	"sync"

	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/observe"
)

// A query's tasks at its end: the forks and thread creations a task
// limit refused (the query cgroup's pids.events max) and, when the limit
// was QUERY_PIDS_LIMIT or TOTAL_PIDS_LIMIT, which ([observe.ForkLimit]),
// for the client to tell the user as it tells an OOM kill. Where the
// kernel counts a refusal at the limit reached (pids.events.local), a
// refusal at the pool's limit is in the pool's count, not the query's:
// the pool's is read when the query starts and when it ends.

// poolPidsBefore reads the pool's tasks when a query starts, the baseline
// of its refusals; nil when it has no task limit or cannot be read.
func (h *limitHits) poolPidsBefore(pool string) *observe.Pids {
	ps, ok := h.rp.poolState(pool)
	if !ok || ps.Pool.PidsMax <= 0 {
		return nil
	}
	p, err := h.cg.PoolPids(pool)
	if err != nil {
		return nil
	}
	return p
}

// queryPids fills st's fork figures from the query cgroup's tasks p (nil
// without the pids controller) and logs a refusal at a limit of
// poolagent's; the pool's count of its ended queries' refusals grows.
func (h *limitHits) queryPids(st *protocol.Stats, pool, query string, p, poolBefore *observe.Pids) {
	if p == nil {
		return
	}
	st.ForksRefused = p.Events.Max
	h.refused.add(pool, p.Events.Max)
	if st.Fork = h.forkRefused(pool, p, poolBefore); st.Fork == nil {
		if p.Events.Max > 0 {
			h.log.Info("query had forks refused, not at a limit of poolagent's", "pool", pool, "query", query, "refused", p.Events.Max)
		}
		return
	}
	h.log.Warn("query had forks refused at a task limit", "pool", pool, "query", query, "limit", st.Fork.Limit,
		"query_pids_limit", st.Fork.QueryLimit, "total_pids_limit", st.Fork.PoolLimit, "refused", st.Fork.Refused, "in_pool", st.Fork.InPool)
}

// forkRefused is the limit of poolagent's that refused forks in the query
// whose tasks are p, as the pool file sets it; nil when none did.
// poolBefore is the pool's reading at the query's start (nil: none).
func (h *limitHits) forkRefused(pool string, p, poolBefore *observe.Pids) *protocol.ForkRefused {
	ps, ok := h.rp.poolState(pool)
	if !ok || p == nil {
		return nil
	}
	var poolAfter *observe.Pids
	if poolBefore != nil && p.Hierarchical {
		poolAfter, _ = h.cg.PoolPids(pool)
	}
	limit := observe.ForkLimit(p, poolBefore, poolAfter, ps.Query.PidsMax > 0, ps.Pool.PidsMax > 0)
	if limit == "" {
		return nil
	}
	f := &protocol.ForkRefused{Limit: limit, Refused: p.Events.Max, QueryLimit: max(ps.Query.PidsMax, 0), PoolLimit: max(ps.Pool.PidsMax, 0)}
	if p.Hierarchical && limit == protocol.OOMLimitPool {
		f.Refused, f.InPool = poolAfter.Events.Max-poolBefore.Events.Max, true
	}
	return f
}

// refusals counts, by pool, the forks refused in its ended queries. The
// zero value is ready.
type refusals struct {
	mu sync.Mutex
	n  map[string]uint64
}

func (r *refusals) add(pool string, n uint64) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]uint64{}
	}
	r.n[pool] += n
}

func (r *refusals) count(pool string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[pool]
}
