package daemon

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/protocol"
)

// query is one query from its classification (or, for a query of an
// earlier daemon, its adoption) to its end, and the one owner of what it
// holds: its row in the queries view, its slot in the admission backend
// once submitted, the channel its admission event comes on while it
// waits, and its cgroup once admitted. Release gives the slot back and
// forgets the query, once, however the query ends; keep leaves the slot
// to the next daemon instead, when this one stops while the query runs.
// The cgroup is removed, once it is empty, by whoever waits for that
// (session.finish, Server.adoptRunning), before Release.
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

// adoptQuery counts the query of an earlier daemon whose cgroup <pool>/<name>
// still holds processes, as the query of the user who owns them
// (adoptedOwner), for the per-user limits, the fair order and the usage.
func (s *Server) adoptQuery(pool, name string) *query {
	q := &query{queryView: queryView{pool: pool, name: name}, s: s}
	user := ""
	if id, err := s.adoptedOwner(pool, name); err != nil {
		s.cfg.Log.Warn("owner of a query of an earlier daemon not known; it counts for no user", "pool", pool, "query", name, "err", err)
	} else {
		q.id, user = id, id.UserKey()
	}
	s.reg.adopt(q, user)
	return q
}

// adoptedOwner is the identity of the user owning the first process of
// the query cgroup <pool>/<name>: the client the earlier daemon placed
// there, or its command.
func (s *Server) adoptedOwner(pool, name string) (admission.Identity, error) {
	tl, ok := s.cg.(threadLister)
	if !ok {
		return admission.Identity{}, errors.New("the cgroups cannot list their threads")
	}
	tids, _, err := tl.Threads(pool+"/"+name, 1)
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
