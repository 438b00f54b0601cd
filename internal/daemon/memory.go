package daemon

import (
	"context"
	"log/slog"
	"math"
	"os"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/pidfd"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/tell"
	"github.com/poolagent/poolagent/observe"
)

// limitHits is what the kernel's enforcement of poolagent's limits did
// to a query, read at its end and told to its client: an OOM kill at its
// memory limit or its pool's (memory.go), forks refused at a task limit
// (pids.go). It reads the pool and query cgroups and the plan in force,
// and counts each pool's refused forks for the metrics; it holds no lock
// of the lock order (refusals' is a leaf).
type limitHits struct {
	cg  Cgroups
	rp  *replanner
	log *slog.Logger
	// refused counts the forks refused in each pool's ended queries.
	refused refusals
	// tellers write what an in-place client's stderr is told, as its
	// user, so that no thread of the daemon's writes there.
	tellers *tell.Tellers
}

// A query's memory at its end: the figures of its Stats and, when the
// kernel's OOM killer enforced the query's own memory limit or its
// pool's on one of its processes, which limit (protocol.OOMKill), for
// the client to tell the user. Nothing is watched while the query runs:
// the query cgroup's memory.events keep the counts until it is removed,
// and the pool's are read once after the start, off the start path, to
// tell a kill by the pool's limit from one by the host's. An in-place
// client's command is waited for on its pidfd (tellInPlace).

// poolMemoryBefore reads the pool's memory when a query starts, the
// baseline of its OOM events; nil when it has no memory limit (no kill
// can be its) or cannot be read.
func (h *limitHits) poolMemoryBefore(pool string) *observe.Memory {
	ps, ok := h.rp.poolState(pool)
	if !ok || ps.Pool.MemoryBytes < 0 {
		return nil
	}
	m, err := h.cg.PoolMemory(pool)
	if err != nil {
		return nil
	}
	return m
}

// queryMemory fills st's memory figures from the query cgroup's memory m
// (nil without the memory controller) and, for an OOM kill that enforced
// the query's or the pool's limit, st.OOM; the daemon's log has a line
// for every kill.
func (h *limitHits) queryMemory(st *protocol.Stats, pool, query string, m, poolBefore *observe.Memory) {
	if m == nil {
		return
	}
	if m.PeakBytes != nil {
		st.PeakMemoryBytes = *m.PeakBytes
	}
	st.MemoryHighEvents, st.MemoryMaxEvents, st.OOMKills = m.Events.High, m.Events.Max, m.Events.OOMKill
	if m.Events.OOMKill == 0 {
		return
	}
	st.OOM = h.oomKill(pool, m, poolBefore)
	if st.OOM == nil {
		h.log.Info("query had processes killed by an OOM killer, not at a limit of poolagent's", "pool", pool, "query", query, "oom_kills", m.Events.OOMKill)
		return
	}
	h.log.Warn("query killed by the kernel's OOM killer at a memory limit", "pool", pool, "query", query, "limit", st.OOM.Limit,
		"limit_bytes", st.OOM.LimitBytes, "parameter", st.OOM.Parameter, "oom_kills", m.Events.OOMKill)
}

// oomKill is the limit of poolagent's an OOM kill in the query (its
// memory m) enforced ([observe.OOMLimit]), named as the pool file sets
// it; nil when none did.
func (h *limitHits) oomKill(pool string, m, poolBefore *observe.Memory) *protocol.OOMKill {
	var poolAfter *observe.Memory
	if poolBefore != nil && m != nil && m.Events.OOMKill > 0 && m.Events.OOM == 0 {
		poolAfter, _ = h.cg.PoolMemory(pool)
	}
	limit := observe.OOMLimit(m, poolBefore, poolAfter)
	d := h.rp.desired()
	ps, ok := d.Pool(pool)
	if limit == "" || !ok || d.Node.MemoryBytes <= 0 {
		return nil
	}
	o := protocol.OOMKill{Limit: limit, NodeBytes: d.Node.MemoryBytes}
	if limit == protocol.OOMLimitQuery {
		o.Parameter, o.LimitBytes = "QUERY_MEMORY_LIMIT_PERCENT_PER_NODE", ps.Query.MemoryBytes
	} else {
		o.Parameter, o.LimitBytes = "TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE", ps.Pool.MemoryBytes
	}
	if o.LimitBytes < 0 {
		return nil // the limit was dropped since: it is no longer the pool's to name
	}
	// The pool file's percents are integers: the limit is one of the
	// node's memory, rounded to a byte.
	o.Percent = int64(math.Round(float64(o.LimitBytes) * 100 / float64(d.Node.MemoryBytes)))
	return &o
}

// tellInPlace serves an in-place query's stderr (fd, a path handle of it
// from tell.Open, which this closes): once the command (the
// client process, which exited is watching) has exited, it reads the
// query cgroup's memory and tasks and, when the command's end was an OOM
// kill at a limit of poolagent's, or forks of the query were refused at
// one, has a teller of the client's user (uid, gid) write the message
// there ([tell.Tellers]): no thread of the daemon's polls, writes or
// closes a file of the user's. The handle opens no file (a reader of
// that pipe sees its end when the command exits, as without poolagent).
// When the query's end
// came first (the command was its last process, and the cgroup is gone
// by the time it is read, or empty and about to go), the kill is the one
// the end's statistics found (ended).
func (h *limitHits) tellInPlace(ctx context.Context, fd int, exited *os.File, ended <-chan protocol.Stats, uid, gid uint32, cg *pooltree.Query, poolBefore *observe.Memory) {
	pool, query := cg.Key().Pool, cg.Key().Name
	defer unix.Close(fd)
	defer exited.Close()
	if err := pidfd.Await(ctx, exited); err != nil {
		return
	}
	var o *protocol.OOMKill
	var f *protocol.ForkRefused
	st, err := cg.Stat()
	switch busy, perr := cg.Populated(); {
	case err == nil && (st.Memory != nil || st.Pids != nil):
		o, f = h.oomKill(pool, st.Memory, poolBefore), h.forkRefused(pool, st.Pids, nil)
	case perr == nil && !busy:
		// Empty or gone: the query's end reads (or read) it at once.
		select {
		case stats := <-ended:
			o, f = stats.OOM, stats.Fork
		case <-ctx.Done():
		}
	}
	var msg string
	if o != nil {
		msg += o.Message("poolagent", query, pool) + "\n"
	}
	if f != nil {
		msg += f.Message("poolagent", query, pool) + "\n"
	}
	if msg == "" {
		return
	}
	if err := h.tellers.Tell(fd, uid, gid, msg); err != nil {
		h.log.Warn("query's end not told on the client's stderr", "pool", pool, "query", query, "uid", uid, "err", err)
	}
}
