package daemon

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/observe"
)

// query is one query from its classification (or, for a query of an
// earlier daemon, its adoption) to its end, and the one owner of what it
// holds: its row in the queries view, its slot in the admission backend
// once submitted, the channel its admission event comes on while it
// waits, and its cgroup once admitted. Release gives the slot back and
// forgets the query, once, however the query ends; keep leaves the slot
// to the next daemon instead, when this one stops while the query runs.
// A query that was given a cgroup ends through end, whatever ended it (its
// command's exit, an administrator's kill, its client's going for a bound
// query, a container's last process, a query of an earlier daemon):
// end waits for the cgroup to empty, reads and removes it, then Releases.
//
// The fields of queryView set at classification never change; the rest
// of query is guarded by registry.mu.
type query struct {
	queryView
	s *Server
	// wait receives the query's admission events while it is queued.
	wait chan admission.Event
	// kept: left to the next daemon; released: Release has run.
	kept, released bool
	// used is the CPU time its cgroup used, charged to its user at
	// Release (0: not known). Only its owner sets it, before Release.
	used time.Duration
	// endUsec is the CPU time (µs) its cgroup had used at its end, once
	// empty, and endRead is set when that was read: the history tells
	// from them what the queries that ended ran (history.Ended). Only
	// its owner sets them, before Release.
	endUsec uint64
	endRead bool
	// cg is its cgroup, named once the query is (at admission or
	// adoption) and used by its owner's goroutines alone.
	cg *pooltree.Query
	// adopted: a query of an earlier daemon, whose CPU time ran under
	// that daemon's fair order and is not charged at Release.
	adopted bool
}

// queryView is what the queries view shows of a query of a connected
// client.
type queryView struct {
	id         admission.Identity
	clientPID  int
	pool       string
	classifier string
	arrived    time.Time
	// qid is set once the query was submitted (queued or started).
	qid admission.QueryID
	// name, admitted, queuedFor and cpuLimit are set once it was admitted.
	name      string
	admitted  time.Time
	queuedFor time.Duration
	cpuLimit  float64
	// position is the queue position while queued and why why it waits
	// (registry.submitted).
	position int
	why      protocol.Wait
	// userRunning and userQueued are its user's queries in its pool
	// (registry.submitted).
	userRunning, userQueued int
}

// newQuery registers the classified query of a client, identified as
// id, for pool.
func (s *Server) newQuery(id admission.Identity, clientPID int, place admission.Placement) *query {
	q := &query{
		queryView: queryView{id: id, clientPID: clientPID, pool: place.Pool, classifier: place.Classifier, arrived: time.Now()},
		s:         s,
		// Room for a Queued event and the final one.
		wait: make(chan admission.Event, 2),
	}
	s.reg.begin(q)
	return q
}

// adoptQuery counts the query of an earlier daemon whose cgroup cg still
// holds processes, as the query of the user who owns them
// (adoptedOwner), for the per-user limits, the fair order and the usage.
func (s *Server) adoptQuery(cg *pooltree.Query) *query {
	k := cg.Key()
	q := &query{queryView: queryView{pool: k.Pool, name: k.Name}, s: s, cg: cg, adopted: true}
	user := ""
	if id, err := s.adoptedOwner(k); err != nil {
		s.cfg.Log.Warn("owner of a query of an earlier daemon not known; it counts for no user", "pool", k.Pool, "query", k.Name, "err", err)
	} else {
		q.id, user = id, id.UserKey()
	}
	s.reg.adopt(q, user)
	return q
}

// adoptedOwner is the identity of the user owning the first process of
// the query cgroup k: the client the earlier daemon placed there, or its
// command.
func (s *Server) adoptedOwner(k pooltree.QueryKey) (admission.Identity, error) {
	tl, ok := s.cg.(history.ThreadLister)
	if !ok {
		return admission.Identity{}, errors.New("the cgroups cannot list their threads")
	}
	tids, _, err := tl.Threads(k.String(), 1)
	if err != nil {
		return admission.Identity{}, err
	}
	if len(tids) == 0 {
		return admission.Identity{}, errors.New("no process left in it")
	}
	uid, gid, err := peer.Owner(s.cfg.ProcRoot, tids[0])
	if err != nil {
		return admission.Identity{}, err
	}
	return s.users.Identity(&unix.Ucred{Pid: int32(tids[0]), Uid: uid, Gid: gid})
}

// end is the end of a query given a cgroup: it waits until q's cgroup is
// empty, reads its accounting (st), removes it and Releases q. When ctx
// ends first (the daemon stops), q is kept instead: it runs on, and the
// next daemon adopts its cgroup; the error is then ctx's. A cgroup that
// cannot be read or removed frees the slot rather than hold it for ever,
// and the error says why.
func (q *query) end(ctx context.Context) (st observe.Sample, err error) {
	defer q.Release()
	if err := q.cg.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			q.keep()
		}
		return observe.Sample{}, err
	}
	st, err = q.cg.Stat()
	q.endUsec, q.endRead = st.CPU.UsageUsec, err == nil && st.UsageKnown
	err = errors.Join(err, q.cg.Remove())
	if !q.adopted {
		q.used = time.Duration(st.CPU.UsageUsec) * time.Microsecond
	}
	return st, err
}

// Release ends the query: its slot (unless kept) goes back, which may
// start queued queries, and the pools are re-planned, since the set of
// active pools may have changed. Only the first call does anything.
func (q *query) Release() {
	if q.s.reg.release(q) {
		q.s.rp.request()
	}
}

// keep leaves the query's slot and cgroup to the next daemon: the daemon
// stops while it runs.
func (q *query) keep() { q.s.reg.keep(q) }
