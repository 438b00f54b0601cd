package pooltree

import (
	"context"
	"time"

	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// QueryKey names one query cgroup: <Pool>/<Name> below the pool root.
type QueryKey struct {
	Pool, Name string
}

// String is the query cgroup's path below the pool root, "<pool>/<name>".
func (k QueryKey) String() string { return k.Pool + "/" + k.Name }

// QueryTree is the pool tree's side of a query cgroup, what a [Query]
// works through: *Handle's calls of queries.go and confine.go. Pool and
// query names are plain names, never paths.
type QueryTree interface {
	// MakeQuery creates the query cgroup <pool>/<query> with ps's query
	// template; it stays, empty, through the tree's reconciles until
	// RemoveQuery.
	MakeQuery(ps planner.PoolState, query string) error
	// MoveToQuery moves process pid into the query cgroup MakeQuery made
	// with ps.
	MoveToQuery(ps planner.PoolState, query string, pid int) error
	// LimitsLeft returns the CPU and memory limits, set outside the query
	// cgroup's own path, that process pid would leave by being placed in
	// <pool>/<query>.
	LimitsLeft(ps planner.PoolState, query string, pid int) ([]observe.CgroupLimit, error)
	// Populated reports whether the query cgroup still holds a process;
	// one that is gone is empty.
	Populated(pool, query string) (bool, error)
	// QueryStat reads the query cgroup's CPU accounting and memory; one
	// that is gone reads as zero.
	QueryStat(pool, query string) (observe.Sample, error)
	// RemoveQuery removes the (empty) query cgroup.
	RemoveQuery(pool, query string) error
	// KillQuery kills every process in the query cgroup at once.
	KillQuery(pool, query string) error
	// QueryCgroup is the query cgroup's path as /proc/PID/cgroup names it
	// on cgroup v2; an error on cgroup v1.
	QueryCgroup(pool, query string) (string, error)
}

// EmptyNotifier is a QueryTree that can say when a query cgroup may have
// emptied, so that [Query.Wait] need not poll it: *Handle.
type EmptyNotifier interface {
	// NotifyEmpty is [Handle.NotifyEmpty].
	NotifyEmpty(pool, query string, wake chan<- struct{}) (stop func(), err error)
}

// Query is one query cgroup's life, in the shape of a container
// runtime's cgroup lifecycle: named (NewQuery), made with its pool's
// query template (Make), given processes (Move), waited for until empty
// (Wait), read (Stat) and removed (Remove); Kill ends its processes at
// once. A cgroup that is gone reads as empty and as zero, so a query whose
// pool was dropped with it ends like any other. Its methods may be called
// from several goroutines, but Make and Move belong to one.
type Query struct {
	tree QueryTree
	key  QueryKey
	// ps is the pool state Make made the cgroup with, which Move moves by.
	ps planner.PoolState
	// look makes Wait look at once (Look).
	look chan struct{}
}

// NewQuery names the query cgroup k of tree; it makes nothing.
func NewQuery(tree QueryTree, k QueryKey) *Query {
	return &Query{tree: tree, key: k, look: make(chan struct{}, 1)}
}

// Key names the query cgroup.
func (q *Query) Key() QueryKey { return q.key }

// LimitsLeft returns the CPU and memory limits, set outside the query
// cgroup's own path, that process pid would leave by being moved into it
// once made with ps ([Handle.LimitsLeft]).
func (q *Query) LimitsLeft(ps planner.PoolState, pid int) ([]observe.CgroupLimit, error) {
	return q.tree.LimitsLeft(ps, q.key.Name, pid)
}

// Make creates the query cgroup with ps's query template (ps names its
// pool); it stays, empty, through the tree's reconciles until Remove.
func (q *Query) Make(ps planner.PoolState) error {
	q.ps = ps
	return q.tree.MakeQuery(ps, q.key.Name)
}

// Move moves process pid into the query cgroup Make made.
func (q *Query) Move(pid int) error {
	return q.tree.MoveToQuery(q.ps, q.key.Name, pid)
}

// Path is the query cgroup's path as /proc/PID/cgroup names it on cgroup
// v2 ([Handle.QueryCgroup]); an error wrapping ErrNotUnified on v1.
func (q *Query) Path() (string, error) {
	return q.tree.QueryCgroup(q.key.Pool, q.key.Name)
}

// Populated reports whether the query cgroup still holds a process.
func (q *Query) Populated() (bool, error) {
	return q.tree.Populated(q.key.Pool, q.key.Name)
}

// Stat reads the query cgroup's CPU accounting and memory.
func (q *Query) Stat() (observe.Sample, error) {
	return q.tree.QueryStat(q.key.Pool, q.key.Name)
}

// Remove removes the query cgroup, which must be empty; removing one
// that is gone only forgets it.
func (q *Query) Remove() error {
	return q.tree.RemoveQuery(q.key.Pool, q.key.Name)
}

// Kill kills every process in the query cgroup at once
// ([Handle.KillQuery]); the error wraps fs.ErrNotExist when the cgroup is
// gone.
func (q *Query) Kill() error {
	return q.tree.KillQuery(q.key.Pool, q.key.Name)
}

// Look makes a Wait under way look at the cgroup at once, as when the
// query's client saw its command exit; it never blocks.
func (q *Query) Look() {
	select {
	case q.look <- struct{}{}:
	default:
	}
}

// Polling intervals of Wait: with the kernel's notice of an emptied
// cgroup the poll is only a safety net, for a notice that cannot come (on
// cgroup v1, a process an administrator moved out of the query), and a
// sleeping query's every look costs the daemon a wake-up and a read of its
// thread list: at every 30 s, a thousand sleeping queries cost the daemon
// 33 looks a second, a fifth of its CPU at rest (docs/performance.md, At
// scale), and a ramp from a millisecond up to it as many looks again in
// each query's first minutes. 5 minutes is the longest a query so missed
// holds its slot past its end. After a look that found the cgroup still
// busy (the last threads of an exiting process on their way out), and
// without the notice, the poll starts at firstPoll and doubles.
const (
	firstPoll       = time.Millisecond
	maxPoll         = 100 * time.Millisecond
	maxPollNotified = 5 * time.Minute
)

// Wait returns once the query cgroup holds no process, or with ctx's
// error. It looks at once, on Look and on the tree's notice that the
// cgroup may have emptied (an EmptyNotifier). With the notice it looks
// again every maxPollNotified; without it, and after a Look or notice
// that found the cgroup busy, every firstPoll and then less often, up to
// every maxPoll (maxPollNotified with the notice).
func (q *Query) Wait(ctx context.Context) error {
	longest, poll := maxPoll, firstPoll
	emptied := make(chan struct{}, 1)
	if n, ok := q.tree.(EmptyNotifier); ok {
		// Watch before the first look, so no change falls in between.
		if stop, err := n.NotifyEmpty(q.key.Pool, q.key.Name, emptied); err == nil {
			defer stop()
			longest, poll = maxPollNotified, maxPollNotified
		}
	}
	t := time.NewTimer(poll)
	defer t.Stop()
	for {
		busy, err := q.Populated()
		if err != nil {
			return err
		}
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-q.look:
			poll = firstPoll
		case <-emptied:
			poll = firstPoll
		case <-t.C:
			poll = min(2*poll, longest)
		}
		t.Reset(poll)
	}
}
