package daemon

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/planner"
)

// registry is the daemon's admission state: the admission backend, the
// rules that classify callers, the queries waiting for an event, and the
// queries of connected clients as `poolagent queries` shows them. Its lock
// is "state" in the lock order (see Server); it guards the queries' fields
// (see query).
type registry struct {
	mu      sync.Mutex
	backend admission.Backend
	access  admission.Access
	waiters map[admission.QueryID]*query
	// clients holds the classified query of each connected client.
	clients map[*query]struct{}
	// gen counts the changes to clients that the running list shows: a
	// query begun, released, submitted, adopted or admitted. running is
	// that list as of generation runningGen (sampled.Running), built
	// again only once gen moved on.
	gen, runningGen uint64
	running         map[string][]string
	// ended is what the queries that left the running list used, by
	// pool (history.Ended); runningEnded is it as of runningGen.
	ended, runningEnded map[string]history.Ended
	// changed receives once gen moved on, or the plan changed, since the
	// history last looked (sampled.Changed).
	changed chan struct{}
}

func newRegistry(backend admission.Backend, p Policy) *registry {
	return &registry{
		backend: backend,
		access:  admission.Access{Model: p.Model, AdminGroup: p.AdminGroup},
		waiters: map[admission.QueryID]*query{},
		clients: map[*query]struct{}{},
		ended:   map[string]history.Ended{},
		changed: make(chan struct{}, 1),
	}
}

// changedLocked counts a change to clients that the running list shows;
// r.mu is held.
func (r *registry) changedLocked() {
	r.gen++
	r.tellChanged()
}

// tellChanged tells the history that the running list or the plan
// changed, without waiting: one change not yet taken stands for all.
func (r *registry) tellChanged() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// configure makes p's limits and access rules the ones in force; limits
// apply at once (see admission.Backend.Configure).
func (r *registry) configure(p Policy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.access = admission.Access{Model: p.Model, AdminGroup: p.AdminGroup}
	r.dispatchLocked(r.backend.Configure(admission.LimitsFromModel(p.Model), time.Now()))
}

// rules returns the classification and access rules in force.
func (r *registry) rules() admission.Access {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.access
}

// submission is the outcome of submit.
type submission struct {
	started bool
	// position is the queued query's place in the queue, why why it
	// waits, and cancelAfter its pool's queue-wait deadline (0: none).
	position    int
	why         protocol.Wait
	cancelAfter time.Duration
}

// submit asks the backend to run q in its pool, as its user's. The
// backend decides at once or later (admission.Backend: a fleet backend
// never waits for etcd here), so r.mu is held for microseconds whatever
// the pool. A queued q gets its events on q.wait.
func (r *registry) submit(q *query, now time.Time) (submission, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, started, err := r.backend.Submit(q.pool, q.id.UserKey(), now)
	if err != nil {
		return submission{}, err
	}
	q.qid = id
	r.changedLocked()
	sub := submission{started: started}
	if !started {
		r.waiters[id] = q
		sub.position, sub.why = r.whyLocked(id, r.poolsLocked()[q.pool])
		if l, ok := r.backend.PoolLimits(q.pool); ok {
			sub.cancelAfter = l.CancelAfter
		}
	}
	return sub, nil
}

// dispatchLocked hands events to their waiting queries; r.mu is held.
// Each query's channel has room for its events: a Queued one (which keeps
// the waiter) and the final one.
func (r *registry) dispatchLocked(events []admission.Event) {
	for _, ev := range events {
		if q, ok := r.waiters[ev.ID]; ok {
			if !ev.Queued {
				delete(r.waiters, ev.ID)
			}
			q.wait <- ev
		}
	}
}

// release ends q, once: it forgets q and, unless q was kept, ends its
// query in the backend, having charged its CPU time (q.used) to its user,
// which may start queued ones. It reports whether it ended a query in the
// backend.
func (r *registry) release(q *query) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q.released {
		return false
	}
	q.released = true
	delete(r.clients, q)
	r.changedLocked()
	if q.qid != 0 && q.name != "" { // it leaves the running list
		e := r.ended[q.pool]
		if q.endRead {
			e.Usec += q.endUsec
		} else {
			e.Unread++
		}
		r.ended[q.pool] = e
	}
	if q.qid == 0 || q.kept {
		return false
	}
	delete(r.waiters, q.qid)
	now := time.Now()
	if q.used > 0 {
		r.backend.Charge(q.qid, q.used, now)
	}
	r.dispatchLocked(r.backend.Leave(q.qid, now))
	return true
}

