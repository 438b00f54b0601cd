package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/poolagent/poolagent/admission"
	"github.com/poolagent/poolagent/protocol"
)

// registry is the daemon's admission state: the admission backend, the
// rules that classify callers, the sessions waiting for an event, and the
// queries of connected clients as `poolagent queries` shows them. Its lock
// is "state" in the lock order (see Server).
type registry struct {
	mu      sync.Mutex
	backend admission.Backend
	access  admission.Access
	waiters map[admission.QueryID]chan admission.Event
	// sessions holds the classified query of each connected client.
	sessions map[*session]*tracked
}

func newRegistry(backend admission.Backend, p Policy) *registry {
	return &registry{
		backend:  backend,
		access:   admission.Access{Model: p.Model, AdminGroup: p.AdminGroup},
		waiters:  map[admission.QueryID]chan admission.Event{},
		sessions: map[*session]*tracked{},
	}
}

// configure makes p's limits and access rules the ones in force; limits
// apply at once (see admission.Backend.Configure).
func (r *registry) configure(p Policy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.access = admission.Access{Model: p.Model, AdminGroup: p.AdminGroup}
	r.dispatch(r.backend.Configure(admission.LimitsFromModel(p.Model), time.Now()))
}

// rules returns the classification and access rules in force.
func (r *registry) rules() admission.Access {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.access
}

// submission is the outcome of submit.
type submission struct {
	id      admission.QueryID
	started bool
	// wait receives the queued query's event; position is its place in
	// the queue, why why it waits, and cancelAfter its pool's queue-wait
	// deadline (0: none).
	wait        <-chan admission.Event
	position    int
	why         protocol.Wait
	cancelAfter time.Duration
}

// submit asks the backend to run a query of user in pool. The backend
// decides at once or later (admission.Backend: a fleet backend never waits
// for etcd here), so r.mu is held for microseconds whatever the pool.
func (r *registry) submit(pool, user string, now time.Time) (submission, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, started, err := r.backend.Submit(pool, user, now)
	if err != nil {
		return submission{}, err
	}
	sub := submission{id: id, started: started}
	if !started {
		// Room for a Queued event and the final one.
		wait := make(chan admission.Event, 2)
		r.waiters[id] = wait
		sub.wait = wait
		sub.position, sub.why = r.whyLocked(id, r.poolsLocked()[pool])
		if l, ok := r.backend.PoolLimits(pool); ok {
			sub.cancelAfter = l.CancelAfter
		}
	}
	return sub, nil
}

// dispatch hands events to their waiting sessions; r.mu is held. Each
// waiter's channel has room for its events: a Queued one (which keeps the
// waiter) and the final one.
func (r *registry) dispatch(events []admission.Event) {
	for _, ev := range events {
		if ch, ok := r.waiters[ev.ID]; ok {
			if !ev.Queued {
				delete(r.waiters, ev.ID)
			}
			ch <- ev
		}
	}
}

// leave ends a query, starting whoever may start next. cpu is the CPU
// time it used, charged to its user first (0 when not known).
func (r *registry) leave(id admission.QueryID, cpu time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.waiters, id)
	now := time.Now()
	if cpu > 0 {
		r.backend.Charge(id, cpu, now)
	}
	r.dispatch(r.backend.Leave(id, now))
}

// tick fails queued queries past their deadline.
func (r *registry) tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dispatch(r.backend.Tick(time.Now()))
}

// sample records the host's load and reports whether load admission
// refreshed.
func (r *registry) sample(now time.Time, busyPercent float64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	events, refreshed := r.backend.Sample(now, busyPercent)
	r.dispatch(events)
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
			r.dispatch([]admission.Event{ev})
			r.mu.Unlock()
		}
	}
}

// adopt counts a query of an earlier daemon, found running in pool.
func (r *registry) adopt(pool string) admission.QueryID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.backend.Adopt(pool, time.Now())
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

// begin registers session se's classified query until end.
func (r *registry) begin(se *session, t *tracked) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sessions[se] = t
}

// end forgets session se's query.
func (r *registry) end(se *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sessions, se)
}

// update changes session se's registered query, if it has one.
func (r *registry) update(se *session, change func(*tracked)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.sessions[se]; t != nil {
		change(t)
	}
}

// submitted returns the registered queries that were submitted, each with
// its queue position (0 once admitted) and why it waits.
func (r *registry) submitted() []tracked {
	r.mu.Lock()
	defer r.mu.Unlock()
	pools := r.poolsLocked()
	var all []tracked
	for _, t := range r.sessions {
		if t.qid == 0 {
			continue
		}
		c := *t
		if c.name == "" {
			c.position, c.why = r.whyLocked(t.qid, pools[t.pool])
		}
		key := t.id.UserKey()
		for _, u := range pools[t.pool].Users {
			if u.User == key {
				c.userRunning, c.userQueued = u.Running, u.Queued
			}
		}
		all = append(all, c)
	}
	return all
}
