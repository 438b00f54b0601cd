package admission

import "time"

// Backend holds the admission state the daemon admits queries against: the
// pools' limits, their running sets and FIFO queues, the host load and the
// counters the views and metrics show. [Controller] is the single-host
// implementation and the reference model: a second implementation (fleet
// mode, where the running sets and queues are shared by many hosts through
// etcd) must give the same answers as a Controller would for the same
// sequence of calls on one host, and differs only where other hosts act.
//
// # Calls and time
//
// The daemon serialises its calls: no two methods run at once, so an
// implementation needs no lock of its own for them (it may still have
// goroutines of its own, see Events). Every method that changes state
// takes now, the daemon's clock; an implementation never reads the clock
// to decide a local call's outcome, so tests drive it with a fake one. A
// call should not block for long (the daemon holds its admission lock
// across it, and every client's admission waits for that lock): a backend
// that waits on the network bounds each call, and delivers what it learns
// later through Events rather than by waiting.
//
// # Query ids
//
// Submit and Adopt return a QueryID that names the query in every later
// call, unique among this daemon's live queries and never 0. The daemon
// names the query's cgroup after it, so ids must not repeat while the
// daemon runs.
//
// # Events
//
// An [Event] says that a queued query started (Err nil, QueuedFor its
// wait) or failed while waiting (Err an [*Error] wrapping one of the
// sentinels: ErrQueueFull, ErrPoolDisabled, ErrDelayDeadline,
// ErrPoolDropped). Each queued query gets exactly one event, after which
// its id is running (started) or forgotten (failed); a query that left
// (Leave) gets none. Events reach the daemon two ways:
//
//   - returned by the call that caused them (Configure, Leave, Tick,
//     Sample): a slot freed here, a limit loosened here, a deadline seen
//     by Tick;
//   - sent on the channel Events returns, for what happens without a call
//     of this daemon: in fleet mode another host freed a slot, a lease
//     expired, the shared queue moved.
//
// An event goes one way or the other, never both.
//
// # Deciding over the network
//
// A backend whose decisions need the network (fleet mode: an etcd
// transaction) must not make Submit wait for it. Its Submit may return a
// query neither started nor placed: not started, no error, and Position 0.
// The decision then comes as events: a start, a refusal (an Event whose
// Err is the [*Error] Submit would have returned, e.g. ErrQueueFull), or an
// Event with Queued set once the query waits in its queue (Position is then
// its place), followed later by its final event. The daemon tells its
// client the query is queued only then.
type Backend interface {
	// Configure replaces the pools' limits (start, reload, ALTER). A pool
	// absent from pools is dropped: its queued queries fail with
	// ErrPoolDropped and its running ones keep their slots until they
	// leave; the default pool is added, unlimited, when pools lacks it.
	// A queue longer than a lowered QUEUE_SIZE loses its newest queries
	// (ErrQueueFull), a pool whose limit became 0 fails its queue
	// (ErrPoolDisabled), and loosened limits start queued queries.
	Configure(pools map[string]Limits, now time.Time) []Event
	// Submit asks to run a query in pool. It returns the query's id and
	// whether it started at once; one that did not start is queued (or, in
	// a backend deciding over the network, not decided yet: see above) and
	// gets an Event later. A refused query gets an [*Error] (queue full,
	// pool disabled) and no id; a pool that does not exist or was dropped
	// gets an error wrapping ErrUnknownPool. A backend that cannot decide
	// (fleet mode cut off from its shared state) returns an error that
	// says so; the daemon passes its text to the client.
	// userName is who runs it (an [Identity]'s UserKey), for the pool's
	// per-user limits and fair order.
	Submit(pool, userName string, now time.Time) (id QueryID, started bool, err error)
	// Adopt counts a query already running in pool without admitting it:
	// one the daemon finds in its cgroup when it starts, admitted by an
	// earlier daemon. It takes a running slot (not counted as admitted, no
	// load reservation); a pool unknown to the backend is kept as dropped
	// until its adopted queries leave. It counts as user's (the user key
	// of whoever owns its processes, Identity.UserKey), or no user's when
	// user is "". It ends with Leave like any query.
	Adopt(pool, user string, now time.Time) QueryID
	// Leave ends a query: a running one frees its slot (which may start
	// queued ones: their events are returned), a queued one leaves the
	// queue. Unknown ids are ignored, so a query may leave twice.
	Leave(id QueryID, now time.Time) []Event
	// Charge adds CPU time a running query used to its user's usage of
	// the pool (the fair order's measure); unknown ids are ignored.
	Charge(id QueryID, cpu time.Duration, now time.Time)
	// Tick fails the queued queries whose QUERY_CANCEL_AFTER_SECONDS
	// deadline is at or before now (ErrDelayDeadline).
	Tick(now time.Time) []Event
	// Sample records the host's CPU load, percent busy over the last
	// sample interval, and reports whether the load admission refreshed
	// (which starts queued queries that the load held back).
	Sample(now time.Time, busyPercent float64) (events []Event, refreshed bool)
	// Events returns the channel on which the backend delivers events that
	// no call of the daemon caused; nil when there are none (Controller).
	// It returns the same channel every time. The daemon reads it until
	// it stops; the backend must not hold anything a method call needs
	// while it sends, since the daemon takes its admission lock (and so
	// may call a method) before reading the next event.
	Events() <-chan Event
	// Place is where a queued query stands in its pool's queue, what
	// WhyWaiting explains; false when the query is not queued, or not
	// decided yet.
	Place(id QueryID, now time.Time) (Place, bool)
	// PoolLimits returns the limits of a pool that exists and is not
	// dropped.
	PoolLimits(pool string) (Limits, bool)
	// Pools returns every pool's state and counters, sorted by name.
	Pools() []PoolStats
	// Active returns the names of the pools with running queries on this
	// host, sorted: the set the weighted max-min planner divides this
	// host's CPU among.
	Active() []string
	// Load returns the state of CPU-load admission.
	Load() LoadStats
}

var _ Backend = (*Controller)(nil)

// Events implements [Backend]: a Controller returns every event from the
// call that caused it, so it has no channel.
func (c *Controller) Events() <-chan Event { return nil }