// keep marks q as left to the next daemon: its release ends nothing in
// the backend.
func (r *registry) keep(q *query) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q.kept = true
}

// tick fails queued queries past their deadline.
func (r *registry) tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dispatchLocked(r.backend.Tick(time.Now()))
}

// sample records the host's load and reports whether load admission
// refreshed.
func (r *registry) sample(now time.Time, busyPercent float64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	events, refreshed := r.backend.Sample(now, busyPercent)
	r.dispatchLocked(events)
	return refreshed
}

// deliver hands the events the backend sends by itself (admission.Backend
// Events) to their sessions until ctx ends.
func (r *registry) deliver(ctx context.Context) {
	events := r.backend.Events()
	if events == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			r.mu.Lock()
			r.dispatchLocked([]admission.Event{ev})
			r.mu.Unlock()
		}
	}
}

// adopt counts query q of an earlier daemon, found running in its pool,
// as user's ("" when not known).
func (r *registry) adopt(q *query, user string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q.qid = r.backend.Adopt(q.pool, user, time.Now())
	r.changedLocked()
}

// queued returns a queued query's place in its pool's queue and why it
// waits; position 0 once it is not queued.
func (r *registry) queued(id admission.QueryID, pool string) (position int, why protocol.Wait) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.whyLocked(id, r.poolsLocked()[pool])
}

// poolsLocked returns every pool's admission state by name; r.mu is held.
func (r *registry) poolsLocked() map[string]admission.PoolStats {
	all := r.backend.Pools()
	out := make(map[string]admission.PoolStats, len(all))
	for _, p := range all {
		out[p.Name] = p
	}
	return out
}

// whyLocked is queued for a pool's state read already; r.mu is held.
func (r *registry) whyLocked(id admission.QueryID, pool admission.PoolStats) (int, protocol.Wait) {
	pl, ok := r.backend.Place(id, time.Now())
	if !ok {
		return 0, protocol.Wait{}
	}
	return pl.Position, admission.WhyWaiting(pl, pool, r.backend.Load())
}

func (r *registry) pools() []admission.PoolStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.backend.Pools()
}

func (r *registry) load() admission.LoadStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.backend.Load()
}

func (r *registry) active() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.backend.Active()
}

// begin registers q, a connected client's classified query, until its
// release.
func (r *registry) begin(q *query) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients[q] = struct{}{}
	r.changedLocked()
}

// admitted records that q was admitted after waiting queuedFor, with
// cgroup name and a CPU limit of cpuLimit vCPUs.
func (r *registry) admitted(q *query, name string, queuedFor time.Duration, cpuLimit float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q.name, q.admitted, q.queuedFor, q.cpuLimit = name, time.Now(), queuedFor, cpuLimit
	r.changedLocked()
}

// submitted returns what the queries view shows of the connected
// clients' queries that were submitted, each with its queue position (0
// once admitted) and why it waits.
func (r *registry) submitted() []queryView {
	r.mu.Lock()
	defer r.mu.Unlock()
	pools := r.poolsLocked()
	var all []queryView
	for q := range r.clients {
		if q.qid == 0 {
			continue
		}
		v := q.queryView
		if v.name == "" {
			v.position, v.why = r.whyLocked(q.qid, pools[q.pool])
		}
		key := q.id.UserKey()
		for _, u := range pools[q.pool].Users {
			if u.User == key {
				v.userRunning, v.userQueued = u.Running, u.Queued
			}
		}
		all = append(all, v)
	}
	return all
}

// sampled is what the history samples (history.Pools): the plan the
// replanner last applied and the queries of the registry, admitted and
// placed, by pool.
type sampled struct {
	rp  *replanner
	reg *registry
}

func (p sampled) Desired() planner.Desired { return p.rp.desired() }

// Changed receives when a query came or went, or a plan was applied.
func (p sampled) Changed() <-chan struct{} { return p.reg.changed }

// Running lists the query cgroups of the queries admitted and placed,
// by pool, and what those that left the list used (registry.release).
// The history looks several times a second; the list is built again only
// when a query came or went since the last look, and is shared: not to
// be modified.
func (p sampled) Running() (map[string][]string, map[string]history.Ended) {
	r := p.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running != nil && r.runningGen == r.gen {
		return r.running, r.runningEnded
	}
	out := map[string][]string{}
	for q := range r.clients {
		if q.qid != 0 && q.name != "" {
			out[q.pool] = append(out[q.pool], q.name)
		}
	}
	r.running, r.runningEnded, r.runningGen = out, maps.Clone(r.ended), r.gen
	return out, r.runningEnded
}
