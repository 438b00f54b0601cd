package admission

import (
	"errors"
	"fmt"
)

// Sentinels for the ways admission fails; an [*Error] wraps exactly one, so
// callers branch with errors.Is.
var (
	// ErrQueueFull: the pool's running set and queue are full (QUEUE_SIZE).
	ErrQueueFull = errors.New("queue full")
	// ErrPoolDisabled: the pool's CONCURRENT_QUERY_LIMIT is 0.
	ErrPoolDisabled = errors.New("pool disabled")
	// ErrDelayDeadline: the query waited longer than QUERY_CANCEL_AFTER_SECONDS.
	ErrDelayDeadline = errors.New("delay deadline exceeded")
	// ErrPoolDropped: the pool was dropped while the query waited in its queue.
	ErrPoolDropped = errors.New("pool dropped")
	// ErrUnknownPool: no pool of that name exists.
	ErrUnknownPool = errors.New("unknown pool")
)

// Error is a refused admission, worded as YDB words it: the reason on the
// first line, then "Query failed during adding/waiting in workload pool P".
type Error struct {
	Pool   string
	Reason string // first line, without the pool trailer
	kind   error
}

func (e *Error) Error() string {
	return e.Reason + "\nQuery failed during adding/waiting in workload pool " + e.Pool
}

// Unwrap returns the sentinel naming the kind of refusal.
func (e *Error) Unwrap() error { return e.kind }

// queueFullError is YDB's rejection on one host. There are no "local
// pending" requests waiting to be forwarded: the arriving request is the one
// pending (N = 1) and the pool's running plus queued queries are the
// "global delayed/running" ones (M).
func queueFullError(pool string, running, queued int, l Limits) *Error {
	return QueueFullError(pool, 1, running+queued, l)
}

// QueueFullError is YDB's rejection of a query that would overfill a pool:
// localPending (N) requests of this node not yet registered with the pool's
// global state, delayedRunning (M) queries running or queued in it; L is
// QUEUE_SIZE and C is CONCURRENT_QUERY_LIMIT, exactly the figures YDB
// prints.
func QueueFullError(pool string, localPending, delayedRunning int, l Limits) *Error {
	return &Error{
		Pool: pool,
		Reason: fmt.Sprintf("Request was rejected, number of local pending requests is %d, "+
			"number of global delayed/running requests is %d, sum of them is larger than "+
			"allowed limit %d (including concurrent query limit %d) for pool %s",
			localPending, delayedRunning, l.QueueSize, l.ConcurrentQueryLimit, pool),
		kind: ErrQueueFull,
	}
}

// NewError is a refusal of another admission implementation (the fleet
// backend) with YDB's pool trailer; kind is the sentinel errors.Is finds.
func NewError(pool, reason string, kind error) *Error {
	return &Error{Pool: pool, Reason: reason, kind: kind}
}

// DisabledError is the refusal of a pool whose CONCURRENT_QUERY_LIMIT is 0.
func DisabledError(pool string) *Error { return disabledError(pool) }

// DeadlineError is the failure of a query queued past QUERY_CANCEL_AFTER_SECONDS.
func DeadlineError(pool string) *Error { return deadlineError(pool) }

// DroppedError is the failure of a query whose pool was dropped while it waited.
func DroppedError(pool string) *Error { return droppedError(pool) }

func disabledError(pool string) *Error {
	return &Error{
		Pool:   pool,
		Reason: fmt.Sprintf("Resource pool %s was disabled due to zero concurrent query limit", pool),
		kind:   ErrPoolDisabled,
	}
}

func deadlineError(pool string) *Error {
	return &Error{
		Pool:   pool,
		Reason: "Delay deadline exceeded in pool " + pool,
		kind:   ErrDelayDeadline,
	}
}

func droppedError(pool string) *Error {
	return &Error{
		Pool:   pool,
		Reason: fmt.Sprintf("Resource pool %s was dropped while the query waited in its queue", pool),
		kind:   ErrPoolDropped,
	}
}
