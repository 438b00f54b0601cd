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

// queueFullError is YDB's rejection. On one host there are no "local
// pending" requests waiting to be forwarded: the arriving request is the one
// pending (N = 1) and the pool's running plus queued queries are the
// "global delayed/running" ones (M). L is QUEUE_SIZE and C is
// CONCURRENT_QUERY_LIMIT, exactly the figures YDB prints.
func queueFullError(pool string, running, queued int, l Limits) *Error {
	return &Error{
		Pool: pool,
		Reason: fmt.Sprintf("Request was rejected, number of local pending requests is %d, "+
			"number of global delayed/running requests is %d, sum of them is larger than "+
			"allowed limit %d (including concurrent query limit %d) for pool %s",
			1, running+queued, l.QueueSize, l.ConcurrentQueryLimit, pool),
		kind: ErrQueueFull,
	}
}

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
